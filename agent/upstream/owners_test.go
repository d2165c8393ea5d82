package upstream

import (
	"context"
	"errors"
	neturl "net/url"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/mcpready/mcpready/agent/access"
	"github.com/mcpready/mcpready/agent/config"
	"github.com/mcpready/mcpready/internal/oauthtest"
)

// TestOwnerSessionsBounded: the shared sessions opened with principals'
// own tokens (one per principal under token exchange) are bounded. A new
// principal beyond the bound is refused with ErrOwnerSessions while every
// open one is in use, and gets room once one has been idle: that one is
// closed (before: one session per principal was opened and kept for the
// life of the agent, however many principals called).
func TestOwnerSessionsBounded(t *testing.T) {
	users := []string{"alice", "bob", "carol"}
	clients := []oauthtest.Client{{ID: "agent", Secret: "s", TokenExchange: true}}
	for _, u := range users {
		clients = append(clients, oauthtest.Client{ID: u, Secret: u + "-secret"})
	}
	as := oauthtest.Start(t, oauthtest.Options{Clients: clients})
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("s"), 0o600); err != nil {
		t.Fatal(err)
	}
	up := config.Upstream{Name: "t", URL: protected(t, as), OAuth: &config.OAuth{Grant: config.GrantTokenExchange, ClientID: "agent", ClientSecretFile: secret, Issuer: as.Issuer, Scopes: []string{"read"}}}
	var mu sync.Mutex
	now := time.Unix(1_000_000, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	p := NewPool(Options{Resolve: func(tg Target) (config.Upstream, bool) { return up, tg.Server == "t" },
		Access: access.New(access.Options{}), MaxOwnerSessions: 2, OwnerSessionIdle: time.Minute, now: clock})
	t.Cleanup(p.Close)
	ctx := map[string]context.Context{}
	for _, u := range users {
		cc := clientcredentials.Config{ClientID: u, ClientSecret: u + "-secret", TokenURL: as.TokenEndpoint(), Scopes: []string{"read"},
			EndpointParams: neturl.Values{"resource": {"mcpready-agent"}}}
		tok, err := cc.Token(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		ctx[u] = access.WithPrincipal(context.Background(), access.Principal{Name: u, SubjectToken: tok.AccessToken})
	}
	echo := func(u string, s *Session) error {
		res, err := s.CallTool(ctx[u], &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi"}})
		if err == nil && res.IsError {
			err = errors.New("tool error")
		}
		return err
	}
	sessions := map[string]*Session{}
	for _, u := range users[:2] {
		s, err := p.Shared(ctx[u], Target{Server: "t"})
		if err != nil {
			t.Fatalf("%s: %v", u, err)
		}
		if err := echo(u, s); err != nil {
			t.Fatalf("%s's call: %v", u, err)
		}
		sessions[u] = s
	}
	if sessions["alice"] == sessions["bob"] {
		t.Fatal("alice and bob share one session under token exchange")
	}
	if _, err := p.Shared(ctx["carol"], Target{Server: "t"}); !errors.Is(err, ErrOwnerSessions) {
		t.Fatalf("a third principal with two sessions in use: %v, want ErrOwnerSessions", err)
	}

	// Two minutes on, bob calls again; alice has been idle: carol gets
	// alice's room and alice's session is closed.
	mu.Lock()
	now = now.Add(2 * time.Minute)
	mu.Unlock()
	if s, err := p.Shared(ctx["bob"], Target{Server: "t"}); err != nil || s != sessions["bob"] {
		t.Fatalf("bob again: %v (same session: %v)", err, s == sessions["bob"])
	}
	s, err := p.Shared(ctx["carol"], Target{Server: "t"})
	if err != nil {
		t.Fatalf("carol once alice is idle: %v", err)
	}
	if err := echo("carol", s); err != nil {
		t.Fatalf("carol's call: %v", err)
	}
	if err := echo("alice", sessions["alice"]); err == nil {
		t.Fatal("alice's evicted session still answers")
	}
	// alice comes back: bob and carol are in use, so she waits her turn.
	if _, err := p.Shared(ctx["alice"], Target{Server: "t"}); !errors.Is(err, ErrOwnerSessions) {
		t.Fatalf("alice back with two sessions in use: %v", err)
	}
}
