package spool

import (
	"bytes"
	"crypto"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcpready/mcpready/agent/receipt"
	"github.com/mcpready/mcpready/artifact"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/internal/seglog"
	"github.com/mcpready/mcpready/ledger"
	"github.com/mcpready/mcpready/sign"
)

func testKey(t testing.TB) crypto.Signer {
	k, err := sign.GenerateKey(sign.AlgorithmEd25519)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func mk(i int) *mcpreadyv1.Receipt {
	r := receipt.Builder{EmitterID: "agent-1"}.Start(time.Unix(1000, 0))
	r.Requested = fmt.Sprintf("docs_lookup#%d", i)
	return r
}

func open(t testing.TB, dir string, key crypto.Signer, mod func(*Options)) *Spool {
	o := Options{AgentID: "agent-1", Signer: key, BatchSize: 10, BatchInterval: time.Hour}
	if mod != nil {
		mod(&o)
	}
	s, err := Open(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// pending is every pending batch of s.
func pending(t testing.TB, s *Spool) []ledger.Batch {
	t.Helper()
	bs, err := s.Pending(0, 0)
	if err != nil {
		t.Fatal(err)
	}
	return bs
}

// drain verifies every pending batch, checks the chain from head and
// returns the receipts' Requested values in order.
func drain(t *testing.T, s *Spool, key crypto.Signer, head ledger.Head, ack bool) ([]string, ledger.Head) {
	t.Helper()
	var got []string
	for _, b := range pending(t, s) {
		v, err := sign.VerifyWithKey(b.Bundle, key.Public())
		if err != nil {
			t.Fatal(err)
		}
		rb := v.Object.Spec.(*mcpreadyv1.ReceiptBatch)
		rs, err := ledger.Open(v.Object.Metadata.Name, rb, b.Receipts)
		if err != nil {
			t.Fatal(err)
		}
		d := artifactDigest(b.Bundle)
		if dup, err := head.Next(rb, d, nil); err != nil || dup {
			t.Fatalf("chain: dup=%v err=%v", dup, err)
		}
		head = ledger.Head{Sequence: rb.Sequence, Digest: d}
		for _, r := range rs {
			got = append(got, r.Requested)
		}
		if ack {
			if err := s.Ack(b.Sequence); err != nil {
				t.Fatal(err)
			}
		}
	}
	return got, head
}

func want(from, to int) []string {
	var w []string
	for i := from; i < to; i++ {
		w = append(w, fmt.Sprintf("docs_lookup#%d", i))
	}
	return w
}

func eq(t *testing.T, got, want []string) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got %d receipts %v\nwant %d %v", len(got), got, len(want), want)
	}
}

func TestCrashBetweenWriteAndSendSendsEverythingOnce(t *testing.T) {
	dir, key := t.TempDir(), testKey(t)
	s := open(t, dir, key, nil)
	for i := 0; i < 25; i++ {
		if err := s.Append(mk(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Flush(); err != nil { // 3 batches sealed: 10, 10, 5
		t.Fatal(err)
	}
	got, head := drain(t, s, key, ledger.Head{}, false)
	eq(t, got, want(0, 25))
	if err := s.Ack(1); err != nil { // only the first batch acknowledged
		t.Fatal(err)
	}
	for i := 25; i < 32; i++ { // written, never sealed: "crash" before send
		if err := s.Append(mk(i)); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()

	s = open(t, dir, key, nil)
	defer s.Close()
	if h := s.Head(); h != head {
		t.Fatalf("head after restart %+v, want %+v", h, head)
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	// Batches 2, 3 again (unacknowledged) plus the new one, chained from 1.
	p := pending(t, s)
	if len(p) != 3 || p[0].Sequence != 2 {
		t.Fatalf("pending %d from %d", len(p), p[0].Sequence)
	}
	got, _ = drain(t, s, key, ledger.Head{Sequence: 1, Digest: mustPrev(t, p[0], key)}, true)
	eq(t, got, want(10, 32))
	if st := s.Stats(); st.Depth != 0 || st.PendingBatches != 0 {
		t.Fatalf("stats after ack %+v", st)
	}
}

func mustPrev(t *testing.T, b ledger.Batch, key crypto.Signer) string {
	v, err := sign.VerifyWithKey(b.Bundle, key.Public())
	if err != nil {
		t.Fatal(err)
	}
	return v.Object.Spec.(*mcpreadyv1.ReceiptBatch).PrevBatchDigest
}

func lastSegment(t *testing.T, dir string) string {
	names, _ := filepath.Glob(filepath.Join(dir, "spool-*.log"))
	return names[len(names)-1]
}

func TestTornRecordIsTruncated(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(path string)
	}{
		{"partial header", func(p string) { appendBytes(p, []byte{9, 0}) }},
		{"partial payload", func(p string) { appendBytes(p, []byte{200, 0, 0, 0, 1, 2, 3, 4, 5}) }},
		{"cut last receipt", func(p string) { fi, _ := os.Stat(p); os.Truncate(p, fi.Size()-3) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, key := t.TempDir(), testKey(t)
			s := open(t, dir, key, nil)
			for i := 0; i < 5; i++ {
				s.Append(mk(i))
			}
			s.Close()
			tc.damage(lastSegment(t, dir))
			s = open(t, dir, key, nil)
			defer s.Close()
			s.Flush()
			got, _ := drain(t, s, key, ledger.Head{}, true)
			n := 5
			if tc.name == "cut last receipt" {
				n = 4 // the torn record was never acknowledged to its caller in a real crash
			}
			eq(t, got, want(0, n))
			if err := s.Append(mk(99)); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func appendBytes(p string, b []byte) {
	f, _ := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
	f.Write(b)
	f.Close()
}

func TestFloodRefusesNewAndCountsDrops(t *testing.T) {
	dir, key := t.TempDir(), testKey(t)
	reg := prometheus.NewRegistry()
	s := open(t, dir, key, func(o *Options) { o.MaxBytes = 4096; o.SegmentBytes = 1024; o.RefusedBytes = -1; o.Registry = reg })
	defer s.Close()
	accepted, dropped := 0, 0
	for i := 0; i < 200; i++ {
		err := s.Append(mk(i))
		switch {
		case err == nil:
			accepted++
		case errors.Is(err, ErrSpoolFull):
			dropped++
		default:
			t.Fatal(err)
		}
	}
	if dropped == 0 || accepted == 0 {
		t.Fatalf("accepted %d dropped %d", accepted, dropped)
	}
	if got := s.Stats().Dropped; int(got) != dropped {
		t.Fatalf("dropped counter %v, want %d", got, dropped)
	}
	if v := gauge(t, reg, "mcpready_receipts_dropped_total"); int(v) != dropped {
		t.Fatalf("dropped metric %v, want %d", v, dropped)
	}
	s.Flush()
	got, _ := drain(t, s, key, ledger.Head{}, true)
	eq(t, got, want(0, accepted)) // everything accepted survives, in order
	// After acknowledgement, space is reclaimed and appends succeed again.
	for i := 0; i < 5; i++ {
		if err := s.Append(mk(i)); err != nil {
			t.Fatalf("after ack: %v", err)
		}
	}
	if mfs, _ := reg.Gather(); len(mfs) != 8 {
		t.Fatalf("%d metrics registered", len(mfs))
	}
}

func TestRotationCompactsAndKeepsChain(t *testing.T) {
	dir, key := t.TempDir(), testKey(t)
	s := open(t, dir, key, func(o *Options) { o.SegmentBytes = 2048 })
	var head ledger.Head
	var all []string
	for round := 0; round < 5; round++ {
		for i := round * 20; i < round*20+20; i++ {
			if err := s.Append(mk(i)); err != nil {
				t.Fatal(err)
			}
		}
		s.Flush()
		var got []string
		got, head = drain(t, s, key, head, true)
		all = append(all, got...)
	}
	eq(t, all, want(0, 100))
	names, _ := filepath.Glob(filepath.Join(dir, "spool-*.log"))
	if len(names) > 2 {
		t.Fatalf("%d segments left after everything was acknowledged", len(names))
	}
	s.Close()
	s = open(t, dir, key, nil)
	defer s.Close()
	if s.Head() != head || len(pending(t, s)) != 0 || s.Stats().Unsealed != 0 {
		t.Fatalf("after reopen head %+v (want %+v) pending %d", s.Head(), head, len(pending(t, s)))
	}
	s.Append(mk(100))
	s.Flush()
	got, _ := drain(t, s, key, head, true)
	eq(t, got, want(100, 101))
}

func TestConcurrentAppendsAndSealer(t *testing.T) {
	dir, key := t.TempDir(), testKey(t)
	s := open(t, dir, key, func(o *Options) { o.BatchInterval = 5 * time.Millisecond; o.SegmentBytes = 8192 })
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				if err := s.Append(mk(i)); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	s.Flush()
	got, _ := drain(t, s, key, ledger.Head{}, true)
	if len(got) != 200 {
		t.Fatalf("%d receipts", len(got))
	}
	s.Close()
	if err := s.Append(mk(0)); !errors.Is(err, ErrClosed) {
		t.Fatalf("append after close: %v", err)
	}
}

func TestSecretsNeverReachSpoolFiles(t *testing.T) {
	const secret = "tok-3f9a1c-SECRET"
	dir, key := t.TempDir(), testKey(t)
	s := open(t, dir, key, nil)
	b := receipt.Builder{EmitterID: "agent-1"}
	r := b.Start(time.Now())
	b.Arguments(r, []byte(`{"q":"x","auth":"Bearer `+secret+`"}`))
	b.Result(r, []byte(`{"content":[{"type":"text","text":"`+secret+`"}]}`))
	r.ErrorMessage = receipt.SafeError("upstream rejected Authorization: Bearer " + secret)
	s.Append(r)
	s.Flush()
	s.Close()
	files, _ := filepath.Glob(filepath.Join(dir, "*"))
	for _, f := range files {
		data, _ := os.ReadFile(f)
		if bytes.Contains(data, []byte(secret)) {
			t.Fatalf("secret in %s", f)
		}
	}
}

func TestOpenRejectsBadOptions(t *testing.T) {
	if _, err := Open(t.TempDir(), Options{Signer: testKey(t)}); err == nil {
		t.Fatal("no agent id accepted")
	}
	if _, err := Open(t.TempDir(), Options{AgentID: "a"}); err == nil {
		t.Fatal("no signer accepted")
	}
}

func artifactDigest(b []byte) string { return artifact.Digest(b) }

func gauge(t *testing.T, reg *prometheus.Registry, name string) float64 {
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			m := mf.GetMetric()[0]
			if m.GetCounter() != nil {
				return m.GetCounter().GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	t.Fatalf("metric %s not found", name)
	return 0
}

func TestBatchBytesBoundsBatches(t *testing.T) {
	dir, key := t.TempDir(), testKey(t)
	one, _ := ledger.Encode(mk(0))
	s := open(t, dir, key, func(o *Options) { o.BatchBytes = 3 * len(one) })
	defer s.Close()
	for i := 0; i < 7; i++ {
		s.Append(mk(i))
	}
	s.Flush()
	var sizes []int
	for _, b := range pending(t, s) {
		sizes = append(sizes, len(b.Receipts))
	}
	if fmt.Sprint(sizes) != "[3 3 1]" {
		t.Fatalf("batch sizes %v", sizes)
	}
	got, _ := drain(t, s, key, ledger.Head{}, true)
	eq(t, got, want(0, 7))
}

// An agent cut off from the control plane keeps sealing batches that
// nobody acknowledges. Their receipts stay on disk only: the spool's
// memory does not grow with them, and Pending reads them back whole, in
// order and at most limit at a time, before and after a reopen.
func TestPendingBatchesStayOnDisk(t *testing.T) {
	dir, key := t.TempDir(), testKey(t)
	s := open(t, dir, key, nil) // batches of 10
	const n, size = 200, 20 << 10
	big := func(i int) *mcpreadyv1.Receipt {
		r := mk(i)
		r.Requested = fmt.Sprintf("docs_lookup#%d", i)
		r.WorkflowId = strings.Repeat("x", size) // about 4 MB in all
		return r
	}
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	before := heap()
	for i := range n {
		if err := s.Append(big(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	if grown := int64(heap()) - int64(before); grown > n*size/8 {
		t.Errorf("the heap grew by %d bytes for %d bytes of sealed, unacknowledged receipts", grown, n*size)
	}
	if st := s.Stats(); st.PendingBatches < n/10 || st.Depth != n || st.Unsealed != 0 {
		t.Errorf("stats %+v", st)
	}
	first, err := s.Pending(0, 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(first) != 3 || first[0].Sequence != 1 || first[2].Sequence != 3 {
		t.Fatalf("Pending(0, 3) gave %d batches", len(first))
	}
	if next, err := s.Pending(3, 1); err != nil || len(next) != 1 || next[0].Sequence != 4 {
		t.Fatalf("Pending(3, 1): %v", err)
	}
	s.Close()
	s = open(t, dir, key, nil)
	defer s.Close()
	got, _ := drain(t, s, key, ledger.Head{}, false)
	eq(t, got, want(0, n))
}

// The documented zero values of Options (docs/operator.md names the size).
func TestOpenDefaults(t *testing.T) {
	s := open(t, t.TempDir(), testKey(t), func(o *Options) { o.BatchSize, o.BatchInterval = 0, 0 })
	defer s.Close()
	o := s.opts
	if o.MaxBytes != 256<<20 || o.RefusedBytes != 128<<20 || o.SegmentBytes != 16<<20 || o.BatchSize != DefaultBatchSize || o.BatchBytes != 2<<20 || o.BatchInterval != time.Second {
		t.Errorf("defaults %+v", o)
	}
}

// A pending batch whose record was damaged on disk after it was sealed is
// not shipped as it now reads: Pending reports the damage (the record's
// checksum no longer matches) instead of returning altered receipts.
func TestPendingReportsDamagedBatch(t *testing.T) {
	dir, key := t.TempDir(), testKey(t)
	s := open(t, dir, key, nil)
	defer s.Close()
	for i := 0; i < 3; i++ {
		s.Append(mk(i))
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	if len(pending(t, s)) != 1 {
		t.Fatal("want one sealed batch")
	}
	f, err := os.OpenFile(lastSegment(t, dir), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	fi, _ := f.Stat()
	if _, err := f.WriteAt([]byte{0xff}, fi.Size()-1); err != nil { // the batch record is the last one
		t.Fatal(err)
	}
	f.Close()
	if bs, err := s.Pending(0, 0); !errors.Is(err, seglog.ErrCorrupt) || bs != nil {
		t.Fatalf("Pending over a damaged batch: %d batches, %v", len(bs), err)
	}
}

// Pending racing acknowledgements: a batch acknowledged (and its segment
// deleted) between Pending's look at the pending list and its read of the
// batch is skipped, not reported as damage, and what Pending returns is
// still in sequence order and readable.
func TestPendingWhileAcked(t *testing.T) {
	dir, key := t.TempDir(), testKey(t)
	s := open(t, dir, key, func(o *Options) { o.BatchSize, o.SegmentBytes = 1, 1024 }) // a batch per receipt, many segments
	defer s.Close()
	const batches = 200
	done, stop := make(chan struct{}), make(chan struct{})
	defer func() { close(stop); <-done }() // before Close
	go func() {
		defer close(done)
		for i := range batches {
			select {
			case <-stop:
				return
			default:
			}
			if err := s.Append(mk(i)); err != nil {
				t.Error(err)
				return
			}
			if err := s.Flush(); err != nil {
				t.Error(err)
				return
			}
			if i >= 3 { // keep a few pending, acknowledge the oldest
				if err := s.Ack(uint64(i - 2)); err != nil {
					t.Error(err)
					return
				}
			}
		}
	}()
	reads := 0
	for running := true; running; reads++ {
		select {
		case <-done:
			running = false
		default:
		}
		bs, err := s.Pending(0, 0)
		if err != nil {
			t.Fatalf("Pending while batches are acknowledged: %v", err)
		}
		for i, b := range bs {
			if i > 0 && b.Sequence <= bs[i-1].Sequence || len(b.Receipts) != 1 {
				t.Fatalf("Pending gave batch %d (%d receipts) after %d", b.Sequence, len(b.Receipts), bs[max(i-1, 0)].Sequence)
			}
		}
	}
	if bs := pending(t, s); len(bs) != 3 || bs[0].Sequence != batches-2 {
		t.Fatalf("after %d reads: %d pending", reads, len(bs))
	}
}

// ran is a receipt of a call that reached an upstream (one attempt).
func ran(i int) *mcpreadyv1.Receipt {
	r := mk(i)
	r.AttemptCount = 1
	r.Attempts = []*mcpreadyv1.Attempt{{Entry: "docs", Outcome: mcpreadyv1.OutcomeClass_OUTCOME_CLASS_SUCCESS}}
	return r
}

// A flood of requests refused before any upstream (a client calling tools
// it may not, with the control plane out of reach) fills only the part of
// the spool refusals may use: receipts of calls that ran still fit, and
// Ready still admits state-changing calls. Failed before: the refusals
// filled the spool to MaxBytes, after which every state-changing call on
// the host was refused (receipts_unavailable).
func TestRefusalFloodLeavesRoomForCalls(t *testing.T) {
	reg := prometheus.NewRegistry()
	const maxBytes = 64 << 10
	s := open(t, t.TempDir(), testKey(t), func(o *Options) { o.MaxBytes = maxBytes; o.SegmentBytes = 8 << 10; o.Registry = reg })
	defer s.Close()
	for i := range 2000 { // about 10 times what the spool holds
		if err := s.Append(mk(i)); err != nil {
			t.Fatalf("refusal %d: %v", i, err)
		}
	}
	st := s.Stats()
	// Refusals stop at half; the sealer's batch records for what was
	// spooled before may still add a little (they are written in the
	// background), never up to the full spool.
	if st.Bytes > maxBytes*3/4 || st.Shed == 0 || st.Dropped != 0 {
		t.Fatalf("after the flood: %+v", st)
	}
	if v := gauge(t, reg, "mcpready_receipts_shed_total"); uint64(v) != st.Shed {
		t.Fatalf("shed metric %v, Stats %d", v, st.Shed)
	}
	if err := s.Ready(); err != nil {
		t.Fatalf("Ready after a flood of refusals: %v", err)
	}
	for i := range 20 {
		if err := s.Append(ran(i)); err != nil {
			t.Fatalf("receipt of a call that ran: %v", err)
		}
	}
	if s.Stats().Shed != st.Shed {
		t.Fatal("a receipt of a call that ran was shed")
	}
	// Mixed groups keep their calls' receipts, in order.
	n, err := s.AppendBatch([]*mcpreadyv1.Receipt{mk(5000), ran(5001), mk(5002), ran(5003)})
	if err != nil || n != 2 {
		t.Fatalf("mixed group: %d spooled, %v", n, err)
	}
	// Without a bound of their own refusals fill the spool as before.
	u := open(t, t.TempDir(), testKey(t), func(o *Options) { o.MaxBytes = maxBytes; o.SegmentBytes = 8 << 10; o.RefusedBytes = -1 })
	defer u.Close()
	var full bool
	for i := 0; i < 2000 && !full; i++ {
		full = errors.Is(u.Append(mk(i)), ErrSpoolFull)
	}
	if !full || u.Stats().Shed != 0 {
		t.Fatalf("RefusedBytes -1: full %v, %+v", full, u.Stats())
	}
}
