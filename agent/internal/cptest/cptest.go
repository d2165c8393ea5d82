// Package cptest starts a real control plane for the host agent's tests:
// embedded etcd, the artifact store, the Discovery server and the Admin API
// (with lifecycle tracking, for drift reports) on a loopback
// gRPC listener, plus a root key that signs test artifacts. It is for tests
// only and must not be used by production code.
package cptest

import (
	"context"
	"crypto"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/mcpready/mcpready/artifact"
	"github.com/mcpready/mcpready/controlplane/admin"
	"github.com/mcpready/mcpready/controlplane/discovery"
	"github.com/mcpready/mcpready/controlplane/etcdembed"
	"github.com/mcpready/mcpready/controlplane/lifecycle"
	"github.com/mcpready/mcpready/controlplane/store"
	"github.com/mcpready/mcpready/controlplane/writer"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/internal/testpki"
	"github.com/mcpready/mcpready/sign"
)

// Env is a running control plane.
type Env struct {
	Store *store.Store
	// Addr is the gRPC address agents dial.
	Addr string
	// Root signs every test artifact; RootPub is what agents pin.
	Root    crypto.Signer
	RootPub crypto.PublicKey

	t        testing.TB
	mu       sync.Mutex
	gs       *grpc.Server
	ds       *discovery.Server
	register []func(*grpc.Server)
}

// Start starts etcd, the store and the Discovery server, and stores a
// TrustPolicy named "default" signed by a fresh root key.
func Start(t testing.TB) *Env {
	t.Helper()
	m, err := etcdembed.StartSingle(etcdembed.Options{Dir: t.TempDir(), ProgressNotifyInterval: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{m.ClientURL}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	root, err := sign.GenerateKey(sign.AlgorithmEd25519)
	if err != nil {
		t.Fatal(err)
	}
	e := &Env{Store: store.New(cli, store.Options{}), Root: root, RootPub: root.Public(), t: t}
	ctx, cancel := context.WithCancel(context.Background())
	e.ds = discovery.New(e.Store, discovery.Options{Debounce: 10 * time.Millisecond})
	done := make(chan struct{})
	go func() { _ = e.ds.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	e.Put(artifact.New(artifact.KindTrustPolicy, "default", &mcpreadyv1.TrustPolicy{}))
	// The Admin API (verified writes, drift reports) with lifecycle tracking.
	w, err := writer.New(writer.Options{Store: e.Store, Root: e.RootPub})
	if err != nil {
		t.Fatal(err)
	}
	lc, err := lifecycle.New(lifecycle.Options{Writer: w})
	if err != nil {
		t.Fatal(err)
	}
	adm := admin.New(admin.Options{Writer: w, Lifecycle: lc})
	e.Register(func(gs *grpc.Server) { mcpreadyv1.RegisterAdminServiceServer(gs, adm) })
	e.Serve("127.0.0.1:0")
	t.Cleanup(e.Stop)
	return e
}

// Register adds a service to the gRPC server (applied on the next Serve).
func (e *Env) Register(f func(*grpc.Server)) {
	e.mu.Lock()
	e.register = append(e.register, f)
	e.mu.Unlock()
}

// Serve (re)starts the gRPC server on addr ("127.0.0.1:0" picks a port).
func (e *Env) Serve(addr string) {
	e.t.Helper()
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		e.t.Fatal(err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.Addr = lis.Addr().String()
	e.gs = grpc.NewServer()
	mcpreadyv1.RegisterDiscoveryServiceServer(e.gs, e.ds)
	for _, f := range e.register {
		f(e.gs)
	}
	go e.gs.Serve(lis)
}

// Stop stops the gRPC server, as a control plane outage.
func (e *Env) Stop() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.gs != nil {
		e.gs.Stop()
		e.gs = nil
	}
}

// Dial connects to the control plane.
func (e *Env) Dial() *grpc.ClientConn {
	e.t.Helper()
	conn, err := grpc.NewClient(e.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { conn.Close() })
	return conn
}

// Sign signs obj with the root key.
func (e *Env) Sign(obj *artifact.Object) []byte {
	e.t.Helper()
	b, _, err := sign.Sign(obj, e.Root)
	if err != nil {
		e.t.Fatal(err)
	}
	return b
}

// versions is the signed version Put gives an unversioned artifact: it only
// ever increases within a test binary, so every Put is newer than the last
// (agents refuse a resource that is not newer than what they hold).
var versions atomic.Int64

// Put signs obj with the root key and stores it. An obj without a signed
// provenance.version is given the next one first (obj is modified). Like
// the control plane's write path, the store refuses a version that is not
// newer than the stored one.
func (e *Env) Put(obj *artifact.Object) []byte {
	e.t.Helper()
	if obj.Version() == "" {
		setVersion(obj, strconv.FormatInt(versions.Add(1), 10))
	}
	b := e.Sign(obj)
	e.put(store.Record{Kind: obj.Kind, Name: obj.Metadata.Name, Bundle: b, Version: obj.Version()})
	return b
}

// setVersion sets the provenance.version of obj's spec, creating the
// provenance when the kind has one and it is unset.
func setVersion(obj *artifact.Object, v string) {
	if p := obj.Provenance(); p != nil {
		p.Version = v
		return
	}
	testpki.SetProvenance(obj.Spec, &mcpreadyv1.Provenance{Version: v})
}

// PutBundle stores a bundle as is, as a compromised control plane could:
// it may be tampered or replayed (the store does not verify, and its
// rollback check is passed with a made-up version), so what reaches the
// agent is the agent's to refuse.
func (e *Env) PutBundle(k artifact.Kind, name string, bundle []byte) {
	e.t.Helper()
	held := ""
	if r, err := e.Store.Get(context.Background(), k, name); err == nil {
		held = r.HighWater
	}
	e.put(store.Record{Kind: k, Name: name, Bundle: bundle, Version: artifact.NextVersion(held)})
}

func (e *Env) put(rec store.Record) {
	e.t.Helper()
	if _, _, err := e.Store.Put(context.Background(), rec); err != nil {
		e.t.Fatal(err)
	}
}
