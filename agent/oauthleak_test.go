package agent

import (
	"bytes"
	"context"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpready/mcpready/agent/config"
	"github.com/mcpready/mcpready/agent/internal/cptest"
	"github.com/mcpready/mcpready/agent/internal/mcptest"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/internal/oauthtest"
	"github.com/mcpready/mcpready/internal/safebuf"
)

// TestOAuthTokenStaysOutOfLogsSpoolAndMetrics: calls through the agent to
// an upstream that takes OAuth tokens from a real authorization server
// (both views); the token the upstream received appears in no log line of
// the agent at debug level, no file under its data directory (spool, last
// known good configuration) and nothing its /metrics serves, and the
// receipt names the auth class oauth:<grant> with the granted scopes and
// the issuer instead.
func TestOAuthTokenStaysOutOfLogsSpoolAndMetrics(t *testing.T) {
	env := cptest.Start(t)
	as := oauthtest.Start(t, oauthtest.Options{Clients: []oauthtest.Client{{ID: "agent", Secret: "agent-secret"}}})
	up := mcptest.New(t, mcptest.Options{}) // enrolled plain; served protected below
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String() + "/mcp"
	var mu sync.Mutex
	presented := map[string]bool{}
	mcpHandler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return up.Server }, nil)
	hs := &httptest.Server{Listener: ln, Config: &http.Server{Handler: as.Protect(oauthtest.Resource{URL: url, Scopes: []string{"read"}},
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
				mu.Lock()
				presented[tok] = true
				mu.Unlock()
			}
			mcpHandler.ServeHTTP(w, r)
		}))}}
	hs.Start()
	t.Cleanup(hs.Close)
	publish(t, env, up, func(e *mcpreadyv1.RegistryEntry) {
		e.Identity.Endpoint = url
		e.Authority = &mcpreadyv1.Authority{Scopes: []string{"read"}}
	})

	dir := t.TempDir()
	secret := filepath.Join(dir, "secret")
	if err := os.WriteFile(secret, []byte("agent-secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(dir, "agent.yaml")
	yaml := "defaultPrincipal:\n  name: local\n  principalClass: default\nupstreams:\n- name: test\n  url: " + url +
		"\n  oauth:\n    grant: client_credentials\n    clientID: agent\n    clientSecretFile: " + secret + "\n    scopes: [read]\n"
	if err := os.WriteFile(cfgPath, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	logs := &safebuf.Buffer{}
	dataDir := filepath.Join(dir, "data")
	a, stop := start(t, Options{ControlPlane: env.Addr, Root: env.RootPub, NodeID: "host-oauth", Listen: "127.0.0.1:0", DataDir: dataDir,
		Config: cfg, Logger: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	defer stop()
	waitEntries(t, a, 1)

	ctx := context.Background()
	for _, view := range []string{"/mcp/servers/test", "/mcp"} {
		c := mcp.NewClient(&mcp.Implementation{Name: "ai"}, nil)
		cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: "http://" + a.Addr() + view, MaxRetries: -1}, nil)
		if err != nil {
			t.Fatal(err)
		}
		name := "echo"
		if view == "/mcp" {
			name = "test__echo"
		}
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: map[string]any{"text": "hi"}})
		if err != nil || res.IsError {
			t.Fatalf("%s: %v %+v", view, err, res)
		}
		cs.Close()
	}
	mu.Lock()
	tokens := make([]string, 0, len(presented))
	for tok := range presented {
		tokens = append(tokens, tok)
	}
	mu.Unlock()
	if len(tokens) == 0 {
		t.Fatal("the upstream saw no token: the test proves nothing")
	}

	for _, r := range spooled(t, a, func(r *mcpreadyv1.Receipt) bool { return strings.HasSuffix(r.GetRequested(), "echo") }, 2) {
		af := r.GetSelected().GetAccess()
		if r.GetAuthClass() != "oauth:"+config.GrantClientCredentials || af.GetIssuer() != as.Issuer || strings.Join(af.GetGrantedScopes(), " ") != "read" {
			t.Errorf("receipt %v: auth class %q, access %v; want oauth:client_credentials, issuer %s, scopes read", r, r.GetAuthClass(), af, as.Issuer)
		}
	}

	resp, err := http.Get("http://" + a.Addr() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !bytes.Contains(metrics, []byte("mcpready_")) {
		t.Fatalf("/metrics served no mcpready metric: %.200s", metrics)
	}
	stop()

	leaks := func(what string, b []byte) {
		t.Helper()
		for _, tok := range tokens {
			// The whole token, and its signature alone (a token cut or
			// re-encoded around it would still leak it).
			sig := tok[strings.LastIndexByte(tok, '.')+1:]
			if bytes.Contains(b, []byte(tok)) || len(sig) >= 16 && bytes.Contains(b, []byte(sig)) {
				t.Errorf("an upstream token is in %s", what)
			}
		}
	}
	if !strings.Contains(logs.String(), `"level":"DEBUG"`) {
		t.Fatal("no debug log line: the test proves nothing about logs")
	}
	leaks("the agent's logs", []byte(logs.String()))
	leaks("/metrics", metrics)
	files := 0
	_ = filepath.WalkDir(dataDir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			files++
			b, _ := os.ReadFile(p)
			leaks(p, b)
		}
		return nil
	})
	if files == 0 {
		t.Fatal("nothing under the data directory: the test proves nothing about the spool")
	}
}
