package receiptstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/mcpready/mcpready/artifact"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/internal/recordio"
	"github.com/mcpready/mcpready/ledger"
)

var t0 = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)

// mkBatch builds agent's batch seq with n receipts; receipt i of it is
// emitted at t0+seq minutes+i seconds, workflow "wf-<seq%2>", tool
// "tool-<i%2>".
func mkBatch(agent string, seq uint64, n int) *ledger.Batch {
	bundle := []byte(fmt.Sprintf(`{"bundle":"%s/%d"}`, agent, seq))
	b := &ledger.Batch{AgentID: agent, Sequence: seq, BatchID: fmt.Sprintf("%s-b%d", agent, seq), Digest: artifact.Digest(bundle), Bundle: bundle, Received: t0.Add(time.Duration(seq) * time.Minute)}
	for i := 0; i < n; i++ {
		b.Receipts = append(b.Receipts, enc(&mcpreadyv1.Receipt{ReceiptId: fmt.Sprintf("%s-%d-%d", agent, seq, i), WorkflowId: fmt.Sprintf("wf-%d", seq%2),
			EmittedAt: timestamppb.New(t0.Add(time.Duration(seq)*time.Minute + time.Duration(i)*time.Second)),
			Selected:  &mcpreadyv1.Selection{ServerName: "docs-a", ToolName: fmt.Sprintf("tool-%d", i%2)}}))
	}
	return b
}

func enc(r *mcpreadyv1.Receipt) []byte {
	b, err := ledger.Encode(r)
	if err != nil {
		panic(err)
	}
	return b
}

func openT(t *testing.T, dir string, mod func(*Options)) *Store {
	t.Helper()
	o := Options{Now: func() time.Time { return t0.Add(time.Hour) }}
	if mod != nil {
		mod(&o)
	}
	s, err := Open(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func ids(rs []*mcpreadyv1.StoredReceipt) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Receipt.ReceiptId)
	}
	return out
}

func TestQueryAndReopen(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir, func(o *Options) { o.SegmentBytes = 512 })
	for seq := uint64(1); seq <= 4; seq++ {
		for _, a := range []string{"a1", "a2"} {
			if res, err := s.Append(mkBatch(a, seq, 4), nil, nil); err != nil || res.Duplicate {
				t.Fatal(res, err)
			}
		}
	}
	check := func(s *Store) {
		t.Helper()
		for _, tc := range []struct {
			name string
			q    Query
			want string
		}{
			{"by id", Query{ReceiptID: "a2-3-1"}, "[a2-3-1]"},
			{"missing id", Query{ReceiptID: "nope"}, "[]"},
			{"by workflow and agent", Query{WorkflowID: "wf-1", AgentID: "a1", ToolName: "tool-0"}, "[a1-1-0 a1-1-2 a1-3-0 a1-3-2]"},
			{"by subject", Query{ServerName: "docs-a", ToolName: "tool-1", AgentID: "a2", Limit: 2}, "[a2-4-1 a2-4-3]"},
			{"by time", Query{Since: t0.Add(2*time.Minute + 2*time.Second), Until: t0.Add(3 * time.Minute), AgentID: "a1"}, "[a1-2-2 a1-2-3]"},
			{"limit keeps newest", Query{Limit: 1}, "[a2-4-3]"},
		} {
			got, _, err := s.Query(context.Background(), tc.q)
			if err != nil {
				t.Fatal(err)
			}
			if g := fmt.Sprint(ids(got)); g != tc.want {
				t.Errorf("%s: got %s want %s", tc.name, g, tc.want)
			}
		}
		if h := s.Head("a1"); h.Sequence != 4 || h.Digest != mkBatch("a1", 4, 4).Digest {
			t.Fatalf("head %+v", h)
		}
		if d, ok := s.BatchDigest("a2", 2); !ok || d != mkBatch("a2", 2, 4).Digest {
			t.Fatal("batch digest")
		}
		r, err := s.Get("a1-2-3")
		if err != nil || r.BatchId != "a1-b2" || r.AgentId != "a1" || r.Digest == "" {
			t.Fatal(r, err)
		}
		if _, err := s.Get("zzz"); !errors.Is(err, ErrNotFound) {
			t.Fatal(err)
		}
	}
	check(s)
	if st := s.Stats(); st.Segments < 3 || st.Receipts != 32 {
		t.Fatalf("stats %+v", st)
	}
	s.Close()
	s = openT(t, dir, nil)
	defer s.Close()
	check(s)
}

func TestDuplicateAndConflict(t *testing.T) {
	s := openT(t, t.TempDir(), nil)
	defer s.Close()
	b := mkBatch("a1", 1, 3)
	s.Append(b, nil, nil)
	res, err := s.Append(mkBatch("a1", 1, 3), nil, nil)
	if err != nil || !res.Duplicate {
		t.Fatal(res, err)
	}
	other := mkBatch("a1", 1, 3)
	other.Digest = "sha256:other"
	if _, err := s.Append(other, nil, nil); !errors.Is(err, ErrConflict) {
		t.Fatal(err)
	}
	// Receipts already stored under another batch are indexed once.
	again := mkBatch("a1", 2, 3)
	again.Receipts[0] = enc(&mcpreadyv1.Receipt{ReceiptId: "a1-1-0"})
	res, err = s.Append(again, nil, nil)
	if err != nil || res.DuplicateReceipts != 1 {
		t.Fatal(res, err)
	}
	if st := s.Stats(); st.Receipts != 5 || st.Batches != 2 {
		t.Fatalf("stats %+v", st)
	}
}

func TestTruncatedSegmentRecovered(t *testing.T) {
	dir := t.TempDir()
	s := openT(t, dir, nil)
	for seq := uint64(1); seq <= 3; seq++ {
		s.Append(mkBatch("a1", seq, 2), nil, nil)
	}
	s.Close()
	names, _ := filepath.Glob(filepath.Join(dir, "receipts-*.log"))
	fi, _ := os.Stat(names[len(names)-1])
	os.Truncate(names[len(names)-1], fi.Size()-10)
	var logs bytes.Buffer
	s = openT(t, dir, func(o *Options) { o.Logger = slog.New(slog.NewTextHandler(&logs, nil)) })
	defer s.Close()
	if !bytes.Contains(logs.Bytes(), []byte("torn tail")) {
		t.Fatalf("no log line: %s", logs.String())
	}
	if h := s.Head("a1"); h.Sequence != 2 {
		t.Fatalf("head %+v, want sequence 2", h)
	}
	// The lost batch was never acknowledged; its resend is accepted.
	if res, err := s.Append(mkBatch("a1", 3, 2), nil, nil); err != nil || res.Duplicate {
		t.Fatal(res, err)
	}
	if st := s.Stats(); st.Receipts != 6 {
		t.Fatalf("stats %+v", st)
	}
}

func TestRetentionKeepsHeads(t *testing.T) {
	dir := t.TempDir()
	now := t0.Add(10 * time.Minute)
	s := openT(t, dir, func(o *Options) {
		o.SegmentBytes = 600
		o.Retention = 5 * time.Minute
		o.Now = func() time.Time { return now }
	})
	for seq := uint64(1); seq <= 8; seq++ {
		s.Append(mkBatch("a1", seq, 2), nil, nil)
	}
	s.Append(mkBatch("a2", 1, 2), nil, nil)
	n, err := s.ApplyRetention()
	if err != nil || n == 0 {
		t.Fatal(n, err)
	}
	if _, err := s.Get("a1-1-0"); !errors.Is(err, ErrNotFound) {
		t.Fatal("old receipt survived retention")
	}
	if _, err := s.Get("a1-8-1"); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = openT(t, dir, nil)
	defer s.Close()
	if h := s.Head("a1"); h.Sequence != 8 {
		t.Fatalf("head after retention+reopen %+v", h)
	}
	if h := s.Head("a2"); h.Sequence != 1 {
		t.Fatalf("a2 head %+v", h)
	}
}

func TestTailFollowAndExport(t *testing.T) {
	s := openT(t, t.TempDir(), nil)
	defer s.Close()
	s.Append(mkBatch("a1", 1, 3), nil, nil)
	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan string, 10)
	done := make(chan error)
	go func() {
		done <- s.Tail(ctx, 2, true, func(r *mcpreadyv1.StoredReceipt) error { got <- r.Receipt.ReceiptId; return nil })
	}()
	want := []string{"a1-1-1", "a1-1-2", "a1-2-0", "a1-2-1"}
	for i, w := range want {
		if i == 2 {
			s.Append(mkBatch("a1", 2, 2), nil, nil)
		}
		select {
		case g := <-got:
			if g != w {
				t.Fatalf("tail %d: %s want %s", i, g, w)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("tail timed out")
		}
	}
	cancel()
	<-done
	var exported []string
	s.Export(context.Background(), t0.Add(2*time.Minute), "", func(b *ledger.Batch) error {
		exported = append(exported, string(b.Bundle))
		return nil
	})
	if fmt.Sprint(exported) != `[{"bundle":"a1/2"}]` {
		t.Fatalf("export %v", exported)
	}
}

// batchPayload is b's record payload (encodeBatch without the frame).
func batchPayload(b *ledger.Batch) []byte { return encodeBatch(b)[recordio.HeaderSize:] }

func FuzzDecodeBatch(f *testing.F) {
	f.Add(batchPayload(mkBatch("a1", 1, 2)))
	f.Add([]byte{recBatch, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := decodeBatch(b)
		if err != nil {
			return
		}
		again, err := decodeBatch(batchPayload(got))
		if err != nil || !bytes.Equal(batchPayload(again), batchPayload(got)) {
			t.Fatalf("record does not round-trip: %v", err)
		}
	})
}

// TestIndexedOnlyOnceDurable: a batch appended but not yet fsync'd is not
// visible to queries, tails, exports or the chain lookups, so nothing
// that might still be lost is ever answered for. (Failed before: the
// batch was indexed before its fsync.)
func TestIndexedOnlyOnceDurable(t *testing.T) {
	s := openT(t, t.TempDir(), nil)
	defer s.Close()
	b := mkBatch("agent-1", 1, 2)
	checked := false
	s.beforeSync = func() {
		checked = true
		if rs, _, _ := s.Query(context.Background(), Query{}); len(rs) != 0 {
			t.Errorf("query sees %d receipts before fsync", len(rs))
		}
		if _, err := s.Get("agent-1-1-0"); !errors.Is(err, ErrNotFound) {
			t.Errorf("Get before fsync: %v", err)
		}
		if h := s.Head("agent-1"); h.Sequence != 0 {
			t.Errorf("head %d before fsync", h.Sequence)
		}
		if _, ok := s.BatchDigest("agent-1", 1); ok {
			t.Error("batch digest visible before fsync")
		}
		var exported int
		s.Export(context.Background(), time.Time{}, "", func(*ledger.Batch) error { exported++; return nil })
		if exported != 0 {
			t.Error("export sees the batch before fsync")
		}
	}
	if _, err := s.Append(b, nil, nil); err != nil {
		t.Fatal(err)
	}
	if !checked {
		t.Fatal("hook not run")
	}
	if rs, _, _ := s.Query(context.Background(), Query{}); len(rs) != 2 {
		t.Fatalf("after fsync %d receipts, want 2", len(rs))
	}
}

// TestIndexFollowsLogOrder: a batch written later but fsync'd first does
// not overtake an earlier one in the index (page cursors follow log
// order), and both are indexed once.
func TestIndexFollowsLogOrder(t *testing.T) {
	s := openT(t, t.TempDir(), nil)
	defer s.Close()
	first, second := mkBatch("agent-1", 1, 2), mkBatch("agent-2", 1, 2)
	s.beforeSync = func() {
		s.beforeSync = nil
		if _, err := s.Append(second, nil, nil); err != nil {
			t.Error(err)
		}
	}
	if _, err := s.Append(first, nil, nil); err != nil {
		t.Fatal(err)
	}
	rs, _, err := s.Query(context.Background(), Query{})
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(rs); fmt.Sprint(got) != "[agent-1-1-0 agent-1-1-1 agent-2-1-0 agent-2-1-1]" {
		t.Fatalf("index order %v", got)
	}
}

func TestQueryPages(t *testing.T) {
	s := openT(t, t.TempDir(), nil)
	defer s.Close()
	for seq := uint64(1); seq <= 5; seq++ {
		if _, err := s.Append(mkBatch("agent-1", seq, 3), nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	var pages [][]string
	q := Query{Limit: 4}
	for {
		rs, next, err := s.Query(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		pages = append(pages, ids(rs))
		if next == "" {
			break
		}
		q.Before = next
	}
	if fmt.Sprint(pages) != "[[agent-1-4-2 agent-1-5-0 agent-1-5-1 agent-1-5-2] [agent-1-3-1 agent-1-3-2 agent-1-4-0 agent-1-4-1] [agent-1-2-0 agent-1-2-1 agent-1-2-2 agent-1-3-0] [agent-1-1-0 agent-1-1-1 agent-1-1-2]]" {
		t.Fatalf("pages %v", pages)
	}
	// A page that ends exactly at the oldest receipt says so: no cursor
	// to an empty page after it (before, 15 receipts in pages of 5 or 15
	// took one more request, answered with nothing).
	for _, limit := range []int{1, 3, 5, 15, 16} {
		q, n, requests := Query{Limit: limit}, 0, 0
		for {
			rs, next, err := s.Query(context.Background(), q)
			if err != nil {
				t.Fatal(err)
			}
			requests++
			if len(rs) == 0 {
				t.Fatalf("limit %d: page %d is empty", limit, requests)
			}
			n += len(rs)
			if next == "" {
				break
			}
			q.Before = next
		}
		if want := (15 + limit - 1) / limit; n != 15 || requests != want {
			t.Fatalf("limit %d: %d receipts in %d pages, want 15 in %d", limit, n, requests, want)
		}
	}
	if _, _, err := s.Query(context.Background(), Query{Before: "1.2"}); !errors.Is(err, ErrBadCursor) {
		t.Fatalf("bad cursor: %v", err)
	}
}

func FuzzParseCursor(f *testing.F) {
	for _, s := range []string{"0.0.0", "3.128.7", "1.2", "-1.0.0", "1.2.3.4", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := ParseCursor(s)
		if err != nil {
			if !errors.Is(err, ErrBadCursor) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		if back, err := ParseCursor(c.String()); err != nil || back != c {
			t.Fatalf("%q -> %v -> %v %v", s, c, back, err)
		}
	})
}

// TestIndexBounded: with MaxIndexed the in-memory index never holds more
// than the bound plus the segment being written, after appends and after
// reopening; older receipts stay answerable from disk by id, by query
// (paged, newest first), by export, and retention still removes them.
// (Failed before: every receipt ever stored was indexed.)
func TestIndexBounded(t *testing.T) {
	dir := t.TempDir()
	mod := func(o *Options) { o.MaxIndexed, o.SegmentBytes = 6, 1024 }
	s := openT(t, dir, mod)
	for seq := uint64(1); seq <= 20; seq++ {
		if _, err := s.Append(mkBatch("a1", seq, 3), nil, nil); err != nil {
			t.Fatal(err)
		}
		if n := s.Stats().Receipts; n > 6+3*4 {
			t.Fatalf("after batch %d the index holds %d receipts", seq, n)
		}
	}
	check := func(s *Store) {
		t.Helper()
		if n := s.Stats().Receipts; n > 6+3*4 || len(s.unindexed) == 0 {
			t.Fatalf("index holds %d receipts, %d segments unindexed", n, len(s.unindexed))
		}
		if r, err := s.Get("a1-1-2"); err != nil || r.GetReceipt().GetReceiptId() != "a1-1-2" || r.GetBatchId() != "a1-b1" {
			t.Fatalf("oldest receipt from disk: %v %v", r, err)
		}
		if _, err := s.Get("zzz"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("unknown id: %v", err)
		}
		all, _, err := s.Query(context.Background(), Query{})
		if err != nil || len(all) != 60 {
			t.Fatalf("query all: %d, %v", len(all), err)
		}
		var paged []string
		q := Query{Limit: 7, WorkflowID: "wf-1"}
		for {
			rs, next, err := s.Query(context.Background(), q)
			if err != nil {
				t.Fatal(err)
			}
			paged = append(ids(rs), paged...)
			if next == "" {
				break
			}
			q.Before = next
		}
		var want []string
		for _, r := range all {
			if r.GetReceipt().GetWorkflowId() == "wf-1" {
				want = append(want, r.GetReceipt().GetReceiptId())
			}
		}
		if fmt.Sprint(paged) != fmt.Sprint(want) || len(want) != 30 {
			t.Fatalf("paged %v\nwant  %v", paged, want)
		}
		var seqs []uint64
		s.Export(context.Background(), time.Time{}, "", func(b *ledger.Batch) error { seqs = append(seqs, b.Sequence); return nil })
		if len(seqs) != 20 || seqs[0] != 1 || seqs[19] != 20 {
			t.Fatalf("export %v", seqs)
		}
	}
	check(s)
	s.Close()
	s = openT(t, dir, mod)
	defer s.Close()
	check(s)
	if h := s.Head("a1"); h.Sequence != 20 {
		t.Fatalf("head %d after reopen", h.Sequence)
	}
	s.opts.Retention = 10 * time.Minute // everything was received over 40 minutes ago
	if n, err := s.ApplyRetention(); err != nil || n == 0 {
		t.Fatalf("retention removed %d segments, %v", n, err)
	}
	if _, err := s.Get("a1-1-2"); !errors.Is(err, ErrNotFound) || len(s.unindexed) != 0 {
		t.Fatalf("after retention: %v, %d segments unindexed", err, len(s.unindexed))
	}
}
