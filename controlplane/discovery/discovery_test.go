package discovery_test

import (
	"context"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/mcpready/mcpready/artifact"
	"github.com/mcpready/mcpready/controlplane/discovery"
	"github.com/mcpready/mcpready/controlplane/store"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/internal/etcdtest"
	"github.com/mcpready/mcpready/nodelabel"
)

var policyURL = artifact.KindPolicy.TypeURL()

type env struct {
	st       *store.Store
	cli      mcpreadyv1.DiscoveryServiceClient
	ds       *discovery.Server
	start    func()
	versions int
}

func setup(t *testing.T) *env {
	t.Helper()
	etcd, _ := etcdtest.Etcd(t)
	st := store.New(etcd, store.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	ds := discovery.New(st, discovery.Options{Debounce: 20 * time.Millisecond})
	done := make(chan struct{})
	var once sync.Once
	start := func() { once.Do(func() { go func() { ds.Run(ctx); close(done) }() }) }
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	mcpreadyv1.RegisterDiscoveryServiceServer(gs, ds)
	go gs.Serve(lis)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(); gs.Stop(); start(); cancel(); <-done })
	return &env{st: st, cli: mcpreadyv1.NewDiscoveryServiceClient(conn), ds: ds, start: start}
}

func (e *env) put(t *testing.T, name, body string, labels map[string]string) store.Record {
	t.Helper()
	e.versions++ // every write is newer than the last (the store's rollback check)
	r, _, err := e.st.Put(context.Background(), store.Record{Kind: artifact.KindPolicy, Name: name, Bundle: []byte(body), Labels: labels, Version: strconv.Itoa(e.versions)})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// pump reads a stream into a channel until it fails, so that a test can
// wait for a message with a timeout without leaving a reader behind.
func pump[T any](recv func() (T, error)) <-chan T {
	ch := make(chan T, 16)
	go func() {
		defer close(ch)
		for {
			m, err := recv()
			if err != nil {
				return
			}
			ch <- m
		}
	}()
	return ch
}

func recvTimeout[T any](t *testing.T, ch <-chan T, d time.Duration) (T, bool) {
	t.Helper()
	select {
	case m, ok := <-ch:
		if !ok {
			t.Fatal("stream ended")
		}
		return m, true
	case <-time.After(d):
		var zero T
		return zero, false
	}
}

func node(id string, labels map[string]string) *mcpreadyv1.Node {
	return &mcpreadyv1.Node{Id: id, Labels: labels}
}

// sotw opens a state-of-the-world stream, closed when the test ends, and
// pumps its responses.
func (e *env) sotw(t *testing.T) (mcpreadyv1.DiscoveryService_StreamResourcesClient, <-chan *mcpreadyv1.StreamResourcesResponse) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	s, err := e.cli.StreamResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return s, pump(s.Recv)
}

func names(rs []*mcpreadyv1.Resource) map[string]string {
	m := map[string]string{}
	for _, r := range rs {
		m[r.Name] = r.Version
	}
	return m
}

func TestSotWAckNackNoResendLoop(t *testing.T) {
	e := setup(t)
	e.put(t, "p1", "one", nil)
	e.start()
	s, sc := e.sotw(t)
	// subscribe
	s.Send(&mcpreadyv1.StreamResourcesRequest{Node: node("n1", nil), TypeUrl: policyURL})
	r1, ok := recvTimeout(t, sc, 5*time.Second)
	if !ok || len(r1.Resources) != 1 || string(r1.Resources[0].Bundle) != "one" || r1.Nonce == "" {
		t.Fatalf("initial: %v", r1)
	}
	s.Send(&mcpreadyv1.StreamResourcesRequest{TypeUrl: policyURL, VersionInfo: r1.VersionInfo, ResponseNonce: r1.Nonce})

	e.put(t, "p1", "two", nil)
	r2, ok := recvTimeout(t, sc, 5*time.Second)
	if !ok || r2.VersionInfo == r1.VersionInfo || string(r2.Resources[0].Bundle) != "two" {
		t.Fatalf("update: %v", r2)
	}
	// NACK: keep r1's version; the server must not resend r2.
	s.Send(&mcpreadyv1.StreamResourcesRequest{TypeUrl: policyURL, VersionInfo: r1.VersionInfo, ResponseNonce: r2.Nonce, ErrorDetail: &mcpreadyv1.ErrorDetail{Code: 3, Message: "bad signature"}})
	if m, got := recvTimeout(t, sc, 600*time.Millisecond); got {
		t.Fatalf("resent after NACK: %v", m)
	}
	// Agents shows what the node ACKed and what it refused, with the reason.
	ag := e.ds.Agents()
	if len(ag) != 1 || ag[0].NodeID != "n1" || len(ag[0].Types) != 1 {
		t.Fatalf("agents %+v", ag)
	}
	if ts := ag[0].Types[0]; ts.TypeURL != policyURL || ts.Acked != r1.VersionInfo || ts.Nacked != r2.VersionInfo || ts.NackReason != "bad signature" {
		t.Fatalf("type status %+v, want acked %s nacked %s", ts, r1.VersionInfo, r2.VersionInfo)
	}
	// only a new version is sent
	e.put(t, "p1", "three", nil)
	r3, ok := recvTimeout(t, sc, 5*time.Second)
	if !ok || string(r3.Resources[0].Bundle) != "three" {
		t.Fatalf("after NACK: %v", r3)
	}
}

func TestSotWReconnectHoldingCurrentGetsNothing(t *testing.T) {
	e := setup(t)
	e.put(t, "p1", "one", nil)
	e.start()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, _ := e.cli.StreamResources(ctx)
	sc := pump(s.Recv)
	s.Send(&mcpreadyv1.StreamResourcesRequest{Node: node("n1", nil), TypeUrl: policyURL})
	r1, ok := recvTimeout(t, sc, 5*time.Second)
	if !ok {
		t.Fatal("no initial push")
	}
	s2, _ := e.cli.StreamResources(ctx)
	sc2 := pump(s2.Recv)
	s2.Send(&mcpreadyv1.StreamResourcesRequest{Node: node("n1", nil), TypeUrl: policyURL, VersionInfo: r1.VersionInfo})
	if m, got := recvTimeout(t, sc2, 500*time.Millisecond); got {
		t.Fatalf("resent on reconnect: %v", m)
	}
}

func TestScopingByNodeLabels(t *testing.T) {
	e := setup(t)
	e.put(t, "global", "g", nil)
	e.put(t, "eu", "e", map[string]string{string(nodelabel.ScopeRegion): "eu-west, eu-central"})
	e.put(t, "us", "u", map[string]string{string(nodelabel.ScopeRegion): "us-east"})
	e.put(t, "gold-eu", "ge", map[string]string{string(nodelabel.ScopeRegion): "eu-west", string(nodelabel.ScopeTenantClass): "gold"})
	e.put(t, "host-a", "ha", map[string]string{string(nodelabel.ScopeHost): "a"})
	e.start()
	tests := []struct {
		labels map[string]string
		want   []string
	}{
		{nil, []string{"global"}},
		{map[string]string{"region": "eu-west"}, []string{"global", "eu"}},
		{map[string]string{"region": "eu-west", "tenant-class": "silver,gold"}, []string{"global", "eu", "gold-eu"}},
		{map[string]string{"region": "us-east", "host": "a"}, []string{"global", "us", "host-a"}},
		// the wire keys stay as they are; the plural and prefixed forms are accepted
		{map[string]string{"mcpready.dev/region": "eu-west", "tenant-classes": "gold"}, []string{"global", "eu", "gold-eu"}},
	}
	for i, tc := range tests {
		ctx, cancel := context.WithCancel(context.Background())
		s, _ := e.cli.StreamResources(ctx)
		sc := pump(s.Recv)
		s.Send(&mcpreadyv1.StreamResourcesRequest{Node: node("n", tc.labels), TypeUrl: policyURL})
		r, ok := recvTimeout(t, sc, 5*time.Second)
		cancel()
		if !ok {
			t.Fatalf("case %d: no push", i)
		}
		got := names(r.Resources)
		if len(got) != len(tc.want) {
			t.Fatalf("case %d: got %v want %v", i, got, tc.want)
		}
		for _, n := range tc.want {
			if _, ok := got[n]; !ok {
				t.Fatalf("case %d: missing %s in %v", i, n, got)
			}
		}
	}
}

func TestDeltaReconnectWithHeldVersions(t *testing.T) {
	e := setup(t)
	a := e.put(t, "a", "a1", nil)
	b := e.put(t, "b", "b1", nil)
	e.start()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	held := map[string]string{"a": "1", "b": "1"}
	_, _ = a, b
	s, _ := e.cli.DeltaResources(ctx)
	sc := pump(s.Recv)
	s.Send(&mcpreadyv1.DeltaResourcesRequest{Node: node("n1", nil), TypeUrl: policyURL, InitialResourceVersions: held})
	if m, got := recvTimeout(t, sc, 500*time.Millisecond); got {
		t.Fatalf("resent held resources: %v", m)
	}
	e.put(t, "a", "a2", nil)
	r, ok := recvTimeout(t, sc, 5*time.Second)
	if !ok || len(r.Resources) != 1 || r.Resources[0].Name != "a" || string(r.Resources[0].Bundle) != "a2" || len(r.RemovedResources) != 0 {
		t.Fatalf("delta update: %v", r)
	}
	s.Send(&mcpreadyv1.DeltaResourcesRequest{TypeUrl: policyURL, ResponseNonce: r.Nonce})
	// a deletion is sent as a removal
	if _, _, err := e.st.Put(context.Background(), store.Record{Kind: artifact.KindPolicy, Name: "b", Bundle: []byte("tomb"), Deleted: true}); err != nil {
		t.Fatal(err)
	}
	r, ok = recvTimeout(t, sc, 5*time.Second)
	if !ok || len(r.Resources) != 0 || len(r.RemovedResources) != 1 || r.RemovedResources[0] != "b" {
		t.Fatalf("delta removal: %v", r)
	}
	if len(r.Tombstones) != 1 || r.Tombstones[0].Name != "b" || string(r.Tombstones[0].Bundle) != "tomb" {
		t.Fatalf("the removal carries no tombstone: %v", r.Tombstones)
	}
	// NACK keeps nothing resent
	s.Send(&mcpreadyv1.DeltaResourcesRequest{TypeUrl: policyURL, ResponseNonce: r.Nonce, ErrorDetail: &mcpreadyv1.ErrorDetail{Message: "no"}})
	if m, got := recvTimeout(t, sc, 500*time.Millisecond); got {
		t.Fatalf("resent after delta NACK: %v", m)
	}
	// a stale held version gets the current one
	s2, _ := e.cli.DeltaResources(ctx)
	sc2 := pump(s2.Recv)
	s2.Send(&mcpreadyv1.DeltaResourcesRequest{Node: node("n2", nil), TypeUrl: policyURL, InitialResourceVersions: map[string]string{"a": "1", "b": "1"}})
	r, ok = recvTimeout(t, sc2, 5*time.Second)
	if !ok || len(r.Resources) != 1 || r.Resources[0].Version != "2" || len(r.RemovedResources) != 1 {
		t.Fatalf("stale reconnect: %v", r)
	}
}

func TestUnknownTypeRejected(t *testing.T) {
	e := setup(t)
	e.start()
	for _, u := range []string{"type.example/x", artifact.KindReceiptBatch.TypeURL()} {
		s, _ := e.cli.StreamResources(context.Background())
		s.Send(&mcpreadyv1.StreamResourcesRequest{Node: node("n", nil), TypeUrl: u})
		if _, err := s.Recv(); err == nil {
			t.Fatalf("%s accepted", u)
		}
	}
	s, _ := e.cli.StreamResources(context.Background())
	s.Send(&mcpreadyv1.StreamResourcesRequest{TypeUrl: policyURL})
	if _, err := s.Recv(); err == nil {
		t.Fatal("request without node accepted")
	}
}

// TestDisconnectMidPush: agents that vanish (or never read) while pushes are
// in flight do not stop the others from converging.
func TestDisconnectMidPush(t *testing.T) {
	e := setup(t)
	e.put(t, "p", "v0", nil)
	e.start()
	const n = 20
	var wg sync.WaitGroup
	latest := make([]chan string, n)
	ctxs := make([]context.CancelFunc, n)
	for i := range n {
		ctx, cancel := context.WithCancel(context.Background())
		ctxs[i] = cancel
		latest[i] = make(chan string, 100)
		s, err := e.cli.StreamResources(ctx)
		if err != nil {
			t.Fatal(err)
		}
		s.Send(&mcpreadyv1.StreamResourcesRequest{Node: node("n", nil), TypeUrl: policyURL})
		if i%4 == 3 {
			continue // a stalled agent: never reads
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				r, err := s.Recv()
				if err != nil {
					return
				}
				s.Send(&mcpreadyv1.StreamResourcesRequest{TypeUrl: policyURL, VersionInfo: r.VersionInfo, ResponseNonce: r.Nonce})
				latest[i] <- string(r.Resources[0].Bundle)
			}
		}()
	}
	big := string(make([]byte, 200_000))
	for v := range 5 {
		e.put(t, "p", big+string(rune('a'+v)), nil)
		if v == 2 {
			for i := 0; i < n; i += 4 {
				ctxs[i]() // disconnect mid-push
			}
		}
	}
	want := big + "e"
	for i := range n {
		if i%4 == 0 || i%4 == 3 {
			continue
		}
		deadline := time.After(10 * time.Second)
	wait:
		for {
			select {
			case got := <-latest[i]:
				if got == want {
					break wait
				}
			case <-deadline:
				t.Fatalf("agent %d did not converge", i)
			}
		}
	}
	for _, c := range ctxs {
		c()
	}
	wg.Wait()
}

// A state-of-the-world request may change its resource names: the agent
// gets what it now subscribes to, and nothing when the names are the same.
func TestSotWResourceNamesChange(t *testing.T) {
	e := setup(t)
	e.put(t, "p1", "one", nil)
	e.put(t, "p2", "two", nil)
	e.start()
	s, sc := e.sotw(t)
	s.Send(&mcpreadyv1.StreamResourcesRequest{Node: node("n1", nil), TypeUrl: policyURL, ResourceNames: []string{"p1"}})
	last, ok := recvTimeout(t, sc, 5*time.Second)
	if got := names(last.Resources); !ok || len(got) != 1 || got["p1"] == "" {
		t.Fatalf("initial: %v", got)
	}
	for _, step := range []struct {
		names []string
		want  []string // nil: no response expected
	}{
		{[]string{"p1", "p2"}, []string{"p1", "p2"}},
		{[]string{"p2"}, []string{"p2"}},
		{[]string{"p2"}, nil},
	} {
		s.Send(&mcpreadyv1.StreamResourcesRequest{TypeUrl: policyURL, VersionInfo: last.VersionInfo, ResponseNonce: last.Nonce, ResourceNames: step.names})
		m, got := recvTimeout(t, sc, 2*time.Second)
		if step.want == nil {
			if got {
				t.Fatalf("names %v unchanged, yet got %v", step.names, names(m.Resources))
			}
			continue
		}
		if !got {
			t.Fatalf("names %v: no response", step.names)
		}
		have := names(m.Resources)
		if len(have) != len(step.want) {
			t.Fatalf("names %v: got %v", step.names, have)
		}
		for _, n := range step.want {
			if have[n] == "" {
				t.Fatalf("names %v: got %v", step.names, have)
			}
		}
		last = m
	}
}
