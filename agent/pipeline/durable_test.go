package pipeline

import (
	"context"
	"crypto"
	"errors"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mcpready/mcpready/agent/internal/mcptest"
	"github.com/mcpready/mcpready/agent/spool"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/readiness"
	"github.com/mcpready/mcpready/sign"
)

func agentKey(t testing.TB) crypto.Signer {
	k, err := sign.GenerateKey(sign.AlgorithmEd25519)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// openSpool opens a real spool whose fsync fails while failing is set.
func openSpool(t testing.TB, maxBytes int64, failing *atomic.Bool) *spool.Spool {
	s, err := spool.Open(t.TempDir(), spool.Options{AgentID: "agent-1", Signer: agentKey(t), MaxBytes: maxBytes, SegmentBytes: 4 << 10,
		BatchInterval: time.Hour, Fsync: func(f *os.File) error {
			if failing != nil && failing.Load() {
				return syscall.EIO
			}
			return f.Sync()
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// durableSetup is setup with a Ledger over sp (no background writer runs,
// so a queued receipt stays queued) and the policy's class for echo.
func durableSetup(t testing.TB, sp *spool.Spool, class mcpreadyv1.SideEffectClass, continueReadOnly bool) (*Pipeline, State, *mcptest.Upstream) {
	up := mcptest.New(t, mcptest.Options{})
	p := policy()
	p.SideEffects[0].Assigned = class
	pl, st, _ := setup(t, p, map[string]*mcpreadyv1.RegistryEntry{"a": entry("test", up.URL)})
	pl.opts.Ledger = spool.NewWriter(sp, spool.WriterOptions{ContinueReadOnly: continueReadOnly})
	return pl, st, up
}

// The receipt of a state-changing call is in the spool, fsync'd, when the
// answer comes back; a read-only call's receipt is only queued.
func TestStateChangingReceiptDurableBeforeAnswer(t *testing.T) {
	for _, tc := range []struct {
		class   mcpreadyv1.SideEffectClass
		durable bool
	}{
		{mcpreadyv1.SideEffectClass_SIDE_EFFECT_CLASS_STATE_CHANGING, true},
		{mcpreadyv1.SideEffectClass_SIDE_EFFECT_CLASS_UNKNOWN, true},
		{mcpreadyv1.SideEffectClass_SIDE_EFFECT_CLASS_READ_ONLY, false},
	} {
		sp := openSpool(t, 0, nil)
		pl, st, _ := durableSetup(t, sp, tc.class, false)
		res := pl.Call(context.Background(), st, request("test/echo"), newFake(t))
		if res.Answer == nil || res.Answer.IsError {
			t.Fatalf("%v: answer %+v", tc.class, res.Answer)
		}
		if got := sp.Stats().Unsealed == 1; got != tc.durable {
			t.Fatalf("%v: receipt in the spool when the answer came: %v, want %v", tc.class, got, tc.durable)
		}
	}
}

// A full spool refuses a state-changing call before the upstream sees it;
// a read-only call is refused too unless the ledger lets it continue.
func TestFullSpoolRefusesBeforeTheUpstream(t *testing.T) {
	fill := func(sp *spool.Spool) {
		w := spool.NewWriter(sp, spool.WriterOptions{})
		for i := 0; sp.Ready() == nil; i++ {
			rec := &mcpreadyv1.Receipt{ReceiptId: "r", Requested: "filler"}
			if err := w.Record(rec, true); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, tc := range []struct {
		class            mcpreadyv1.SideEffectClass
		continueReadOnly bool
		refused          bool
	}{
		{mcpreadyv1.SideEffectClass_SIDE_EFFECT_CLASS_STATE_CHANGING, true, true},
		{mcpreadyv1.SideEffectClass_SIDE_EFFECT_CLASS_READ_ONLY, false, true},
		{mcpreadyv1.SideEffectClass_SIDE_EFFECT_CLASS_READ_ONLY, true, false},
	} {
		sp := openSpool(t, spool.ReadyReserve+2<<10, nil)
		pl, st, _ := durableSetup(t, sp, tc.class, tc.continueReadOnly)
		fill(sp)
		tr := newFake(t)
		res := pl.Call(context.Background(), st, request("test/echo"), tr)
		te, isErr := ParseToolError(res.Answer)
		if tc.refused != (isErr && te.Code == string(readiness.CodeReceiptsUnavailable)) {
			t.Fatalf("%v continue=%v: answer %+v, refused=%v", tc.class, tc.continueReadOnly, te, tc.refused)
		}
		if tc.refused && len(tr.dialled) != 0 {
			t.Fatalf("%v: refused call dialled %v", tc.class, tr.dialled)
		}
	}
}

// A failed fsync: the answer of the state-changing call is withheld (the
// AI agent learns the call may have run, not its result), and every later
// state-changing call is refused before it starts, also after the disk
// "recovers".
func TestFailedFsyncWithholdsAnswerAndRefusesLater(t *testing.T) {
	var failing atomic.Bool
	sp := openSpool(t, 0, &failing)
	pl, st, _ := durableSetup(t, sp, mcpreadyv1.SideEffectClass_SIDE_EFFECT_CLASS_STATE_CHANGING, true)
	failing.Store(true)
	res := pl.Call(context.Background(), st, request("test/echo"), newFake(t))
	te, ok := ParseToolError(res.Answer)
	if !ok || te.Code != string(readiness.CodeReceiptNotDurable) || te.Hint == "" {
		t.Fatalf("answer with a failed fsync: %+v", res.Answer)
	}
	failing.Store(false)
	tr := newFake(t)
	res = pl.Call(context.Background(), st, request("test/echo"), tr)
	if te, ok := ParseToolError(res.Answer); !ok || te.Code != string(readiness.CodeReceiptsUnavailable) {
		t.Fatalf("state-changing call after a failed fsync: %+v", res.Answer)
	}
	if len(tr.dialled) != 0 {
		t.Fatalf("refused call dialled %v", tr.dialled)
	}
	if err := sp.Ready(); !errors.Is(err, spool.ErrBroken) {
		t.Fatalf("spool after a failed fsync: %v", err)
	}
}

// Durable follows decide's read-only rule on the receipt's classes.
func TestDurableFollowsReadOnlyRule(t *testing.T) {
	ro, unk, sc, un := mcpreadyv1.SideEffectClass_SIDE_EFFECT_CLASS_READ_ONLY, mcpreadyv1.SideEffectClass_SIDE_EFFECT_CLASS_UNKNOWN,
		mcpreadyv1.SideEffectClass_SIDE_EFFECT_CLASS_STATE_CHANGING, mcpreadyv1.SideEffectClass_SIDE_EFFECT_CLASS_UNSPECIFIED
	for _, tc := range []struct {
		consumer, provider mcpreadyv1.SideEffectClass
		attempts           int32
		want               bool
	}{
		{ro, ro, 1, false}, {ro, unk, 1, false}, {ro, sc, 1, true}, {ro, un, 1, true},
		{sc, ro, 1, true}, {unk, ro, 1, true}, {sc, sc, 0, false},
	} {
		rec := &mcpreadyv1.Receipt{ConsumerSideEffect: tc.consumer, ProviderSideEffect: tc.provider, AttemptCount: tc.attempts}
		if got := Durable(rec); got != tc.want {
			t.Errorf("consumer %v provider %v attempts %d: durable %v, want %v", tc.consumer, tc.provider, tc.attempts, got, tc.want)
		}
	}
}

// With a Ledger, a Later's Run hands the receipt over unfinished and
// returns: the spool writer finishes it (digests, Emit) when it appends
// it, on its own goroutine, with the receipt ending when Run ran (the
// answer was sent), not when the writer got to it.
func TestLaterDefersReceiptToLedger(t *testing.T) {
	sp := openSpool(t, 0, nil)
	pl, st, _ := durableSetup(t, sp, mcpreadyv1.SideEffectClass_SIDE_EFFECT_CLASS_READ_ONLY, false)
	w := pl.opts.Ledger.(*spool.Writer)
	var emitted []*mcpreadyv1.Receipt
	pl.opts.Emit = func(r *mcpreadyv1.Receipt) { emitted = append(emitted, r) }
	now := time.Unix(5000, 0)
	pl.opts.Now = func() time.Time { return now }
	var l Later
	res := pl.Call(WithLater(context.Background(), &l), st, request("test/echo"), newFake(t))
	if res.Answer == nil || res.Answer.IsError || !l.Pending() {
		t.Fatalf("answer %+v, pending %v", res.Answer, l.Pending())
	}
	now = now.Add(time.Second) // the answer is sent
	l.Run()
	rec := res.Receipt
	if l.Pending() || len(emitted) != 0 || rec.GetResultDigest() != "" || rec.GetArgumentsDigest() != "" || rec.GetEndedAt() != nil {
		t.Fatalf("after Run: pending %v, %d emitted, receipt finished already: %v", l.Pending(), len(emitted), rec)
	}
	now = now.Add(time.Minute) // the writer appends later
	w.Drain()
	if len(emitted) != 1 || emitted[0] != rec || sp.Stats().Unsealed != 1 {
		t.Fatalf("after the writer appended: %d emitted, %d in the spool", len(emitted), sp.Stats().Unsealed)
	}
	if rec.GetResultDigest() == "" || rec.GetArgumentsDigest() == "" || !rec.GetEndedAt().AsTime().Equal(time.Unix(5001, 0)) ||
		rec.GetLatency().AsDuration() != time.Second {
		t.Fatalf("finished receipt: ended %v, latency %v, digests %q %q", rec.GetEndedAt().AsTime(), rec.GetLatency().AsDuration(),
			rec.GetResultDigest(), rec.GetArgumentsDigest())
	}
}
