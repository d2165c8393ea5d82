package ingest

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/mcpready/mcpready/artifact"
	"github.com/mcpready/mcpready/controlplane/receiptstore"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/ledger/ledgertest"
	"github.com/mcpready/mcpready/sign"
)

// clock is a settable time for the token buckets.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// sealChain seals batches 1..n of agent, size receipts each.
func sealChain(t *testing.T, p *pki, agent string, n, size int) []sealed {
	t.Helper()
	sizes := make([]int, n)
	for i := range sizes {
		sizes[i] = size
	}
	return sealSizes(t, p, agent, sizes...)
}

// sealSizes seals batches 1, 2, ... of agent with the given numbers of
// receipts.
func sealSizes(t *testing.T, p *pki, agent string, sizes ...int) []sealed {
	t.Helper()
	k := p.agent
	if agent == "agent-2" {
		k = p.other
	}
	var out []sealed
	prev := ""
	for i, size := range sizes {
		seq := i + 1
		rs := make([]*mcpreadyv1.Receipt, size)
		for i := range rs {
			rs[i] = ledgertest.Receipt(agent, time.Now())
		}
		s := seal(t, k, agent, uint64(seq), prev, rs...)
		out = append(out, s)
		prev = artifact.Digest(s.bundle)
	}
	return out
}

// TestAgentUploadRateBounded: a compromised agent (valid key and
// certificate) uploading far more receipts than its bound within a short
// time is refused, before anything is verified or stored, with a
// retryable reason naming the bound; another agent uploads normally
// meanwhile, and the first continues its chain once its bucket refills.
func TestAgentUploadRateBounded(t *testing.T) {
	const rate, burst, size = 100, 1000, 100
	p := newPKI(t)
	st, err := receiptstore.Open(t.TempDir(), receiptstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	reg := prometheus.NewRegistry()
	clk := &clock{now: time.Now()}
	var logs syncBuf
	svc, err := New(Options{Store: st, Trust: func() *sign.Trust { return p.trust }, Registry: reg, Now: clk.Now,
		Logger: slog.New(slog.NewTextHandler(&logs, nil)), AgentReceiptsPerSecond: rate, AgentReceiptsBurst: burst})
	if err != nil {
		t.Fatal(err)
	}
	up := func(node string, s sealed) (Result, error) {
		return svc.Ingest(&mcpreadyv1.Node{Id: node}, &mcpreadyv1.UploadBatchesRequest{BatchId: s.b.BatchId, Sequence: s.b.Sequence, Bundle: s.bundle, Receipts: s.receipts})
	}
	flood := sealChain(t, p, "agent-1", 30, size) // 3,000 receipts at one instant: 3x the burst
	accepted := 0
	var refused *RejectError
	next := 0
	for ; next < len(flood); next++ {
		_, err := up("agent-1", flood[next])
		if err != nil {
			if !errors.As(err, &refused) {
				t.Fatalf("batch %d: %v", next+1, err)
			}
			break
		}
		accepted += size
	}
	if accepted != burst {
		t.Fatalf("%d receipts accepted at one instant, want the burst %d (refusal: %v)", accepted, burst, refused)
	}
	if refused.Reason != ReasonAgentRateLimited {
		t.Fatalf("reason %q, want %s", refused.Reason, ReasonAgentRateLimited)
	}
	for _, want := range []string{"agent-1", "100 receipts/s", "burst 1000", "retry in 1s"} {
		if !strings.Contains(refused.Error(), want) {
			t.Errorf("refusal %q does not say %q", refused.Error(), want)
		}
	}
	if refused.RetryAfter != time.Second {
		t.Errorf("RetryAfter %v, want 1s", refused.RetryAfter)
	}
	if got := st.Stats().Receipts; got != burst {
		t.Fatalf("%d receipts stored, want %d", got, burst)
	}
	// Refused before verification: a batch with a broken signature is
	// refused as rate-limited, not as bad-signature (no signature check
	// was spent on it).
	broken := flood[next]
	broken.bundle = bytes.Clone(broken.bundle)
	i := bytes.Index(broken.bundle, []byte(`"sig":"`))
	broken.bundle[i+8] ^= 0x01
	if _, err := up("agent-1", broken); !errors.As(err, &refused) || refused.Reason != ReasonAgentRateLimited {
		t.Fatalf("broken batch over the bound: %v, want %s", err, ReasonAgentRateLimited)
	}
	// Another agent is unaffected.
	for _, s := range sealChain(t, p, "agent-2", 5, size) {
		if _, err := up("agent-2", s); err != nil {
			t.Fatalf("agent-2 refused while agent-1 is limited: %v", err)
		}
	}
	// Refused batches are counted by reason, and logged once per episode,
	// not once per batch (a flood of refusals must not flood the log).
	if got := testutil.ToFloat64(svc.m.batches.WithLabelValues(ReasonAgentRateLimited)); got != 2 {
		t.Fatalf("mcpready_ingest_batches_total{result=%q} = %v, want 2", ReasonAgentRateLimited, got)
	}
	if n := strings.Count(logs.String(), ReasonAgentRateLimited); n != 1 {
		t.Fatalf("%d log lines about the limit, want 1:\n%s", n, logs.String())
	}
	// After a second the bucket holds 100 receipts again: the refused
	// batch (kept by the agent) is accepted and the chain continues.
	clk.advance(time.Second)
	if _, err := up("agent-1", flood[next]); err != nil {
		t.Fatalf("resend after the bucket refilled: %v", err)
	}
	if _, err := up("agent-1", flood[next+1]); !errors.As(err, &refused) || refused.Reason != ReasonAgentRateLimited {
		t.Fatalf("second batch within the same second: %v", err)
	}
	if got := st.Stats().Receipts; got != burst+5*size+size {
		t.Fatalf("%d receipts stored, want %d", got, burst+5*size+size)
	}
}

// TestShipperKeepsRateLimitedBatches: an agent over its bound through the
// real shipper and stream keeps every refused batch, resends it and ends
// with every receipt stored exactly once.
func TestShipperKeepsRateLimitedBatches(t *testing.T) {
	p := newPKI(t)
	st, err := receiptstore.Open(t.TempDir(), receiptstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	svc, err := New(Options{Store: st, Trust: func() *sign.Trust { return p.trust }, AgentReceiptsPerSecond: 400, AgentReceiptsBurst: 30})
	if err != nil {
		t.Fatal(err)
	}
	_, addr := serve(t, svc)
	sp := openSpool(t, t.TempDir(), p.agent) // batches of 10
	defer sp.Close()
	for i := 0; i < 200; i++ {
		if err := sp.Append(mk(i)); err != nil {
			t.Fatal(err)
		}
	}
	sp.Flush()
	ship(t, addr, sp)
	requireExactlyOnce(t, st, 200)
	if got := testutil.ToFloat64(svc.m.batches.WithLabelValues(ReasonAgentRateLimited)); got == 0 {
		t.Fatal("no batch was refused: the bound was not exercised")
	}
}

func TestLimiter(t *testing.T) {
	t0 := time.Now()
	if l := newLimiter(-1, 0); !must(l.take("a", 1<<30, t0)) {
		t.Fatal("a negative rate bounds nothing")
	}
	if l := newLimiter(0, 0); l.rate != DefaultAgentReceiptsPerSecond || l.burst != DefaultAgentReceiptsBurst {
		t.Fatalf("defaults %v %v", l.rate, l.burst)
	}
	l := newLimiter(10, 100)
	// A batch larger than the burst fits a full bucket and leaves debt.
	if !must(l.take("a", 150, t0)) {
		t.Fatal("oversized batch refused by a full bucket")
	}
	ok, wait, first := l.take("a", 10, t0)
	if ok || !first || wait != 6*time.Second { // from -50 to 10 at 10/s
		t.Fatalf("after debt: ok %v first %v wait %v", ok, first, wait)
	}
	if ok, _, first := l.take("a", 10, t0.Add(time.Second)); ok || first {
		t.Fatalf("still limited: ok %v first %v", ok, first)
	}
	if !must(l.take("a", 10, t0.Add(6*time.Second))) {
		t.Fatal("refused after refilling")
	}
	// An empty batch costs one receipt.
	l = newLimiter(1, 1)
	if !must(l.take("b", 0, t0)) || must(l.take("b", 0, t0)) {
		t.Fatal("empty batches are not free")
	}
	// Full buckets are forgotten once there are many.
	l = newLimiter(1000, 10)
	for i := range 2 * minSweep {
		l.take(fmt.Sprint(i), 1, t0)
	}
	l.take("late", 1, t0.Add(time.Minute))
	if n := len(l.buckets); n > minSweep+1 {
		t.Fatalf("%d buckets kept after they all refilled", n)
	}
}

func must(ok bool, _ time.Duration, _ bool) bool { return ok }

// TestRateLimitedStreamRefusesTheRest: after a batch over the bound, later
// batches on the same stream are refused as rate-limited without being
// verified, even one small enough to fit (it could only be a gap).
func TestRateLimitedStreamRefusesTheRest(t *testing.T) {
	p := newPKI(t)
	st, err := receiptstore.Open(t.TempDir(), receiptstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	clk := &clock{now: time.Now()}
	svc, err := New(Options{Store: st, Trust: func() *sign.Trust { return p.trust }, Now: clk.Now, AgentReceiptsPerSecond: 1, AgentReceiptsBurst: 10})
	if err != nil {
		t.Fatal(err)
	}
	_, addr := serve(t, svc)
	stream, err := mcpreadyv1.NewReceiptsServiceClient(dial(t, addr)).UploadBatches(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	// 5 receipts fit (5 left), 10 do not, 1 would.
	for i, s := range sealSizes(t, p, "agent-1", 5, 10, 1) {
		req := &mcpreadyv1.UploadBatchesRequest{BatchId: s.b.BatchId, Sequence: s.b.Sequence, Bundle: s.bundle, Receipts: s.receipts}
		if i == 0 {
			req.Node = &mcpreadyv1.Node{Id: "agent-1"}
		}
		if err := stream.Send(req); err != nil {
			t.Fatal(err)
		}
		resp, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if accepted := resp.GetAccepted(); accepted != (i == 0) || (i > 0 && !strings.HasPrefix(resp.GetError(), ReasonAgentRateLimited+":")) {
			t.Fatalf("batch %d: accepted %v error %q", i+1, accepted, resp.GetError())
		}
		// The refusal says when to send again (the shipper waits that long).
		if i > 0 && resp.GetRetryAfter().AsDuration() <= 0 {
			t.Fatalf("batch %d: refused without retry_after", i+1)
		}
	}
	if got := st.Stats().Receipts; got != 5 {
		t.Fatalf("%d receipts stored, want 5", got)
	}
}
