package front

import (
	"context"
	neturl "net/url"
	"strings"
	"testing"

	"golang.org/x/oauth2/clientcredentials"

	"github.com/mcpready/mcpready/agent/config"
	"github.com/mcpready/mcpready/internal/oauthtest"
)

// TestTokenExchangeOnAggregateView: under token exchange, a call on the
// aggregate /mcp view presents the caller's exchanged token on an upstream
// session opened with that token, so an upstream that binds its sessions to
// the user (the go-sdk's) accepts it, for two users one after the other
// (before: the call went over the shared session opened with the agent's
// own client-credentials token and the upstream refused it, 403 session
// user mismatch, which the agent reported as ACCESS_NOT_READY).
func TestTokenExchangeOnAggregateView(t *testing.T) {
	as := oauthtest.Start(t, oauthtest.Options{Clients: []oauthtest.Client{
		{ID: "agent", Secret: "s", TokenExchange: true},
		{ID: "alice", Secret: "alice-secret", Claims: map[string]any{"principal_class": "developer"}},
		{ID: "bob", Secret: "bob-secret", Claims: map[string]any{"principal_class": "developer"}},
	}})
	o := &config.OAuth{Grant: config.GrantTokenExchange, ClientID: "agent", Scopes: []string{"read"}}
	h, hits, _, install := oauthFront(t, as, o, &config.IdentityProvider{Issuer: as.Issuer, Audience: "mcpready-agent", JWKSURL: as.JWKSURL()})
	install(as.Issuer)
	own := func(id string) string {
		cc := clientcredentials.Config{ClientID: id, ClientSecret: id + "-secret", TokenURL: as.TokenEndpoint(), Scopes: []string{"read"},
			EndpointParams: neturl.Values{"resource": {"mcpready-agent"}}}
		tok, err := cc.Token(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return tok.AccessToken
	}
	for i, user := range []string{"alice", "bob"} {
		cs := h.connect(t, "/mcp", own(user), nil, "2025-11-25")
		res := call(t, cs, "sec__echo", map[string]any{"text": "hi"})
		if res.IsError || hits.Load() != int64(i+1) {
			t.Fatalf("call as %s on /mcp: %+v (upstream hits %d)", user, res.Content[0], hits.Load())
		}
		h.mu.Lock()
		rec := h.recs[len(h.recs)-1]
		h.mu.Unlock()
		if af := rec.GetSelected().GetAccess(); rec.GetAuthClass() != "oauth:"+config.GrantTokenExchange || af.GetGrant() != config.GrantTokenExchange ||
			af.GetIssuer() != as.Issuer || strings.Join(af.GetGrantedScopes(), " ") != "read" {
			t.Fatalf("receipt auth class %q, access %v", rec.GetAuthClass(), af)
		}
	}
}
