package upstream

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpready/mcpready/agent/access"
	"github.com/mcpready/mcpready/agent/config"
	"github.com/mcpready/mcpready/agent/internal/mcptest"
	"github.com/mcpready/mcpready/agent/validate"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/internal/oauthtest"
)

// protected serves the default test tools behind as's tokens.
func protected(t *testing.T, as *oauthtest.Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String() + "/mcp"
	srv := mcp.NewServer(&mcp.Implementation{Name: "p", Version: "1"}, nil)
	mcptest.AddDefaultTools(srv)
	hs := &httptest.Server{Listener: ln, Config: &http.Server{Handler: as.Protect(oauthtest.Resource{URL: url, Scopes: []string{"read"}},
		mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))}}
	hs.Start()
	t.Cleanup(hs.Close)
	return url
}

// TestOAuthUpstream: an upstream configured with oauth gets a token from
// its authorization server on every request (before: the pool sent none
// and every call ended 401).
func TestOAuthUpstream(t *testing.T) {
	as := oauthtest.Start(t, oauthtest.Options{Clients: []oauthtest.Client{{ID: "agent", Secret: "s"}}})
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("s"), 0o600); err != nil {
		t.Fatal(err)
	}
	good := config.Upstream{Name: "t", URL: protected(t, as), OAuth: &config.OAuth{Grant: config.GrantClientCredentials, ClientID: "agent", ClientSecretFile: secret, Issuer: as.Issuer, Scopes: []string{"read"}}}
	foreign := oauthtest.Start(t, oauthtest.Options{})
	bad := good
	bad.Name, bad.URL = "f", protected(t, foreign)
	resolve := func(tg Target) (config.Upstream, bool) {
		switch tg.Server {
		case "t":
			return good, true
		case "f":
			return bad, true
		}
		return config.Upstream{}, false
	}
	ctx := context.Background()

	noAccess := NewPool(Options{Resolve: resolve})
	t.Cleanup(noAccess.Close)
	if _, err := noAccess.Shared(ctx, Target{Server: "t"}); !errors.Is(err, ErrUnknownUpstream) {
		t.Fatalf("oauth upstream without an access client = %v", err)
	}

	p := NewPool(Options{Resolve: resolve, Access: access.New(access.Options{})})
	t.Cleanup(p.Close)
	s, err := p.Shared(ctx, Target{Server: "t"})
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi"}})
	if err != nil || res.IsError {
		t.Fatalf("echo: %v %+v", err, res)
	}
	if as.Issued() != 1 {
		t.Fatalf("issued %d tokens, want 1", as.Issued())
	}
	// The agent's own token is every principal's: one shared session.
	if s2, err := p.Shared(access.WithPrincipal(ctx, access.Principal{Name: "alice"}), Target{Server: "t"}); err != nil || s2 != s {
		t.Fatalf("alice's shared session under client credentials: %v (same: %v)", err, s2 == s)
	}

	_, err = p.Shared(ctx, Target{Server: "f"})
	var f *validate.Outcome
	if !errors.As(err, &f) || f.Class != mcpreadyv1.OutcomeClass_OUTCOME_CLASS_ACCESS_NOT_READY || !strings.Contains(f.Detail, "access not ready: issuer_mismatch") {
		t.Fatalf("foreign issuer = %v (%+v), want ACCESS_NOT_READY issuer_mismatch", err, f)
	}
}
