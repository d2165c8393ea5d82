package ingest

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpready/mcpready/artifact"
	"github.com/mcpready/mcpready/controlplane/chainhead"
	"github.com/mcpready/mcpready/controlplane/etcdembed"
	"github.com/mcpready/mcpready/controlplane/receiptstore"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/internal/etcdtest"
	"github.com/mcpready/mcpready/ledger"
)

// countObserver counts observed receipts per batch id's first receipt.
type countObserver struct {
	mu sync.Mutex
	n  int
}

func (o *countObserver) Observe(_ string, rs []*mcpreadyv1.Receipt, _ []string) {
	o.mu.Lock()
	o.n += len(rs)
	o.mu.Unlock()
}

func (o *countObserver) count() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.n
}

// Both Heads implementations satisfy the interface ingest runs on.
var (
	_ Heads = (*chainhead.Store)(nil)
	_ Heads = (*chainhead.Memory)(nil)
)

// headKinds are the chain head implementations every chain test runs
// with: each returns two replicas' handles on one set of heads (two etcd
// clients, or one Memory twice).
var headKinds = []struct {
	name string
	new  func(t *testing.T) (a, b Heads)
}{
	{"etcd", func(t *testing.T) (Heads, Heads) {
		cli, _ := etcdtest.Etcd(t)
		return chainhead.New(cli, chainhead.Options{}), chainhead.New(etcdtest.Client(t, cli.Endpoints()...), chainhead.Options{})
	}},
	{"memory", func(*testing.T) (Heads, Heads) {
		m := chainhead.NewMemory(chainhead.Options{})
		return m, m
	}},
}

// eachHeads runs fn once per head implementation.
func eachHeads(t *testing.T, fn func(t *testing.T, newHeads func(t *testing.T) (a, b Heads))) {
	for _, k := range headKinds {
		t.Run(k.name, func(t *testing.T) { fn(t, k.new) })
	}
}

// replicas starts two ingest services, each with its own receipt store,
// sharing the heads newHeads returns. h reads the shared heads.
func replicas(t *testing.T, p *pki, newHeads func(t *testing.T) (a, b Heads)) (a, b *controlPlane, h Heads) {
	ha, hb := newHeads(t)
	a = startCPWith(t, t.TempDir(), p, &syncBuf{}, ha)
	b = startCPWith(t, t.TempDir(), p, &syncBuf{}, hb)
	return a, b, ha
}

func upload(cp *controlPlane, s sealed) (Result, error) {
	return cp.svc.Ingest(&mcpreadyv1.Node{Id: s.b.AgentId}, &mcpreadyv1.UploadBatchesRequest{BatchId: s.b.BatchId, Sequence: s.b.Sequence, Bundle: s.bundle, Receipts: s.receipts})
}

// agentChain seals batches 1..n of agent-1, one receipt each.
func agentChain(t *testing.T, p *pki, n int) []sealed {
	var out []sealed
	prev := ""
	for seq := 1; seq <= n; seq++ {
		s := seal(t, p.agent, "agent-1", uint64(seq), prev, mk(seq))
		out = append(out, s)
		prev = artifact.Digest(s.bundle)
	}
	return out
}

func wantHead(t *testing.T, heads Heads, s sealed) {
	t.Helper()
	h, err := heads.Get(context.Background(), "agent-1")
	if err != nil {
		t.Fatal(err)
	}
	if h.Sequence != s.b.Sequence || h.Digest != artifact.Digest(s.bundle) {
		t.Fatalf("shared head %d %s, want %d %s", h.Sequence, h.Digest, s.b.Sequence, artifact.Digest(s.bundle))
	}
}

func wantReject(t *testing.T, err error, reason string) {
	t.Helper()
	var rej *RejectError
	if !errors.As(err, &rej) || rej.Reason != reason {
		t.Fatalf("got %v, want rejection %s", err, reason)
	}
}

func TestChainContinuesAcrossReplicas(t *testing.T) {
	eachHeads(t, func(t *testing.T, newHeads func(*testing.T) (Heads, Heads)) {
		p := newPKI(t)
		a, b, heads := replicas(t, p, newHeads)
		c := agentChain(t, p, 7)
		for i, to := range []*controlPlane{a, a, a, b, b, b, a} {
			res, err := upload(to, c[i])
			if err != nil || res.Duplicate || res.Receipts != 1 {
				t.Fatalf("batch %d: %+v %v", i+1, res, err)
			}
		}
		wantHead(t, heads, c[6])
		if sa, sb := a.store.Stats(), b.store.Stats(); sa.Batches != 4 || sb.Batches != 3 {
			t.Fatalf("replica stores hold %d and %d batches, want 4 and 3", sa.Batches, sb.Batches)
		}

		// A resend of batch 5 (accepted by B) is a duplicate on A and on B,
		// and stored nowhere again.
		for _, to := range []*controlPlane{a, b} {
			if res, err := upload(to, c[4]); err != nil || !res.Duplicate {
				t.Fatalf("resend of 5: %+v %v", res, err)
			}
		}
		// A different batch 5 is a fork on either replica.
		fork := seal(t, p.agent, "agent-1", 5, artifact.Digest(c[3].bundle), mk(99))
		for _, to := range []*controlPlane{a, b} {
			_, err := upload(to, fork)
			wantReject(t, err, string(ledger.ReasonFork))
		}
		// So is a batch 8 that does not name batch 7; batch 9 is a gap.
		_, err := upload(b, seal(t, p.agent, "agent-1", 8, artifact.Digest(c[5].bundle), mk(8)))
		wantReject(t, err, string(ledger.ReasonFork))
		_, err = upload(b, seal(t, p.agent, "agent-1", 9, artifact.Digest(c[6].bundle), mk(9)))
		wantReject(t, err, string(ledger.ReasonGap))
		wantHead(t, heads, c[6])
		if sa, sb := a.store.Stats(), b.store.Stats(); sa.Batches != 4 || sb.Batches != 3 {
			t.Fatalf("after resends and forks: %d and %d batches", sa.Batches, sb.Batches)
		}
	})
}

// TestShipperMovesBetweenReplicas: a real agent spool and shipper whose
// connection goes to replica A, then B, then A again; nothing is refused
// and every receipt is stored exactly once across the two replicas.
func TestShipperMovesBetweenReplicas(t *testing.T) {
	eachHeads(t, func(t *testing.T, newHeads func(*testing.T) (Heads, Heads)) {
		p := newPKI(t)
		a, b, _ := replicas(t, p, newHeads)
		sp := openSpool(t, t.TempDir(), p.agent)
		defer sp.Close()
		n := 0
		for _, to := range []*controlPlane{a, b, a} {
			for i := 0; i < 25; i++ {
				if err := sp.Append(mk(n)); err != nil {
					t.Fatal(err)
				}
				n++
			}
			ship(t, to.addr, sp)
		}
		seen := map[string]int{}
		for _, cp := range []*controlPlane{a, b} {
			rs, _, err := cp.store.Query(context.Background(), receiptstore.Query{})
			if err != nil {
				t.Fatal(err)
			}
			if len(rs) == 0 {
				t.Fatal("a replica received nothing")
			}
			for _, r := range rs {
				seen[r.Receipt.Requested]++
			}
		}
		if len(seen) != n {
			t.Fatalf("%d distinct receipts stored, want %d", len(seen), n)
		}
		for k, c := range seen {
			if c != 1 {
				t.Fatalf("%s stored %d times", k, c)
			}
		}
	})
}

// TestLostRaceAfterStore: replica B accepts batch 2 while A is between its
// local store and its CAS; A's CAS loses and A reports what B's batch
// makes of its own: a duplicate or a fork. There is one head, B's.
func TestLostRaceAfterStore(t *testing.T) {
	eachHeads(t, func(t *testing.T, newHeads func(*testing.T) (Heads, Heads)) {
		p := newPKI(t)
		c := agentChain(t, p, 2)
		fork := seal(t, p.agent, "agent-1", 2, artifact.Digest(c[0].bundle), mk(77))
		for _, tc := range []struct {
			name    string
			viaB    sealed
			wantDup bool
		}{
			{"same batch", c[1], true},
			{"forked batch", fork, false},
		} {
			t.Run(tc.name, func(t *testing.T) {
				a, b, heads := replicas(t, p, newHeads)
				obs := &countObserver{}
				a.svc.opts.Observer = obs
				if _, err := upload(a, c[0]); err != nil {
					t.Fatal(err)
				}
				a.svc.afterStore = func(*mcpreadyv1.ReceiptBatch) error {
					if res, err := upload(b, tc.viaB); err != nil || res.Duplicate {
						t.Errorf("B: %+v %v", res, err)
					}
					return nil
				}
				res, err := upload(a, c[1])
				switch {
				case tc.wantDup && (err != nil || !res.Duplicate):
					t.Fatalf("A: %+v %v, want duplicate", res, err)
				case !tc.wantDup:
					wantReject(t, err, string(ledger.ReasonFork))
				}
				wantHead(t, heads, tc.viaB)
				if obs.count() != 1 {
					t.Fatalf("A observed %d receipts, want 1 (batch 1 only)", obs.count())
				}
			})
		}
	})
}

// TestConcurrentReplicasOneHead races both replicas on each next sequence
// (the same batch, or a fork): exactly one accepts, the other reports a
// duplicate or a fork, and the head is the winner's.
func TestConcurrentReplicasOneHead(t *testing.T) {
	eachHeads(t, func(t *testing.T, newHeads func(*testing.T) (Heads, Heads)) {
		p := newPKI(t)
		a, b, heads := replicas(t, p, newHeads)
		prev := ""
		for seq := uint64(1); seq <= 12; seq++ {
			mine := seal(t, p.agent, "agent-1", seq, prev, mk(int(seq)))
			theirs := mine
			if seq%2 == 0 {
				theirs = seal(t, p.agent, "agent-1", seq, prev, mk(1000+int(seq)))
			}
			type out struct {
				s   sealed
				res Result
				err error
			}
			outs := make(chan out, 2)
			for _, x := range []struct {
				cp *controlPlane
				s  sealed
			}{{a, mine}, {b, theirs}} {
				go func() {
					res, err := upload(x.cp, x.s)
					outs <- out{x.s, res, err}
				}()
			}
			o1, o2 := <-outs, <-outs
			won := func(o out) bool { return o.err == nil && !o.res.Duplicate }
			if won(o1) == won(o2) {
				t.Fatalf("sequence %d: %+v %v / %+v %v, want exactly one winner", seq, o1.res, o1.err, o2.res, o2.err)
			}
			winner, loser := o1, o2
			if won(o2) {
				winner, loser = o2, o1
			}
			var rej *RejectError
			if !(loser.err == nil && loser.res.Duplicate) && !(errors.As(loser.err, &rej) && rej.Reason == string(ledger.ReasonFork)) {
				t.Fatalf("sequence %d: loser %+v %v, want duplicate or fork", seq, loser.res, loser.err)
			}
			wantHead(t, heads, winner.s)
			prev = artifact.Digest(winner.s.bundle)
		}
	})
}

// TestCrashBetweenStoreAndCAS: the replica stores the batch, then "dies"
// before the CAS; the agent resends to the same or the other replica and
// it is accepted as the next batch, observed once, stored once per replica.
func TestCrashBetweenStoreAndCAS(t *testing.T) {
	eachHeads(t, func(t *testing.T, newHeads func(*testing.T) (Heads, Heads)) {
		p := newPKI(t)
		for _, resendToB := range []bool{false, true} {
			name := "resend to the same replica"
			if resendToB {
				name = "resend to the other replica"
			}
			t.Run(name, func(t *testing.T) {
				a, b, heads := replicas(t, p, newHeads)
				obsA, obsB := &countObserver{}, &countObserver{}
				a.svc.opts.Observer, b.svc.opts.Observer = obsA, obsB
				c := agentChain(t, p, 3)
				if _, err := upload(a, c[0]); err != nil {
					t.Fatal(err)
				}
				a.svc.afterStore = func(*mcpreadyv1.ReceiptBatch) error { return errors.New("simulated crash") }
				_, err := upload(a, c[1])
				wantReject(t, err, ReasonChainUnavailable)
				a.svc.afterStore = nil
				wantHead(t, heads, c[0])
				if a.store.Stats().Batches != 2 {
					t.Fatalf("A holds %d batches, want 2 (the crashed one stored)", a.store.Stats().Batches)
				}
				to := a
				if resendToB {
					to = b
				}
				if res, err := upload(to, c[1]); err != nil || res.Duplicate {
					t.Fatalf("resend: %+v %v, want accepted", res, err)
				}
				wantHead(t, heads, c[1])
				if res, err := upload(b, c[2]); err != nil || res.Duplicate {
					t.Fatalf("next batch: %+v %v", res, err)
				}
				if got := obsA.count() + obsB.count(); got != 3 {
					t.Fatalf("observed %d receipts, want 3", got)
				}
				if a.store.Stats().Batches != 2 {
					t.Fatalf("A holds %d batches after the resend, want 2", a.store.Stats().Batches)
				}
			})
		}
	})
}

// TestEtcdUnavailable: with etcd down a batch is refused before it is
// stored; with etcd failing at the CAS it is refused after the local store,
// and once etcd is back the resend is accepted.
func TestEtcdUnavailable(t *testing.T) {
	dir := t.TempDir()
	m, err := etcdembed.StartSingle(etcdembed.Options{Dir: dir, LogLevel: "fatal"})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { m.Close() }()
	cli := etcdtest.Client(t, m.ClientURL)
	up := func() {
		// etcd back at the same address.
		u, err := url.Parse(m.ClientURL)
		if err != nil {
			t.Fatal(err)
		}
		if m, err = etcdembed.StartSingle(etcdembed.Options{Dir: dir, ClientAddr: u.Host, LogLevel: "fatal"}); err != nil {
			t.Fatal(err)
		}
	}
	testHeadsUnavailable(t, chainhead.New(cli, chainhead.Options{Timeout: 300 * time.Millisecond}), func() { m.Close() }, up)
}

// TestHeadsUnavailable is TestEtcdUnavailable for any Heads that fails:
// in-memory heads behind a switch.
func TestHeadsUnavailable(t *testing.T) {
	h := &switchedHeads{Heads: chainhead.NewMemory(chainhead.Options{})}
	testHeadsUnavailable(t, h, func() { h.down.Store(true) }, func() { h.down.Store(false) })
}

// switchedHeads fails every call with chainhead.ErrUnavailable while down.
type switchedHeads struct {
	Heads
	down atomic.Bool
}

var errSwitchedOff = errors.New("switched off")

func (h *switchedHeads) err() error {
	if h.down.Load() {
		return fmt.Errorf("%w: %w", chainhead.ErrUnavailable, errSwitchedOff)
	}
	return nil
}

func (h *switchedHeads) Get(ctx context.Context, agent string) (chainhead.State, error) {
	if err := h.err(); err != nil {
		return chainhead.State{}, err
	}
	return h.Heads.Get(ctx, agent)
}

func (h *switchedHeads) BatchDigest(ctx context.Context, agent string, seq uint64) (string, bool, error) {
	if err := h.err(); err != nil {
		return "", false, err
	}
	return h.Heads.BatchDigest(ctx, agent, seq)
}

func (h *switchedHeads) Advance(ctx context.Context, agent string, base chainhead.State, next ledger.Head) (chainhead.State, error) {
	if err := h.err(); err != nil {
		return chainhead.State{}, err
	}
	return h.Heads.Advance(ctx, agent, base, next)
}

// testHeadsUnavailable: heads down (down) at the CAS refuses a batch after
// the local store, heads down before refuses it before anything is stored,
// and once the heads are back (up) the resends continue the chain. The
// rejection wraps ErrRejected and chainhead.ErrUnavailable.
func testHeadsUnavailable(t *testing.T, heads Heads, down, up func()) {
	p := newPKI(t)
	a := startCPWith(t, t.TempDir(), p, &syncBuf{}, heads)
	c := agentChain(t, p, 3)
	if _, err := upload(a, c[0]); err != nil {
		t.Fatal(err)
	}

	// Heads fail at the CAS: stored locally, refused, head unchanged.
	a.svc.afterStore = func(*mcpreadyv1.ReceiptBatch) error { down(); return nil }
	_, err := upload(a, c[1])
	wantReject(t, err, ReasonChainUnavailable)
	if !errors.Is(err, ErrRejected) || !errors.Is(err, chainhead.ErrUnavailable) {
		t.Fatalf("rejection %v hides ErrRejected or chainhead.ErrUnavailable", err)
	}
	a.svc.afterStore = nil
	if a.store.Stats().Batches != 2 {
		t.Fatalf("store holds %d batches", a.store.Stats().Batches)
	}
	// Heads down: refused before anything is stored.
	_, err = upload(a, c[2])
	wantReject(t, err, ReasonChainUnavailable)
	if a.store.Stats().Batches != 2 {
		t.Fatalf("store holds %d batches", a.store.Stats().Batches)
	}

	up()
	for i := 1; i < 3; i++ {
		deadline := time.Now().Add(10 * time.Second)
		for {
			res, err := upload(a, c[i])
			if err == nil && !res.Duplicate {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("batch %d after the heads are back: %+v %v", i+1, res, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	if h, err := heads.Get(context.Background(), "agent-1"); err != nil || h.Sequence != 3 {
		t.Fatalf("head %+v %v", h, err)
	}
	if a.store.Stats().Batches != 3 {
		t.Fatalf("store holds %d batches", a.store.Stats().Batches)
	}
}

// TestChainBegunLocallyContinues: an agent with a head in the local store
// and none in Heads yet (a replica upgraded to shared heads, or a single
// replica restarted with in-memory heads) continues its chain.
func TestChainBegunLocallyContinues(t *testing.T) {
	eachHeads(t, func(t *testing.T, newHeads func(*testing.T) (Heads, Heads)) {
		p := newPKI(t)
		dir := t.TempDir()
		c := agentChain(t, p, 3)
		local := startCP(t, dir, p, &syncBuf{})
		for _, s := range c[:2] {
			if _, err := upload(local, s); err != nil {
				t.Fatal(err)
			}
		}
		local.stop()
		heads, _ := newHeads(t)
		a := startCPWith(t, dir, p, &syncBuf{}, heads)
		if res, err := upload(a, c[1]); err != nil || !res.Duplicate {
			t.Fatalf("resend of 2: %+v %v", res, err)
		}
		if res, err := upload(a, c[2]); err != nil || res.Duplicate {
			t.Fatalf("batch 3: %+v %v", res, err)
		}
		wantHead(t, heads, c[2])
	})
}
