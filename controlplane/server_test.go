package controlplane_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/mcpready/mcpready/artifact"
	"github.com/mcpready/mcpready/controlplane"
	"github.com/mcpready/mcpready/controlplane/authz"
	"github.com/mcpready/mcpready/controlplane/etcdembed"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/internal/cprun"
	"github.com/mcpready/mcpready/internal/rpcmatrix"
	"github.com/mcpready/mcpready/internal/testpki"
	"github.com/mcpready/mcpready/sign"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// start runs a Server with o until the test ends.
func start(t *testing.T, o controlplane.Options) *controlplane.Server {
	t.Helper()
	if o.Listen == "" {
		o.Listen = "127.0.0.1:0"
	}
	if o.MetricsListen == "" {
		o.MetricsListen = "off"
	}
	if o.Logger == nil {
		o.Logger = quiet
	}
	if o.Debounce == 0 {
		o.Debounce = 20 * time.Millisecond
	}
	return cprun.Start(t, o)
}

func dial(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	c, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestRefusesPlaintextOffLoopback(t *testing.T) {
	p := testpki.New(t)
	for _, addr := range []string{"0.0.0.0:0", ":0"} {
		_, err := controlplane.New(controlplane.Options{Listen: addr, DataDir: t.TempDir(), Root: p.Root.Public()})
		if !errors.Is(err, controlplane.ErrConfig) {
			t.Fatalf("%s: %v", addr, err)
		}
	}
	if _, err := controlplane.New(controlplane.Options{Listen: "127.0.0.1:0", DataDir: t.TempDir()}); !errors.Is(err, controlplane.ErrConfig) {
		t.Fatalf("missing root accepted: %v", err)
	}
}

func TestEtcdUnreachableAtStart(t *testing.T) {
	p := testpki.New(t)
	s, err := controlplane.New(controlplane.Options{Listen: "127.0.0.1:0", MetricsListen: "off", EtcdEndpoints: []string{"http://127.0.0.1:1"}, Root: p.Root.Public(), EtcdWait: 1500 * time.Millisecond, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	err = s.Run(context.Background())
	if !errors.Is(err, controlplane.ErrEtcdUnreachable) || !strings.Contains(err.Error(), "attempts") {
		t.Fatalf("got %v", err)
	}
	if time.Since(t0) > 10*time.Second {
		t.Fatalf("gave up after %s", time.Since(t0))
	}
}

func TestEmbeddedEtcdHealthAndMetrics(t *testing.T) {
	p := testpki.New(t)
	s := start(t, controlplane.Options{DataDir: t.TempDir(), Root: p.Root.Public(), MetricsListen: "127.0.0.1:0"})
	conn := dial(t, s.Addr())
	hr, err := healthpb.NewHealthClient(conn).Check(context.Background(), &healthpb.HealthCheckRequest{})
	if err != nil || hr.Status != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health: %v %v", hr, err)
	}
	adm := mcpreadyv1.NewAdminServiceClient(conn)
	if _, err := adm.Apply(context.Background(), &mcpreadyv1.ApplyRequest{Bundle: p.TrustPolicy}); err != nil {
		t.Fatal(err)
	}
	if s.Trust() == nil {
		t.Fatal("no active trust after applying a TrustPolicy")
	}
	resp, err := http.Get("http://" + s.MetricsAddr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if hr, err := http.Get("http://" + s.MetricsAddr() + "/healthz"); err != nil || hr.StatusCode != 200 {
		t.Fatalf("healthz: %v %v", hr, err)
	}
	for _, m := range []string{"mcpready_discovery_connected_streams", "mcpready_discovery_connected_agents", "mcpready_etcd_errors_total", "mcpready_discovery_push_latency_seconds"} {
		if !strings.Contains(string(body), m) {
			t.Errorf("metrics lack %s", m)
		}
	}
	// The read-only console shares the listener; on the quickstart a
	// loopback caller may read it.
	if s.ConsoleURL() != "http://"+s.MetricsAddr()+"/console/" {
		t.Errorf("console URL %q", s.ConsoleURL())
	}
	cr, err := http.Get(s.ConsoleURL() + "registry?format=json")
	if err != nil || cr.StatusCode != 200 {
		t.Fatalf("console: %v %v", cr, err)
	}
	cr.Body.Close()
}

// agent subscribes to Policy over a real stream and returns the bundles it
// receives, ACKing each.
func agent(t *testing.T, addr string) <-chan *mcpreadyv1.StreamResourcesResponse {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	st, err := mcpreadyv1.NewDiscoveryServiceClient(dial(t, addr)).StreamResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(&mcpreadyv1.StreamResourcesRequest{Node: &mcpreadyv1.Node{Id: "agent-1"}, TypeUrl: artifact.KindPolicy.TypeURL()}); err != nil {
		t.Fatal(err)
	}
	out := make(chan *mcpreadyv1.StreamResourcesResponse, 16)
	go func() {
		for {
			r, err := st.Recv()
			if err != nil {
				return
			}
			st.Send(&mcpreadyv1.StreamResourcesRequest{TypeUrl: r.TypeUrl, VersionInfo: r.VersionInfo, ResponseNonce: r.Nonce})
			out <- r
		}
	}()
	return out
}

// waitPolicy waits until the agent holds a Policy named name whose bundle
// verifies and carries version.
func waitPolicy(t *testing.T, p *testpki.PKI, ch <-chan *mcpreadyv1.StreamResourcesResponse, name, version string) {
	t.Helper()
	tr, err := sign.NewTrust(p.TrustPolicy, p.Root.Public(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.After(20 * time.Second)
	for {
		select {
		case r := <-ch:
			for _, res := range r.Resources {
				v, err := tr.Verify(res.Bundle, time.Now())
				if err != nil {
					t.Fatalf("agent got an unverifiable bundle: %v", err)
				}
				if res.Name == name && v.Object.Spec.(*mcpreadyv1.Policy).GetProvenance().GetVersion() == version {
					return
				}
			}
		case <-deadline:
			t.Fatalf("agent never received %s version %s", name, version)
		}
	}
}

// sharedEtcd starts one embedded etcd for replicas to share until the
// test ends.
func sharedEtcd(t *testing.T) *etcdembed.Member {
	t.Helper()
	m, err := etcdembed.StartSingle(etcdembed.Options{Dir: t.TempDir(), LogLevel: "fatal"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m
}

func TestTwoReplicasShareEtcd(t *testing.T) {
	p := testpki.New(t)
	m := sharedEtcd(t)
	r1 := start(t, controlplane.Options{EtcdEndpoints: []string{m.ClientURL}, Root: p.Root.Public()})
	r2 := start(t, controlplane.Options{EtcdEndpoints: []string{m.ClientURL}, Root: p.Root.Public()})
	ch := agent(t, r2.Addr())
	adm := mcpreadyv1.NewAdminServiceClient(dial(t, r1.Addr()))
	ctx := context.Background()
	if _, err := adm.Apply(ctx, &mcpreadyv1.ApplyRequest{Bundle: p.TrustPolicy}); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.Apply(ctx, &mcpreadyv1.ApplyRequest{Bundle: testpki.Sign(t, testpki.Policy("org/p", "1", nil), p.Org)}); err != nil {
		t.Fatal(err)
	}
	waitPolicy(t, p, ch, "org/p", "1")
	// replica 2 sees replica 1's trust policy for its own writes
	adm2 := mcpreadyv1.NewAdminServiceClient(dial(t, r2.Addr()))
	if _, err := adm2.Apply(ctx, &mcpreadyv1.ApplyRequest{Bundle: testpki.Sign(t, testpki.Policy("org/p", "2", nil), p.Org)}); err != nil {
		t.Fatal(err)
	}
	waitPolicy(t, p, ch, "org/p", "2")
}

func TestEtcdLeaderLossKeepsServing(t *testing.T) {
	if testing.Short() {
		t.Skip("3-member cluster")
	}
	p := testpki.New(t)
	ms, err := etcdembed.StartCluster(etcdembed.Options{Dir: t.TempDir(), LogLevel: "fatal"}, 3)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, m := range ms {
			m.Close()
		}
	})
	s := start(t, controlplane.Options{EtcdEndpoints: etcdembed.Endpoints(ms), Root: p.Root.Public()})
	ch := agent(t, s.Addr())
	adm := mcpreadyv1.NewAdminServiceClient(dial(t, s.Addr()))
	// Bounded: a write that waits on the lost leader fails here, by name,
	// rather than at the package's timeout.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := adm.Apply(ctx, &mcpreadyv1.ApplyRequest{Bundle: p.TrustPolicy}); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.Apply(ctx, &mcpreadyv1.ApplyRequest{Bundle: testpki.Sign(t, testpki.Policy("org/p", "1", nil), p.Org)}); err != nil {
		t.Fatal(err)
	}
	waitPolicy(t, p, ch, "org/p", "1")
	stopped := false
	for _, m := range ms {
		if m.IsLeader() {
			m.Close()
			stopped = true
			break
		}
	}
	if !stopped {
		t.Fatal("no leader found")
	}
	// writes and reads keep working through the remaining quorum
	for v := 2; v <= 3; v++ {
		b := testpki.Sign(t, testpki.Policy("org/p", string(rune('0'+v)), nil), p.Org)
		if _, err := adm.Apply(ctx, &mcpreadyv1.ApplyRequest{Bundle: b}); err != nil {
			t.Fatalf("apply after leader loss: %v", err)
		}
	}
	h, err := adm.History(ctx, &mcpreadyv1.HistoryRequest{Kind: "Policy", Name: "org/p"})
	if err != nil || len(h.Revisions) != 3 {
		t.Fatalf("history after leader loss: %v %v", h, err)
	}
	waitPolicy(t, p, ch, "org/p", "3")
}

func TestMutualTLS(t *testing.T) {
	p := testpki.New(t)
	f := testpki.TLS(t, t.TempDir())
	// TLS lets the server listen off loopback; 127.0.0.1 keeps the test local.
	ca, err := os.ReadFile(f.CA)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	srvCert, err := tls.LoadX509KeyPair(f.ServerCert, f.ServerKey)
	if err != nil {
		t.Fatal(err)
	}
	s := start(t, controlplane.Options{DataDir: t.TempDir(), Root: p.Root.Public(),
		TLS: &tls.Config{Certificates: []tls.Certificate{srvCert}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert}, Roles: testpki.Roles()})
	check := func(cfg *tls.Config) error {
		c, err := grpc.NewClient(s.Addr(), grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
		if err != nil {
			return err
		}
		defer c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err = healthpb.NewHealthClient(c).Check(ctx, &healthpb.HealthCheckRequest{})
		return err
	}
	if err := check(&tls.Config{RootCAs: pool}); err == nil {
		t.Fatal("client without a certificate was accepted")
	}
	cert, err := tls.LoadX509KeyPair(f.ClientCert, f.ClientKey)
	if err != nil {
		t.Fatal(err)
	}
	if err := check(&tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}}); err != nil {
		t.Fatalf("client with a certificate: %v", err)
	}
	// plaintext is refused by a TLS server
	conn := dial(t, s.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}); err == nil {
		t.Fatal("plaintext client accepted")
	}
}

func TestEtcdLostMidRun(t *testing.T) {
	p := testpki.New(t)
	m, err := etcdembed.StartSingle(etcdembed.Options{Dir: t.TempDir(), LogLevel: "fatal"})
	if err != nil {
		t.Fatal(err)
	}
	s := start(t, controlplane.Options{EtcdEndpoints: []string{m.ClientURL}, Root: p.Root.Public()})
	ch := agent(t, s.Addr())
	conn := dial(t, s.Addr())
	adm := mcpreadyv1.NewAdminServiceClient(conn)
	if _, err := adm.Apply(context.Background(), &mcpreadyv1.ApplyRequest{Bundle: p.TrustPolicy}); err != nil {
		t.Fatal(err)
	}
	m.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_, err = adm.Apply(ctx, &mcpreadyv1.ApplyRequest{Bundle: testpki.Sign(t, testpki.Policy("org/p", "1", nil), p.Org)})
	if c := status.Code(err); c != codes.Unavailable && c != codes.DeadlineExceeded {
		t.Fatalf("apply with etcd down: %v", err)
	}
	// the server keeps answering and the agent's stream stays open
	if _, err := healthpb.NewHealthClient(conn).Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatalf("health with etcd down: %v", err)
	}
	select {
	case _, ok := <-ch:
		if !ok {
			t.Fatal("agent stream closed")
		}
	default:
	}
}

func TestEmbeddedEtcdSurvivesRestart(t *testing.T) {
	p := testpki.New(t)
	dir := t.TempDir()
	for round := range 2 {
		s, err := controlplane.New(controlplane.Options{Listen: "127.0.0.1:0", MetricsListen: "off", DataDir: dir, Root: p.Root.Public(), Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- s.Run(ctx) }()
		<-s.Ready()
		adm := mcpreadyv1.NewAdminServiceClient(dial(t, s.Addr()))
		r, err := adm.Apply(context.Background(), &mcpreadyv1.ApplyRequest{Bundle: p.TrustPolicy})
		if err != nil || r.Unchanged != (round == 1) || r.Revision != 1 {
			t.Fatalf("round %d: %v %v", round, r, err)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

// TestDriftReachesAgents: a drift report suspends the identity fleet-wide:
// agents receive an observer-signed SUSPENDED copy and a fresh CANDIDATE.
func TestDriftReachesAgents(t *testing.T) {
	p := testpki.New(t)
	s := start(t, controlplane.Options{DataDir: t.TempDir(), Root: p.Root.Public(), ObserverKey: p.Observer})
	ctx := context.Background()
	adm := mcpreadyv1.NewAdminServiceClient(dial(t, s.Addr()))
	entry := &mcpreadyv1.RegistryEntry{Identity: &mcpreadyv1.ToolIdentity{ServerName: "com.example/docs", ServerVersion: "2.4.1", ToolName: "docs.lookup"},
		State: mcpreadyv1.LifecycleState_LIFECYCLE_STATE_QUALIFIED}
	for _, b := range [][]byte{p.TrustPolicy, testpki.Sign(t, artifact.New(artifact.KindRegistryEntry, "docs.lookup@2.4.1", entry), p.Org)} {
		if _, err := adm.Apply(ctx, &mcpreadyv1.ApplyRequest{Bundle: b}); err != nil {
			t.Fatal(err)
		}
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st, err := mcpreadyv1.NewDiscoveryServiceClient(dial(t, s.Addr())).DeltaResources(sctx)
	if err != nil {
		t.Fatal(err)
	}
	st.Send(&mcpreadyv1.DeltaResourcesRequest{Node: &mcpreadyv1.Node{Id: "host-1"}, TypeUrl: artifact.KindRegistryEntry.TypeURL()})
	if _, err := st.Recv(); err != nil {
		t.Fatal(err)
	}
	observed := &mcpreadyv1.ToolIdentity{ServerName: "com.example/docs", ServerVersion: "2.5.0", ToolName: "docs.lookup"}
	cur, err := adm.Get(ctx, &mcpreadyv1.GetRequest{Kind: "RegistryEntry", Name: "docs.lookup@2.4.1"})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := adm.ReportDrift(ctx, testpki.DriftReport(t, p.Agent, "host-1", "docs.lookup@2.4.1", cur.GetArtifacts()[0].GetDigest(),
		[]mcpreadyv1.DriftLabel{mcpreadyv1.DriftLabel_DRIFT_LABEL_VERSION_DRIFT}, observed, time.Now()))
	if err != nil || resp.NewState != mcpreadyv1.LifecycleState_LIFECYCLE_STATE_SUSPENDED {
		t.Fatalf("report: %v %v", resp, err)
	}
	tr, err := sign.NewTrust(p.TrustPolicy, p.Root.Public(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]mcpreadyv1.LifecycleState{}
	for len(seen) < 2 || seen["docs.lookup@2.4.1"] != mcpreadyv1.LifecycleState_LIFECYCLE_STATE_SUSPENDED {
		r, err := st.Recv()
		if err != nil {
			t.Fatal(err)
		}
		for _, res := range r.Resources {
			v, err := tr.Verify(res.Bundle, time.Now())
			if err != nil {
				t.Fatalf("%s does not verify: %v", res.Name, err)
			}
			seen[res.Name] = v.Object.Spec.(*mcpreadyv1.RegistryEntry).GetState()
		}
		st.Send(&mcpreadyv1.DeltaResourcesRequest{TypeUrl: r.TypeUrl, ResponseNonce: r.Nonce})
	}
	if seen[resp.CandidateName] != mcpreadyv1.LifecycleState_LIFECYCLE_STATE_CANDIDATE {
		t.Fatalf("agent state view: %v", seen)
	}
}

// TestLifecycleFollowsEveryReplicasWrites: registry entries applied through
// either of two replicas get their lifecycle event from the one replica
// that runs the lifecycle, which learns of them from the store watch.
func TestLifecycleFollowsEveryReplicasWrites(t *testing.T) {
	p := testpki.New(t)
	m := sharedEtcd(t)
	ctx := context.Background()
	var adms []mcpreadyv1.AdminServiceClient
	for range 2 {
		r := start(t, controlplane.Options{EtcdEndpoints: []string{m.ClientURL}, Root: p.Root.Public()})
		adms = append(adms, mcpreadyv1.NewAdminServiceClient(dial(t, r.Addr())))
	}
	if _, err := adms[0].Apply(ctx, &mcpreadyv1.ApplyRequest{Bundle: p.TrustPolicy}); err != nil {
		t.Fatal(err)
	}
	for i, adm := range adms {
		name := fmt.Sprintf("lookup@%d", i)
		entry := &mcpreadyv1.RegistryEntry{Identity: &mcpreadyv1.ToolIdentity{ServerName: "com.example/docs", ServerVersion: fmt.Sprint(i), ToolName: "lookup"},
			State: mcpreadyv1.LifecycleState_LIFECYCLE_STATE_QUALIFIED}
		if _, err := adm.Apply(ctx, &mcpreadyv1.ApplyRequest{Bundle: testpki.Sign(t, artifact.New(artifact.KindRegistryEntry, name, entry), p.Org)}); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		st, err := adms[1].RegistryStatus(ctx, &mcpreadyv1.RegistryStatusRequest{})
		n := 0
		for _, e := range st.GetEntries() {
			if len(e.GetEvents()) == 1 && e.GetEvents()[0].GetTo() == mcpreadyv1.LifecycleState_LIFECYCLE_STATE_QUALIFIED {
				n++
			}
		}
		if err == nil && n == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("lifecycle events: %v %v", st, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// dialTLS dials addr with the client configuration cfg until the test ends.
func dialTLS(t *testing.T, addr string, cfg *tls.Config) *grpc.ClientConn {
	t.Helper()
	c, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestCallersNeedTheirRole is the attack on an mTLS control plane: a
// certificate the CA signed but no rule names, a reader that applies, an
// admin that subscribes as an agent, and an agent that names another node
// are all refused before any service sees the request; each role does what
// it may. Today's code (before authz) let every one of them through.
func TestCallersNeedTheirRole(t *testing.T) {
	p := testpki.New(t)
	f := testpki.TLS(t, t.TempDir())
	srvTLS := f.ServerMTLS(t)
	s := start(t, controlplane.Options{DataDir: t.TempDir(), Root: p.Root.Public(), Roles: testpki.Roles(), TLS: srvTLS})
	conn := func(cn string) *grpc.ClientConn {
		certFile, keyFile := f.Client(t, cn)
		return dialTLS(t, s.Addr(), f.ClientTLS(t, certFile, keyFile))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	apply := func(c *grpc.ClientConn) codes.Code {
		_, err := mcpreadyv1.NewAdminServiceClient(c).Apply(ctx, &mcpreadyv1.ApplyRequest{Bundle: p.TrustPolicy})
		return status.Code(err)
	}
	get := func(c *grpc.ClientConn) codes.Code {
		_, err := mcpreadyv1.NewAdminServiceClient(c).Get(ctx, &mcpreadyv1.GetRequest{Kind: "TrustPolicy"})
		return status.Code(err)
	}
	subscribe := func(c *grpc.ClientConn, node string) codes.Code {
		st, err := mcpreadyv1.NewDiscoveryServiceClient(c).DeltaResources(ctx)
		if err != nil {
			return status.Code(err)
		}
		// A refused stream may already be closed when Send runs (io.EOF);
		// its status is what Recv returns.
		_ = st.Send(&mcpreadyv1.DeltaResourcesRequest{Node: &mcpreadyv1.Node{Id: node}, TypeUrl: "type.mcpready.dev/mcpready.v1.TrustPolicy"})
		_, err = st.Recv()
		st.CloseSend()
		return status.Code(err)
	}
	stranger, reader, admin, node := conn("stranger"), conn("reader-audit"), conn("admin-ops"), conn("node-7")
	for name, c := range map[string]struct{ got, want codes.Code }{
		"stranger applies":           {apply(stranger), codes.PermissionDenied},
		"stranger reads":             {get(stranger), codes.PermissionDenied},
		"reader applies":             {apply(reader), codes.PermissionDenied},
		"agent applies":              {apply(node), codes.PermissionDenied},
		"admin subscribes":           {subscribe(admin, "admin-ops"), codes.PermissionDenied},
		"agent as another node":      {subscribe(node, "node-8"), codes.PermissionDenied},
		"reader subscribes":          {subscribe(reader, "reader-audit"), codes.PermissionDenied},
		"admin applies":              {apply(admin), codes.OK},
		"reader reads":               {get(reader), codes.OK},
		"agent subscribes as itself": {subscribe(node, "node-7"), codes.OK},
	} {
		if c.got != c.want {
			t.Errorf("%s: %v, want %v", name, c.got, c.want)
		}
	}
}

func TestOffLoopbackNeedsClientCertificates(t *testing.T) {
	p := testpki.New(t)
	f := testpki.TLS(t, t.TempDir())
	srvCert, err := tls.LoadX509KeyPair(f.ServerCert, f.ServerKey)
	if err != nil {
		t.Fatal(err)
	}
	// Server-only TLS off loopback: nobody could be identified.
	_, err = controlplane.New(controlplane.Options{Listen: "0.0.0.0:0", MetricsListen: "off", DataDir: t.TempDir(), Root: p.Root.Public(),
		TLS: &tls.Config{Certificates: []tls.Certificate{srvCert}}})
	if !errors.Is(err, controlplane.ErrConfig) || !strings.Contains(err.Error(), "client certificates") {
		t.Fatalf("server-only TLS off loopback: %v", err)
	}
	pool := x509.NewCertPool()
	ca, _ := os.ReadFile(f.CA)
	pool.AppendCertsFromPEM(ca)
	_, err = controlplane.New(controlplane.Options{Listen: "127.0.0.1:0", MetricsListen: "off", DataDir: t.TempDir(), Root: p.Root.Public(),
		TLS: &tls.Config{Certificates: []tls.Certificate{srvCert}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert}})
	if !errors.Is(err, controlplane.ErrConfig) || !strings.Contains(err.Error(), "authorises nobody") {
		t.Fatalf("mTLS without roles: %v", err)
	}
}

// TestConsoleOverMutualTLS: with mTLS the console is reached over TLS on
// the HTTP listener with a client certificate holding the reader role; an
// agent's certificate is refused, and so is plaintext. /healthz and, on
// this loopback listener, /metrics still answer plaintext on the same port
// (kubelet probes cannot present certificates). Before, the listener spoke plaintext only, so no
// console request could carry a certificate: the reader's request failed.
func TestConsoleOverMutualTLS(t *testing.T) {
	p := testpki.New(t)
	f := testpki.TLS(t, t.TempDir())
	srvTLS := f.ServerMTLS(t)
	s := start(t, controlplane.Options{DataDir: t.TempDir(), Root: p.Root.Public(), Roles: testpki.Roles(), MetricsListen: "127.0.0.1:0", TLS: srvTLS})
	consoleURL := "https://" + s.MetricsAddr() + "/console/"
	if s.ConsoleURL() != consoleURL {
		t.Errorf("console URL %q, want %q", s.ConsoleURL(), consoleURL)
	}
	for _, tc := range []struct {
		url, cn string
		want    int
	}{
		{consoleURL + "registry?format=json", "reader-carol", 200},
		{consoleURL + "registry?format=json", "node-9", 403},
		{consoleURL + "registry?format=json", "", 401},
		{"http://" + s.MetricsAddr() + "/console/registry", "", 401},
		{"http://" + s.MetricsAddr() + "/healthz", "", 200},
		{"http://" + s.MetricsAddr() + "/metrics", "", 200},
		{"https://" + s.MetricsAddr() + "/healthz", "", 200},
	} {
		code, err := getAs(t, f, tc.url, tc.cn)
		if err != nil || code != tc.want {
			t.Errorf("%s as %q: %d %v, want %d", tc.url, tc.cn, code, err, tc.want)
		}
	}
}

// TestMetricsOffLoopbackNeedTLS: on an HTTP listener that is not on
// loopback, /metrics is served only over TLS to a verified client
// certificate with the reader (or admin) role; plaintext and anonymous TLS
// scrapes are refused (401), an agent certificate too (403), and each
// refusal is counted by reason. /healthz stays plaintext for kubelet
// probes. On a loopback listener plaintext scrapes stay possible
// (TestConsoleOverMutualTLS). Off loopback without a client CA nobody
// could be authorised to scrape, so New refuses it.
func TestMetricsOffLoopbackNeedTLS(t *testing.T) {
	p := testpki.New(t)
	f := testpki.TLS(t, t.TempDir())
	srvTLS := f.ServerMTLS(t)
	s := start(t, controlplane.Options{DataDir: t.TempDir(), Root: p.Root.Public(), Roles: testpki.Roles(), MetricsListen: "0.0.0.0:0", TLS: srvTLS})
	_, port, err := net.SplitHostPort(s.MetricsAddr())
	if err != nil {
		t.Fatal(err)
	}
	base := net.JoinHostPort("127.0.0.1", port)
	for _, tc := range []struct {
		url, cn string
		want    int
	}{
		{"http://" + base + "/metrics", "", http.StatusUnauthorized},
		{"https://" + base + "/metrics", "", http.StatusUnauthorized},
		{"https://" + base + "/metrics", "node-9", http.StatusForbidden},
		{"https://" + base + "/metrics", "reader-prometheus", http.StatusOK},
		{"https://" + base + "/metrics", "admin-ops", http.StatusOK},
		{"http://" + base + "/healthz", "", http.StatusOK},
	} {
		if code, err := getAs(t, f, tc.url, tc.cn); err != nil || code != tc.want {
			t.Errorf("%s as %q: %d %v, want %d", tc.url, tc.cn, code, err, tc.want)
		}
	}
	// One refusal counted per reason.
	if err := testutil.GatherAndCompare(s.Registry(), strings.NewReader(`
# HELP mcpready_metrics_scrapes_refused_total Refused /metrics requests on a non-loopback listener, by reason (plaintext, unauthenticated, forbidden).
# TYPE mcpready_metrics_scrapes_refused_total counter
mcpready_metrics_scrapes_refused_total{reason="forbidden"} 1
mcpready_metrics_scrapes_refused_total{reason="plaintext"} 1
mcpready_metrics_scrapes_refused_total{reason="unauthenticated"} 1
`), "mcpready_metrics_scrapes_refused_total"); err != nil {
		t.Error(err)
	}

	serverOnly := srvTLS.Clone()
	serverOnly.ClientCAs, serverOnly.ClientAuth = nil, tls.NoClientCert
	if _, err := controlplane.New(controlplane.Options{Listen: "127.0.0.1:0", MetricsListen: "0.0.0.0:0", DataDir: t.TempDir(), Root: p.Root.Public(), TLS: serverOnly}); !errors.Is(err, controlplane.ErrConfig) {
		t.Fatalf("non-loopback metrics without a client CA: %v", err)
	}
}

// getAs GETs url trusting pool, with a client certificate for cn issued by
// f's CA (none when cn is ""), and returns the status code.
func getAs(t *testing.T, f testpki.TLSFiles, url, cn string) (int, error) {
	t.Helper()
	var certFile, keyFile string
	if cn != "" {
		certFile, keyFile = f.Client(t, cn)
	}
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: f.ClientTLS(t, certFile, keyFile)}, Timeout: 10 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// A TrustPolicy seed (Options.TrustSeed, the controlplane --trust-mark
// flag) is this replica's high-water mark from its first start: it is in
// the data directory's mark file once the replica serves, before anything
// was applied through it. A seed the root did not sign fails New.
func TestTrustSeedAtStart(t *testing.T) {
	p := testpki.New(t)
	dir := t.TempDir()
	notTrust := testpki.Sign(t, testpki.Policy("org/p", "1", nil), p.Root)
	if _, err := controlplane.New(controlplane.Options{DataDir: dir, Root: p.Root.Public(), TrustSeed: notTrust}); !errors.Is(err, controlplane.ErrConfig) {
		t.Fatalf("a Policy as the TrustPolicy seed: %v, want %v", err, controlplane.ErrConfig)
	}
	start(t, controlplane.Options{DataDir: dir, Root: p.Root.Public(), TrustSeed: p.TrustPolicy})
	mark, err := os.ReadFile(filepath.Join(dir, controlplane.TrustMarkFile))
	if err != nil || !strings.Contains(string(mark), testpki.RefOf(t, p.TrustPolicy).GetDigest()) {
		t.Fatalf("mark after a seeded start: %s, %v", mark, err)
	}
}

// TestEveryRPCRefusesWrongRoles is TestCallersNeedTheirRole over the
// whole API: on the real control plane (mTLS, the roles of
// testpki.Roles), every RPC of every mcpready service is called by each
// identity that does not hold it (internal/rpcmatrix's table: the other
// roles, an agent naming another node, a certificate no rule names) and
// must be refused before any handler acts. controlplane/authz's
// TestEveryRPCEveryWrongRole checks the same table on stub handlers; this
// one checks that the server puts every service behind the authorizer.
func TestEveryRPCRefusesWrongRoles(t *testing.T) {
	p := testpki.New(t)
	f := testpki.TLS(t, t.TempDir())
	s := start(t, controlplane.Options{DataDir: t.TempDir(), Root: p.Root.Public(), Roles: testpki.Roles(), TLS: f.ServerMTLS(t),
		Receipts: &controlplane.ReceiptOptions{}}) // every service served, as by the controlplane command
	conn := func(cn string) *grpc.ClientConn {
		certFile, keyFile := f.Client(t, cn)
		return dialTLS(t, s.Addr(), f.ClientTLS(t, certFile, keyFile))
	}
	callers := []struct {
		name, cn string
		role     authz.Role // "" holds none
		node     string
	}{
		{"admin", "admin-ops", authz.RoleAdmin, "admin-ops"},
		{"reader", "reader-audit", authz.RoleReader, "reader-audit"},
		{"agent", "node-7", authz.RoleAgent, "node-7"},
		{"agent as another node", "node-7", "", "node-8"},
		{"no role", "stranger", "", "stranger"},
	}
	methods, checked := rpcmatrix.Methods(t), 0
	for _, c := range callers {
		cc := conn(c.cn)
		for _, m := range methods {
			if rpcmatrix.Holds(m, c.role) {
				continue // what a holder gets is each handler's own business
			}
			checked++
			if code := rpcmatrix.Invoke(t, cc, m, c.node); code != codes.PermissionDenied {
				t.Errorf("%s calling %s: %v, want %v", c.name, rpcmatrix.Name(m), code, codes.PermissionDenied)
			}
		}
	}
	if checked < 3*len(methods) {
		t.Fatalf("only %d wrong-role calls checked", checked)
	}
}
