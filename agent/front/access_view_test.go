package front

import (
	"context"
	neturl "net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"golang.org/x/oauth2/clientcredentials"

	"github.com/mcpready/mcpready/agent/config"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/internal/oauthtest"
	"github.com/mcpready/mcpready/readiness"
)

// TestTokenExchangeOnAggregateView: under token exchange, a call on the
// aggregate /mcp view presents the caller's exchanged token on an upstream
// session opened with that token, so an upstream that binds its sessions to
// the user (the go-sdk's) accepts it, for two users one after the other
// (before: the call went over the shared session opened with the agent's
// own client-credentials token and the upstream refused it, 403 session
// user mismatch, which the agent reported as ACCESS_NOT_READY).
func TestTokenExchangeOnAggregateView(t *testing.T) {
	h, hits, own, issuer := exchangeFront(t)
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
			af.GetIssuer() != issuer || strings.Join(af.GetGrantedScopes(), " ") != "read" {
			t.Fatalf("receipt auth class %q, access %v", rec.GetAuthClass(), af)
		}
	}
}

// exchangeFront is oauthFront with a token-exchange upstream and the
// authorization server (issuer) as identity provider for users alice and
// bob; own returns a user's own token.
func exchangeFront(t *testing.T, mods ...func(*Options)) (h *harness, hits *atomic.Int64, own func(user string) string, issuer string) {
	t.Helper()
	as := oauthtest.Start(t, oauthtest.Options{Clients: []oauthtest.Client{
		{ID: "agent", Secret: "s", TokenExchange: true},
		{ID: "alice", Secret: "alice-secret", Claims: map[string]any{"principal_class": "developer"}},
		{ID: "bob", Secret: "bob-secret", Claims: map[string]any{"principal_class": "developer"}},
	}})
	o := &config.OAuth{Grant: config.GrantTokenExchange, ClientID: "agent", Scopes: []string{"read"}}
	h, hits, _, install := oauthFront(t, as, o, &config.IdentityProvider{Issuer: as.Issuer, Audience: "mcpready-agent", JWKSURL: as.JWKSURL()}, mods...)
	install(as.Issuer)
	own = func(id string) string {
		cc := clientcredentials.Config{ClientID: id, ClientSecret: id + "-secret", TokenURL: as.TokenEndpoint(), Scopes: []string{"read"},
			EndpointParams: neturl.Values{"resource": {"mcpready-agent"}}}
		tok, err := cc.Token(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return tok.AccessToken
	}
	return h, hits, own, as.Issuer
}

// TestOwnerSessionsRefusedThroughFront: with room for one shared session
// opened with a principal's own token, alice's call on /mcp holds it and
// bob's is refused by the agent before reaching the upstream: the answer
// says too many upstream sessions (code agent_capacity), the receipt is REFUSED, and the refusal
// is counted with scope owners (operator.md's claim).
func TestOwnerSessionsRefusedThroughFront(t *testing.T) {
	h, hits, own, _ := exchangeFront(t, func(o *Options) { o.MaxOwnerSessions = 1 })
	if res := call(t, h.connect(t, "/mcp", own("alice"), nil, "2025-11-25"), "sec__echo", map[string]any{"text": "hi"}); res.IsError {
		t.Fatalf("alice: %+v", res.Content[0])
	}
	res := call(t, h.connect(t, "/mcp", own("bob"), nil, "2025-11-25"), "sec__echo", map[string]any{"text": "hi"})
	if !res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "too many upstream sessions") || hits.Load() != 1 {
		t.Fatalf("bob past the bound: %+v (upstream hits %d)", res.Content[0], hits.Load())
	}
	wantToolError(t, res, "REFUSED", readiness.CodeAgentCapacity)
	h.mu.Lock()
	rec := h.recs[len(h.recs)-1]
	h.mu.Unlock()
	if rec.GetOutcome() != mcpreadyv1.OutcomeClass_OUTCOME_CLASS_REFUSED {
		t.Fatalf("bob's receipt: %v", rec.GetOutcome())
	}
	if n := testutil.ToFloat64(h.front.metrics.sessionsRefused.WithLabelValues("owners")); n != 1 {
		t.Fatalf("refusals counted with scope owners: %v", n)
	}
}
