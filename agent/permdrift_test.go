package agent

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpready/mcpready/agent/config"
	"github.com/mcpready/mcpready/agent/internal/cptest"
	"github.com/mcpready/mcpready/agent/internal/mcptest"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/internal/oauthtest"
	"github.com/mcpready/mcpready/readiness"
)

// An OAuth upstream whose token grants more than the entry was qualified
// with (read, admin against read): the agent refuses the call at the
// access layer, reports PERMISSION_DRIFT to the control plane once (a
// signed DriftReport through the agent's real wiring, which suspends the
// entry), and keeps refusing. Failed before: the call was refused but the
// control plane never heard of it.
func TestPermissionDriftReportedToControlPlane(t *testing.T) {
	env := cptest.Start(t)
	plain := mcptest.New(t, mcptest.Options{})
	as := oauthtest.Start(t, oauthtest.Options{Clients: []oauthtest.Client{{ID: "agent", Secret: "s"}}})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String() + "/mcp"
	hs := &httptest.Server{Listener: ln, Config: &http.Server{Handler: as.Protect(oauthtest.Resource{URL: url},
		mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return plain.Server }, nil))}}
	hs.Start()
	t.Cleanup(hs.Close)
	key := grantAgentKey(t, env, "host-4")
	publish(t, env, plain, func(e *mcpreadyv1.RegistryEntry) {
		e.Identity.Endpoint = url
		e.NetworkScope = nil
		e.Authority = &mcpreadyv1.Authority{Scopes: []string{"read"}}
	})
	dir := t.TempDir()
	secret := filepath.Join(dir, "secret")
	if err := os.WriteFile(secret, []byte("s"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.New(config.File{DefaultPrincipal: &config.Identity{Name: "local", PrincipalClass: "default"},
		Upstreams: []config.Upstream{{Name: "test", URL: url, OAuth: &config.OAuth{Grant: config.GrantClientCredentials, ClientID: "agent",
			ClientSecretFile: secret, Scopes: []string{"admin", "read"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	a, stop := start(t, Options{ControlPlane: env.Addr, Root: env.RootPub, NodeID: "host-4", Listen: "127.0.0.1:0",
		DataDir: filepath.Join(dir, "data"), Config: cfg, AgentKey: key})
	defer stop()
	waitConfigured(t, a)
	for range 3 { // the first call obtains the token, later ones are refused at step 2
		res := callEcho(t, a.Addr())
		if !res.IsError {
			t.Fatal("a call presenting more authority than qualified was answered")
		}
		if txt := res.Content[0].(*mcp.TextContent).Text; !strings.Contains(txt, string(readiness.CodePermissionDrift)) {
			t.Fatalf("refusal %q, want %s", txt, readiness.CodePermissionDrift)
		}
	}
	admin := mcpreadyv1.NewAdminServiceClient(env.Dial())
	var events []*mcpreadyv1.LifecycleEvent
	for deadline := time.Now().Add(15 * time.Second); ; {
		st, err := admin.RegistryStatus(context.Background(), &mcpreadyv1.RegistryStatusRequest{Name: "test/echo"})
		if err == nil && len(st.GetEntries()) > 0 {
			events = st.GetEntries()[0].GetEvents()
			if n := len(events); n > 0 && slices.Contains(events[n-1].GetDrift(), mcpreadyv1.DriftLabel_DRIFT_LABEL_PERMISSION_DRIFT) {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("PERMISSION_DRIFT never reached the control plane: %v %v", st, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	last := events[len(events)-1]
	if last.GetTo() != mcpreadyv1.LifecycleState_LIFECYCLE_STATE_SUSPENDED || !strings.Contains(last.GetReason(), "admin") || last.GetReporter() != "host-4" {
		t.Fatalf("lifecycle event %v", last)
	}
	// Still refused (by the token check, and once the suspension arrives,
	// by the entry's lifecycle state) until the entry is qualified again.
	if res := callEcho(t, a.Addr()); !res.IsError {
		t.Fatal("drifted entry answered after the report")
	}
	n := 0
	for _, ev := range events {
		if slices.Contains(ev.GetDrift(), mcpreadyv1.DriftLabel_DRIFT_LABEL_PERMISSION_DRIFT) {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d PERMISSION_DRIFT events, want 1 (once per entry and scope set)", n)
	}
}
