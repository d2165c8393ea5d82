package agent

import (
	"context"
	"crypto/ed25519"
	"errors"
	"google.golang.org/grpc/credentials/insecure"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpready/mcpready/agent/config"
	"github.com/mcpready/mcpready/agent/internal/cptest"
	"github.com/mcpready/mcpready/agent/internal/mcptest"
	"github.com/mcpready/mcpready/artifact"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/internal/enrolltest"
)

// publish enrolls up as "test" (QUALIFIED), each entry changed by mut, and
// stores a policy admitting it.
func publish(t *testing.T, env *cptest.Env, up *mcptest.Upstream, mut ...func(*mcpreadyv1.RegistryEntry)) {
	t.Helper()
	for _, o := range enrolltest.Qualified(t, config.Upstream{Name: "test", URL: up.URL}) {
		for _, m := range mut {
			m(o.Spec.(*mcpreadyv1.RegistryEntry))
		}
		env.Put(o)
	}
	env.Put(artifact.New(artifact.KindPolicy, "default", &mcpreadyv1.Policy{
		Inventory:  []string{"test/*"},
		Evidence:   &mcpreadyv1.EvidenceRules{OnUnknown: mcpreadyv1.UnknownEvidenceAction_UNKNOWN_EVIDENCE_ACTION_ALLOW},
		Principals: []*mcpreadyv1.PrincipalRule{{PrincipalClass: "default", Allow: []string{"*"}}},
	}))
}

func writeConfig(t testing.TB, dir string) *config.Config {
	t.Helper()
	p := filepath.Join(dir, "agent.yaml")
	if err := os.WriteFile(p, []byte("defaultPrincipal:\n  name: local\n  principalClass: default\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func start(t *testing.T, opts Options) (*Agent, func()) {
	t.Helper()
	a, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = a.Run(ctx); close(done) }()
	return a, func() { cancel(); <-done }
}

func callEcho(t *testing.T, addr string) *mcp.CallToolResult {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "ai"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: "http://" + addr + "/mcp/servers/test", MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi"}})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestLKGRestartWithControlPlaneDown(t *testing.T) {
	env := cptest.Start(t)
	up := mcptest.New(t, mcptest.Options{})
	publish(t, env, up)
	dir := t.TempDir()
	opts := Options{ControlPlane: env.Addr, Root: env.RootPub, NodeID: "host-1", Labels: map[string]string{"region": "eu-west"},
		Listen: "127.0.0.1:0", DataDir: filepath.Join(dir, "data"), Config: writeConfig(t, dir)}
	a, stop := start(t, opts)
	waitConfigured(t, a)
	if res := callEcho(t, a.Addr()); res.IsError {
		t.Fatalf("call through agent: %+v", res.Content)
	}
	resp, err := http.Get("http://" + a.Addr() + "/healthz")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("healthz: %v", err)
	}
	resp.Body.Close()
	stop()
	if a.spool.Stats().Depth == 0 {
		t.Fatal("no receipt spooled")
	}

	// The control plane goes away; the agent restarts from its last known good.
	env.Stop()
	a2, stop2 := start(t, opts)
	defer stop2()
	if res := callEcho(t, a2.Addr()); res.IsError {
		t.Fatalf("call after restart with control plane down: %+v", res.Content)
	}
}

func TestRefusesNonLoopback(t *testing.T) {
	env := cptest.Start(t)
	_, err := New(Options{Root: env.RootPub, NodeID: "n", DataDir: t.TempDir(), Listen: "0.0.0.0:0"})
	if !errors.Is(err, ErrNotLoopback) {
		t.Fatalf("got %v", err)
	}
}

// TestRefusesPlaintextControlPlane: the agent never talks to a control
// plane off loopback without TLS (before, it dialled any address in
// plaintext).
func TestRefusesPlaintextControlPlane(t *testing.T) {
	for _, cp := range []string{"10.0.0.7:7443", "controlplane.example:7443", "dns:///cp:7443"} {
		_, err := New(Options{ControlPlane: cp, Root: ed25519.PublicKey(make([]byte, ed25519.PublicKeySize)), NodeID: "n", DataDir: t.TempDir(), Listen: "127.0.0.1:0"})
		if !errors.Is(err, ErrPlaintextControlPlane) {
			t.Errorf("%s: %v", cp, err)
		}
		_, err = New(Options{ControlPlane: cp, ControlPlaneCreds: insecure.NewCredentials(), Root: ed25519.PublicKey(make([]byte, ed25519.PublicKeySize)),
			NodeID: "n", DataDir: t.TempDir(), Listen: "127.0.0.1:0"})
		if !errors.Is(err, ErrPlaintextControlPlane) {
			t.Errorf("%s with insecure credentials: %v", cp, err)
		}
	}
}

func TestDriftReportedToControlPlane(t *testing.T) {
	env := cptest.Start(t)
	up := mcptest.New(t, mcptest.Options{})
	key := grantAgentKey(t, env, "host-2")
	publish(t, env, up)
	dir := t.TempDir()
	a, stop := start(t, Options{ControlPlane: env.Addr, Root: env.RootPub, NodeID: "host-2", Listen: "127.0.0.1:0",
		DataDir: filepath.Join(dir, "data"), Config: writeConfig(t, dir), AgentKey: key})
	defer stop()
	waitConfigured(t, a)
	if res := callEcho(t, a.Addr()); res.IsError {
		t.Fatalf("before drift: %+v", res.Content)
	}
	up.ReplaceTool("echo", "Echoes, and now also does something else.")
	admin := mcpreadyv1.NewAdminServiceClient(env.Dial())
	deadline := time.Now().Add(15 * time.Second)
	for {
		st, err := admin.RegistryStatus(context.Background(), &mcpreadyv1.RegistryStatusRequest{Name: "test/echo"})
		if err == nil && len(st.GetEntries()) > 0 && len(st.GetEntries()[0].GetEvents()) > 0 {
			ev := st.GetEntries()[0].GetEvents()
			if len(ev[len(ev)-1].GetDrift()) > 0 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("drift never reached the control plane: %v %v", st, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if res := callEcho(t, a.Addr()); !res.IsError {
		t.Fatal("drifted tool still callable")
	}
}

// waitConfigured waits until the agent has installed the configuration that
// publish applied: the default policy and both registry entries (each kind
// arrives on its own discovery stream, in any order).
func waitConfigured(t *testing.T, a *Agent) {
	t.Helper()
	waitEntries(t, a, 2)
}

// waitEntries waits until a uses at least entries registry entries and the
// default Policy, installed.
func waitEntries(t *testing.T, a *Agent, entries int) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for s := a.Sync().Snapshot(); len(s.List(artifact.KindRegistryEntry)) < entries || s.Get(artifact.KindPolicy, "default") == nil || a.Installed() < s.Generation; s = a.Sync().Snapshot() {
		if time.Now().After(deadline) {
			t.Fatal("configuration never arrived")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// The pinned endpoint starts redirecting tools/call to another origin: the
// agent refuses it and the control plane hears NETWORK_DRIFT for the
// entry (it suspends it), through the agent's real wiring.
func TestRedirectReportedToControlPlane(t *testing.T) {
	env := cptest.Start(t)
	up := mcptest.New(t, mcptest.Options{})
	key := grantAgentKey(t, env, "host-3")
	publish(t, env, up)
	other := mcptest.New(t, mcptest.Options{})
	dir := t.TempDir()
	a, stop := start(t, Options{ControlPlane: env.Addr, Root: env.RootPub, NodeID: "host-3", Listen: "127.0.0.1:0",
		DataDir: filepath.Join(dir, "data"), Config: writeConfig(t, dir), AgentKey: key})
	defer stop()
	waitConfigured(t, a)
	up.RedirectTo(other.URL)
	up.SetFault(mcptest.FaultRedirect, "tools/call")
	if res := callEcho(t, a.Addr()); !res.IsError {
		t.Fatal("redirected call answered")
	}
	admin := mcpreadyv1.NewAdminServiceClient(env.Dial())
	for deadline := time.Now().Add(15 * time.Second); ; {
		st, err := admin.RegistryStatus(context.Background(), &mcpreadyv1.RegistryStatusRequest{Name: "test/echo"})
		if err == nil && len(st.GetEntries()) > 0 {
			ev := st.GetEntries()[0].GetEvents()
			if n := len(ev); n > 0 && slices.Contains(ev[n-1].GetDrift(), mcpreadyv1.DriftLabel_DRIFT_LABEL_NETWORK_DRIFT) {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("NETWORK_DRIFT never reached the control plane: %v %v", st, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
