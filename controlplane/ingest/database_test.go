package ingest

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/mcpready/mcpready/artifact"
	"github.com/mcpready/mcpready/controlplane/receiptdb"
	"github.com/mcpready/mcpready/controlplane/receiptstore"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/internal/pgtest"
	"github.com/mcpready/mcpready/ledger"
	"github.com/mcpready/mcpready/sign"
)

// dbReplica is one ingest service on the shared receipt database, served
// over real gRPC.
type dbReplica struct {
	svc  *Service
	db   *receiptdb.DB
	addr string
}

func startDBReplica(t testing.TB, dsn string, p *pki) *dbReplica {
	t.Helper()
	db, err := receiptdb.Open(context.Background(), dsn, receiptdb.Options{Timeout: 2 * time.Second, PollEvery: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := New(Options{Database: db, Trust: func() *sign.Trust { return p.trust }, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	srv, addr := serve(t, svc)
	t.Cleanup(func() { srv.Stop(); db.Close() })
	return &dbReplica{svc: svc, db: db, addr: addr}
}

func uploadTo(r *dbReplica, s sealed) (Result, error) {
	return r.svc.Ingest(&mcpreadyv1.Node{Id: s.b.AgentId}, &mcpreadyv1.UploadBatchesRequest{BatchId: s.b.BatchId, Sequence: s.b.Sequence, Bundle: s.bundle, Receipts: s.receipts})
}

func countRequested(t *testing.T, r *dbReplica) map[string]int {
	t.Helper()
	rs, _, err := r.db.Query(context.Background(), receiptstore.Query{})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, sr := range rs {
		seen[sr.Receipt.GetRequested()]++
	}
	return seen
}

func TestDatabaseChainAcrossReplicas(t *testing.T) {
	pg := pgtest.Start(t)
	p := newPKI(t)
	a, b := startDBReplica(t, pg.DSN, p), startDBReplica(t, pg.DSN, p)
	c := agentChain(t, p, 7)
	for i, to := range []*dbReplica{a, a, b, b, a, b, a} {
		res, err := uploadTo(to, c[i])
		if err != nil || res.Duplicate || res.Receipts != 1 {
			t.Fatalf("batch %d: %+v %v", i+1, res, err)
		}
	}
	// Resend after a lost acknowledgement: a no-op on either replica.
	for _, to := range []*dbReplica{a, b} {
		for _, s := range []sealed{c[3], c[6]} {
			if res, err := uploadTo(to, s); err != nil || !res.Duplicate {
				t.Fatalf("resend of %d: %+v %v", s.b.Sequence, res, err)
			}
		}
	}
	fork := seal(t, p.agent, "agent-1", 5, artifact.Digest(c[3].bundle), mk(99))
	for _, to := range []*dbReplica{a, b} {
		_, err := uploadTo(to, fork)
		wantReject(t, err, string(ledger.ReasonFork))
	}
	_, err := uploadTo(b, seal(t, p.agent, "agent-1", 9, artifact.Digest(c[6].bundle), mk(9)))
	wantReject(t, err, string(ledger.ReasonGap))
	// Every replica answers for every receipt, each stored once.
	for _, r := range []*dbReplica{a, b} {
		seen := countRequested(t, r)
		if len(seen) != 7 {
			t.Fatalf("replica sees %d receipts, want 7", len(seen))
		}
		for k, n := range seen {
			if n != 1 {
				t.Fatalf("%s stored %d times", k, n)
			}
		}
	}
	if h, _ := a.db.Get(context.Background(), "agent-1"); h.Sequence != 7 || h.Digest != artifact.Digest(c[6].bundle) {
		t.Fatalf("head %+v", h)
	}
}

// TestDatabaseRacingReplicas: both replicas take each next batch at once
// (the same batch, or a fork): one commits, the other reports a
// duplicate or a fork; the receipt is stored once.
func TestDatabaseRacingReplicas(t *testing.T) {
	pg := pgtest.Start(t)
	p := newPKI(t)
	a, b := startDBReplica(t, pg.DSN, p), startDBReplica(t, pg.DSN, p)
	prev := ""
	for seq := uint64(1); seq <= 10; seq++ {
		mine := seal(t, p.agent, "agent-1", seq, prev, mk(int(seq)))
		theirs := mine
		if seq%2 == 0 {
			theirs = seal(t, p.agent, "agent-1", seq, prev, mk(1000+int(seq)))
		}
		var wg sync.WaitGroup
		var ra, rb Result
		var ea, eb error
		wg.Go(func() { ra, ea = uploadTo(a, mine) })
		wg.Go(func() { rb, eb = uploadTo(b, theirs) })
		wg.Wait()
		accepted := 0
		for _, o := range []struct {
			res Result
			err error
			s   sealed
		}{{ra, ea, mine}, {rb, eb, theirs}} {
			if o.err == nil && !o.res.Duplicate {
				accepted++
				prev = artifact.Digest(o.s.bundle)
			}
		}
		if accepted != 1 {
			t.Fatalf("seq %d: %d accepted (%v %v / %v %v)", seq, accepted, ra, ea, rb, eb)
		}
	}
	if n := len(countRequested(t, a)); n != 10 {
		t.Fatalf("%d receipts stored, want 10", n)
	}
}

// TestDatabaseShipperMovesBetweenReplicas: a real spool and shipper whose
// connection goes to A, B, then A; nothing refused, every receipt stored
// exactly once, and a query through either replica sees all.
func TestDatabaseShipperMovesBetweenReplicas(t *testing.T) {
	pg := pgtest.Start(t)
	p := newPKI(t)
	a, b := startDBReplica(t, pg.DSN, p), startDBReplica(t, pg.DSN, p)
	sp := openSpool(t, t.TempDir(), p.agent)
	defer sp.Close()
	n := 0
	for _, to := range []*dbReplica{a, b, a} {
		for range 25 {
			if err := sp.Append(mk(n)); err != nil {
				t.Fatal(err)
			}
			n++
		}
		ship(t, to.addr, sp)
	}
	for _, r := range []*dbReplica{a, b} {
		seen := countRequested(t, r)
		if len(seen) != n {
			t.Fatalf("replica sees %d distinct receipts, want %d", len(seen), n)
		}
		for k, c := range seen {
			if c != 1 {
				t.Fatalf("%s stored %d times", k, c)
			}
		}
	}
}

// TestDatabaseUnavailableRefusesWithReason: with the database down a batch
// is refused as receipt-database-unavailable and nothing is stored; once
// it is back the same batch is accepted, once.
func TestDatabaseUnavailableRefusesWithReason(t *testing.T) {
	pg := pgtest.Start(t)
	p := newPKI(t)
	a := startDBReplica(t, pg.DSN, p)
	c := agentChain(t, p, 3)
	if _, err := uploadTo(a, c[0]); err != nil {
		t.Fatal(err)
	}
	if err := pg.Kill(); err != nil {
		t.Fatal(err)
	}
	for _, s := range c[1:] {
		_, err := uploadTo(a, s)
		wantReject(t, err, ReasonDatabaseUnavailable)
	}
	if err := pg.Restart(); err != nil {
		t.Fatal(err)
	}
	for _, s := range c[1:] {
		if res, err := uploadTo(a, s); err != nil || res.Duplicate {
			t.Fatalf("after restart, batch %d: %+v %v", s.b.Sequence, res, err)
		}
	}
	if n := len(countRequested(t, a)); n != 3 {
		t.Fatalf("%d receipts stored, want 3", n)
	}
}

// TestQueryPagedInBothStores: QueryReceipts answers a page at a time
// (at most MaxPage), every receipt once across pages, from the segment
// store and from the database alike; a page beyond MaxPage and a bad
// token are refused as invalid arguments.
func TestQueryPagedInBothStores(t *testing.T) {
	pg := pgtest.Start(t)
	p := newPKI(t)
	c := agentChain(t, p, 23)
	seg := startCP(t, t.TempDir(), p, &syncBuf{})
	db := startDBReplica(t, pg.DSN, p)
	for name, svc := range map[string]*Service{"segments": seg.svc, "database": db.svc} {
		t.Run(name, func(t *testing.T) {
			for _, s := range c {
				if _, err := svc.Ingest(&mcpreadyv1.Node{Id: "agent-1"}, &mcpreadyv1.UploadBatchesRequest{Bundle: s.bundle, Receipts: s.receipts}); err != nil {
					t.Fatal(err)
				}
			}
			seen := map[string]int{}
			req := &mcpreadyv1.QueryReceiptsRequest{Limit: 5}
			pages := 0
			for {
				resp, err := svc.QueryReceipts(context.Background(), req)
				if err != nil {
					t.Fatal(err)
				}
				pages++
				if len(resp.GetReceipts()) > 5 {
					t.Fatalf("page of %d", len(resp.GetReceipts()))
				}
				for _, r := range resp.GetReceipts() {
					seen[r.GetReceipt().GetRequested()]++
				}
				if resp.GetNextPageToken() == "" {
					break
				}
				req.PageToken = resp.GetNextPageToken()
			}
			if len(seen) != 23 || pages < 5 {
				t.Fatalf("%d receipts over %d pages", len(seen), pages)
			}
			for k, n := range seen {
				if n != 1 {
					t.Fatalf("%s on %d pages", k, n)
				}
			}
			for _, bad := range []*mcpreadyv1.QueryReceiptsRequest{{Limit: MaxPage + 1}, {Limit: -1}, {PageToken: "x"}} {
				if _, err := svc.QueryReceipts(context.Background(), bad); status.Code(err) != codes.InvalidArgument {
					t.Fatalf("%v: %v", bad, err)
				}
			}
		})
	}
}
