package receiptdb

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/mcpready/mcpready/controlplane/chainhead"
	"github.com/mcpready/mcpready/controlplane/receiptstore"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/internal/pgtest"
	"github.com/mcpready/mcpready/ledger"
	"github.com/mcpready/mcpready/ledger/ledgertest"
)

var bg = context.Background()

func open(t testing.TB, dsn string, o Options) *DB {
	t.Helper()
	d, err := Open(bg, dsn, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// batch builds agent's batch seq with n receipts in workflow wf, emitted
// from at on, one second apart.
func batch(agent string, seq uint64, n int, wf string, at time.Time) (*ledger.Batch, []*mcpreadyv1.Receipt, []string) {
	b := &ledger.Batch{AgentID: agent, Sequence: seq, BatchID: fmt.Sprintf("%s-b%d", agent, seq), Bundle: []byte(fmt.Sprintf("bundle %s %d", agent, seq)), Received: time.Now()}
	b.Digest = ledger.Digest(b.Bundle)
	var rs []*mcpreadyv1.Receipt
	var ds []string
	for i := range n {
		r := ledgertest.Receipt(agent, at.Add(time.Duration(i)*time.Second))
		r.ReceiptId = fmt.Sprintf("%s-%d-%d", agent, seq, i)
		r.WorkflowId = wf
		r.EmittedAt = timestamppb.New(at.Add(time.Duration(i) * time.Second))
		r.Selected = &mcpreadyv1.Selection{ServerName: "docs", ToolName: fmt.Sprintf("t%d", i%2)}
		e, _ := ledger.Encode(r)
		b.Receipts = append(b.Receipts, e)
		rs = append(rs, r)
		ds = append(ds, ledger.Digest(e))
	}
	return b, rs, ds
}

func commitChain(t *testing.T, d *DB, agent string, n, per int, wf string, at time.Time) []*ledger.Batch {
	t.Helper()
	var st chainhead.State
	var out []*ledger.Batch
	for seq := uint64(1); seq <= uint64(n); seq++ {
		b, rs, ds := batch(agent, seq, per, wf, at)
		var err error
		if st, err = d.Commit(bg, st, b, rs, ds); err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

func TestCommitAdvancesHeadAndAnswersQueries(t *testing.T) {
	pg := pgtest.Start(t)
	d := open(t, pg.DSN, Options{})
	t0 := time.Now().Add(-time.Hour).Truncate(time.Second)
	batches := commitChain(t, d, "agent-1", 3, 4, "wf-1", t0)
	commitChain(t, d, "agent-2", 2, 4, "wf-2", t0.Add(10*time.Minute))

	h, err := d.Get(bg, "agent-1")
	if err != nil || h.Sequence != 3 || h.Digest != batches[2].Digest || h.Version != 3 {
		t.Fatalf("head %+v, %v", h, err)
	}
	if dg, ok, err := d.BatchDigest(bg, "agent-1", 2); err != nil || !ok || dg != batches[1].Digest {
		t.Fatalf("BatchDigest(2) = %s %v %v", dg, ok, err)
	}
	for name, tc := range map[string]struct {
		q    receiptstore.Query
		want int
	}{
		"by id":               {receiptstore.Query{ReceiptID: "agent-1-2-3"}, 1},
		"by workflow":         {receiptstore.Query{WorkflowID: "wf-1"}, 12},
		"by agent":            {receiptstore.Query{AgentID: "agent-2"}, 8},
		"by subject":          {receiptstore.Query{ServerName: "docs", ToolName: "t1"}, 10},
		"by subject and time": {receiptstore.Query{ServerName: "docs", ToolName: "t0", Since: t0.Add(5 * time.Minute), Until: t0.Add(11 * time.Minute)}, 4},
		"all":                 {receiptstore.Query{}, 20},
		"limited to newest 3": {receiptstore.Query{Limit: 3}, 3},
		"unknown id":          {receiptstore.Query{ReceiptID: "nope"}, 0},
	} {
		got, _, err := d.Query(bg, tc.q)
		if err != nil || len(got) != tc.want {
			t.Errorf("%s: %d receipts, %v; want %d", name, len(got), err, tc.want)
		}
	}
	got, _, _ := d.Query(bg, receiptstore.Query{ReceiptID: "agent-1-2-3"})
	if r := got[0]; r.AgentId != "agent-1" || r.BatchId != "agent-1-b2" || r.Receipt.GetReceiptId() != "agent-1-2-3" || r.Digest != ledger.Digest(batches[1].Receipts[3]) {
		t.Fatalf("stored receipt %+v", r)
	}
	newest, _, _ := d.Query(bg, receiptstore.Query{Limit: 3})
	if newest[2].Receipt.GetReceiptId() != "agent-2-2-3" || newest[0].Receipt.GetReceiptId() != "agent-2-2-1" {
		t.Fatalf("newest 3 not the last three in order: %s..%s", newest[0].Receipt.GetReceiptId(), newest[2].Receipt.GetReceiptId())
	}

	// Export returns every batch byte for byte as committed.
	var exported []*ledger.Batch
	if err := d.Export(bg, time.Time{}, "agent-1", func(b *ledger.Batch) error { exported = append(exported, b); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(exported) != 3 {
		t.Fatalf("exported %d batches", len(exported))
	}
	for i, b := range exported {
		want := batches[i]
		if b.BatchID != want.BatchID || b.Sequence != want.Sequence || !bytes.Equal(b.Bundle, want.Bundle) || len(b.Receipts) != len(want.Receipts) || b.Digest != want.Digest {
			t.Fatalf("batch %d exported differently", i)
		}
		for j := range b.Receipts {
			if !bytes.Equal(b.Receipts[j], want.Receipts[j]) {
				t.Fatalf("batch %d receipt %d altered", i, j)
			}
		}
	}
}

func TestCommitComparesHead(t *testing.T) {
	pg := pgtest.Start(t)
	a, b := open(t, pg.DSN, Options{}), open(t, pg.DSN, Options{})
	b1, rs, ds := batch("agent-1", 1, 1, "", time.Now())
	st, err := a.Commit(bg, chainhead.State{}, b1, rs, ds)
	if err != nil {
		t.Fatal(err)
	}
	// A replica that still sees no head loses: nothing is written.
	other, rs2, ds2 := batch("agent-1", 1, 1, "", time.Now())
	other.BatchID, other.Bundle = "fork", []byte("fork")
	other.Digest = ledger.Digest(other.Bundle)
	cur, err := b.Commit(bg, chainhead.State{}, other, rs2, ds2)
	if !errors.Is(err, chainhead.ErrConflict) || cur != st {
		t.Fatalf("stale first commit: %+v, %v; want conflict at %+v", cur, err, st)
	}
	if n, _, _ := a.Query(bg, receiptstore.Query{}); len(n) != 1 {
		t.Fatalf("%d receipts after a refused commit, want 1", len(n))
	}
	// Not the next sequence: refused before the database is asked.
	b3, rs3, ds3 := batch("agent-1", 3, 1, "", time.Now())
	if _, err := a.Commit(bg, st, b3, rs3, ds3); !errors.Is(err, chainhead.ErrInvalid) {
		t.Fatalf("gap commit: %v", err)
	}
	// Racing commits of sequence 2 from both replicas: exactly one wins.
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		d := a
		if i%2 == 1 {
			d = b
		}
		wg.Go(func() {
			bb, rr, dd := batch("agent-1", 2, 2, "", time.Now())
			bb.BatchID = fmt.Sprintf("race-%d", i)
			_, errs[i] = d.Commit(bg, st, bb, rr, dd)
		})
	}
	wg.Wait()
	won := 0
	for _, err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, chainhead.ErrConflict):
			t.Fatalf("racing commit: %v", err)
		}
	}
	if won != 1 {
		t.Fatalf("%d racing commits won, want 1", won)
	}
	if n, _, _ := a.Query(bg, receiptstore.Query{}); len(n) != 3 {
		t.Fatalf("%d receipts, want 3", len(n))
	}
}

func TestTailFollowsCommitsOfEveryReplica(t *testing.T) {
	pg := pgtest.Start(t)
	a, b := open(t, pg.DSN, Options{PollEvery: 20 * time.Millisecond}), open(t, pg.DSN, Options{})
	commitChain(t, a, "agent-1", 2, 3, "", time.Now())
	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	got := make(chan string, 100)
	done := make(chan error, 1)
	go func() {
		done <- a.Tail(ctx, 2, true, func(sr *mcpreadyv1.StoredReceipt) error { got <- sr.Receipt.GetReceiptId(); return nil })
	}()
	want := []string{"agent-1-2-1", "agent-1-2-2", "agent-2-1-0", "agent-2-1-1", "agent-2-1-2", "agent-2-2-0", "agent-2-2-1", "agent-2-2-2"}
	for i, w := range want {
		if i == 2 { // the last n are out: another replica commits now
			commitChain(t, b, "agent-2", 2, 3, "", time.Now())
		}
		select {
		case id := <-got:
			if id != w {
				t.Fatalf("tail[%d] = %s, want %s", i, id, w)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("tail stopped after %d receipts", i)
		}
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("tail ended with %v", err)
	}
	select {
	case id := <-got:
		t.Fatalf("receipt %s delivered twice", id)
	default:
	}
}

func TestRetentionDropsWholePartitions(t *testing.T) {
	pg := pgtest.Start(t)
	now := time.Now()
	clock := now
	d := open(t, pg.DSN, Options{Retention: 48 * time.Hour, Now: func() time.Time { return clock }})
	old, rs, ds := batch("agent-1", 1, 2, "", now)
	old.Received = now.AddDate(0, 0, -5)
	st, err := d.Commit(bg, chainhead.State{}, old, rs, ds)
	if err != nil {
		t.Fatal(err)
	}
	fresh, rs, ds := batch("agent-1", 2, 2, "", now)
	if _, err := d.Commit(bg, st, fresh, rs, ds); err != nil {
		t.Fatal(err)
	}
	n, err := d.Maintain(bg)
	if err != nil || n != 1 {
		t.Fatalf("Maintain dropped %d partitions, %v; want 1", n, err)
	}
	left, _, _ := d.Query(bg, receiptstore.Query{})
	if len(left) != 2 || left[0].BatchId != fresh.BatchID {
		t.Fatalf("after retention %d receipts left", len(left))
	}
	if h, _ := d.Get(bg, "agent-1"); h.Sequence != 2 {
		t.Fatalf("retention moved the head: %+v", h)
	}
	var tables int
	if err := d.pool.QueryRow(bg, `SELECT count(*) FROM pg_class WHERE relname = $1`, partitionName("receipts", dayOf(old.Received))).Scan(&tables); err != nil || tables != 0 {
		t.Fatalf("old partition still there (%d, %v)", tables, err)
	}
}

func TestOpenRefusesNewerSchema(t *testing.T) {
	pg := pgtest.Start(t)
	open(t, pg.DSN, Options{}).Close()
	conn, err := pgx.Connect(bg, pg.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(bg)
	if _, err := conn.Exec(bg, `UPDATE receipt_schema SET version = version + 1`); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(bg, pg.DSN, Options{}); !errors.Is(err, ErrSchemaNewer) {
		t.Fatalf("Open against a newer schema: %v", err)
	}
	// A second open at the same version changes nothing.
	if _, err := conn.Exec(bg, `UPDATE receipt_schema SET version = version - 1`); err != nil {
		t.Fatal(err)
	}
	open(t, pg.DSN, Options{})
}

func TestDatabaseUnavailable(t *testing.T) {
	pg := pgtest.Start(t)
	d := open(t, pg.DSN, Options{Timeout: 2 * time.Second})
	b1, rs1, ds1 := batch("agent-1", 1, 1, "", time.Now())
	st, err := d.Commit(bg, chainhead.State{}, b1, rs1, ds1)
	if err != nil {
		t.Fatal(err)
	}
	if err := pg.Kill(); err != nil {
		t.Fatal(err)
	}
	b2, rs, ds := batch("agent-1", 2, 1, "", time.Now())
	if _, err := d.Commit(bg, st, b2, rs, ds); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("commit with the database down: %v", err)
	}
	if _, err := d.Get(bg, "agent-1"); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("head read with the database down: %v", err)
	}
	if err := pg.Restart(); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Commit(bg, st, b2, rs, ds); err != nil {
		t.Fatalf("commit after the database came back: %v", err)
	}
	pg.Kill()
	if _, err := Open(bg, pg.DSN, Options{Timeout: time.Second}); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Open with the database down: %v", err)
	}
}

func TestTailLastN(t *testing.T) {
	pg := pgtest.Start(t)
	d := open(t, pg.DSN, Options{})
	commitChain(t, d, "agent-1", 3, 2, "", time.Now())
	for n, want := range map[int]string{0: "[]", 1: "[agent-1-3-1]", 3: "[agent-1-2-1 agent-1-3-0 agent-1-3-1]", 100: "[agent-1-1-0 agent-1-1-1 agent-1-2-0 agent-1-2-1 agent-1-3-0 agent-1-3-1]"} {
		got := []string{}
		if err := d.Tail(bg, n, false, func(sr *mcpreadyv1.StoredReceipt) error { got = append(got, sr.Receipt.GetReceiptId()); return nil }); err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(got) != want {
			t.Errorf("tail %d: %v, want %s", n, got, want)
		}
	}
}
