package front

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	neturl "net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/oauth2/clientcredentials"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/mcpready/mcpready/agent/circuit"
	"github.com/mcpready/mcpready/agent/config"
	"github.com/mcpready/mcpready/agent/decide"
	"github.com/mcpready/mcpready/agent/internal/mcptest"
	"github.com/mcpready/mcpready/agent/validate"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/internal/oauthtest"
	"github.com/mcpready/mcpready/readiness"
)

// oauthFront is a front whose one upstream "sec" is protected by as and
// configured with o (its secret "s" in a file), with local principals by
// bearer token (devToken) and, when idp is set, by identity-provider JWT.
// install installs a policy admitting dev and developer to sec/* and a
// Declaration of sec naming the given authorization server. hits counts
// the tools/call requests that reached the upstream.
func oauthFront(t *testing.T, as *oauthtest.Server, o *config.OAuth, idp *config.IdentityProvider, mods ...func(*Options)) (*harness, *atomic.Int64, string, func(declared string)) {
	t.Helper()
	plain := mcptest.New(t, mcptest.Options{}) // same tools, for enrolment
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String() + "/mcp"
	hits := &atomic.Int64{}
	mcpHandler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return plain.Server }, nil)
	hs := &httptest.Server{Listener: ln, Config: &http.Server{Handler: as.Protect(oauthtest.Resource{URL: url, Scopes: []string{"read"}},
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Body != nil {
				b, _ := io.ReadAll(r.Body)
				if bytes.Contains(b, []byte(`"tools/call"`)) {
					hits.Add(1)
				}
				r.Body = io.NopCloser(bytes.NewReader(b))
			}
			mcpHandler.ServeHTTP(w, r)
		}))}}
	hs.Start()
	t.Cleanup(hs.Close)

	h := &harness{entries: map[string]*mcpreadyv1.RegistryEntry{}}
	h.enrollQualified(t, config.Upstream{Name: "sec", URL: plain.URL})
	for _, e := range h.entries {
		e.Identity.Endpoint = url
		e.Authority = &mcpreadyv1.Authority{Scopes: []string{"read"}}
	}
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("s"), 0o600); err != nil {
		t.Fatal(err)
	}
	o.ClientSecretFile = secret
	cfg, err := config.New(config.File{
		Principals: []config.Principal{{Identity: config.Identity{Name: "dev-client", PrincipalClass: "dev"}, TokenSHA256: config.TokenDigest(devToken)}},
		Upstreams:  []config.Upstream{{Name: "sec", URL: url, OAuth: o}}, IdentityProvider: idp,
	})
	if err != nil {
		t.Fatal(err)
	}
	fo := Options{Config: cfg, NodeID: "node-1", Receipts: func(r *mcpreadyv1.Receipt) { h.mu.Lock(); h.recs = append(h.recs, r); h.mu.Unlock() }}
	for _, m := range mods {
		m(&fo)
	}
	h.front = New(fo)
	t.Cleanup(h.front.Close)
	p := testPolicy()
	p.Principals = []*mcpreadyv1.PrincipalRule{{PrincipalClass: "dev", Allow: []string{"sec/*"}}, {PrincipalClass: "developer", Allow: []string{"sec/*"}}}
	p.SideEffects = []*mcpreadyv1.SideEffectRule{{Match: "sec/echo", Assigned: mcpreadyv1.SideEffectClass_SIDE_EFFECT_CLASS_READ_ONLY}}
	p.EquivalenceClasses = nil
	install := func(declared string) {
		snap, err := decide.NewSnapshot(decide.Inputs{PolicyName: "default", PolicyVersion: "1", Policy: p, Entries: h.entries,
			Declarations: map[string]*mcpreadyv1.Declaration{"sec": {ServerName: "sec", Auth: &mcpreadyv1.DeclaredAuth{AuthorizationServers: []string{declared}}}}})
		if err != nil {
			t.Fatal(err)
		}
		h.front.SetState(&State{Decide: snap, Entries: h.entries, Checker: validate.NewChecker(validate.RulesFromPolicy(p.GetResults())), Circuits: circuit.NewSet(circuit.Config{})})
	}
	front := httptest.NewServer(h.front)
	t.Cleanup(front.Close)
	h.url = front.URL
	return h, hits, url, install
}

// TestOAuthUpstreamThroughFront: a call to an upstream configured with
// oauth presents a token from its authorization server (before: none was
// sent and the call ended ACCESS_NOT_READY), and the token is checked per
// call against the Declaration: when the Declaration names another
// authorization server, the next call is refused at step 2 with
// issuer_mismatch without reaching the upstream.
func TestOAuthUpstreamThroughFront(t *testing.T) {
	as := oauthtest.Start(t, oauthtest.Options{Clients: []oauthtest.Client{{ID: "agent", Secret: "s"}}})
	o := &config.OAuth{Grant: config.GrantClientCredentials, ClientID: "agent", Scopes: []string{"read"}}
	h, hits, url, install := oauthFront(t, as, o, nil)
	install(as.Issuer)
	cs := h.connect(t, "/mcp/servers/sec", devToken, nil, "2025-11-25")
	res := call(t, cs, "echo", map[string]any{"text": "hi"})
	if res.IsError {
		t.Fatalf("call through an OAuth upstream: %+v", res.Content[0])
	}
	if as.Issued() != 1 {
		t.Fatalf("issued %d tokens, want 1", as.Issued())
	}
	h.mu.Lock()
	rec := h.recs[len(h.recs)-1]
	h.mu.Unlock()
	af := rec.GetSelected().GetAccess()
	if af.GetIssuer() != as.Issuer || len(af.GetAudience()) != 1 || af.GetAudience()[0] != url || strings.Join(af.GetGrantedScopes(), " ") != "read" ||
		af.GetLifetimeClass() != "1h-or-more" && af.GetLifetimeClass() != "under-1h" || af.GetGrant() != config.GrantClientCredentials ||
		af.GetVerification() != config.VerifyJWT {
		t.Fatalf("receipt access facts = %v", af)
	}
	if b, _ := protojson.Marshal(rec); bytes.Contains(b, []byte("eyJ")) {
		t.Fatal("the receipt contains a JWT")
	}

	install("https://another-as.example")
	before := hits.Load()
	res = call(t, cs, "echo", map[string]any{"text": "hi"})
	te := wantToolError(t, res, "REFUSED", readiness.CodeIssuerMismatch)
	if te.Step != 2 || hits.Load() != before {
		t.Fatalf("refusal %+v; upstream hits %d -> %d", te, before, hits.Load())
	}
}

// TestIdentityProviderPrincipal: a local client presenting a JWT of the
// organisation's identity provider acts as the principal its claims name,
// and its own token is exchanged (RFC 8693) for the upstream token, narrowed
// to the configured scopes; a forged JWT is refused (before: both were an
// unknown bearer token).
func TestIdentityProviderPrincipal(t *testing.T) {
	as := oauthtest.Start(t, oauthtest.Options{Clients: []oauthtest.Client{
		{ID: "agent", Secret: "s", TokenExchange: true},
		{ID: "alice", Secret: "alice-secret", Claims: map[string]any{"principal_class": "developer"}},
	}})
	forger := oauthtest.Start(t, oauthtest.Options{Clients: []oauthtest.Client{{ID: "alice", Secret: "alice-secret", Claims: map[string]any{"principal_class": "developer"}}}})
	o := &config.OAuth{Grant: config.GrantTokenExchange, ClientID: "agent", Scopes: []string{"read"}}
	h, hits, _, install := oauthFront(t, as, o, &config.IdentityProvider{Issuer: as.Issuer, Audience: "mcpready-agent", JWKSURL: as.JWKSURL()})
	install(as.Issuer)
	own := func(s *oauthtest.Server) string {
		cc := clientcredentials.Config{ClientID: "alice", ClientSecret: "alice-secret", TokenURL: s.TokenEndpoint(), Scopes: []string{"read", "write"},
			EndpointParams: neturl.Values{"resource": {"mcpready-agent"}}}
		tok, err := cc.Token(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return tok.AccessToken
	}
	cs := h.connect(t, "/mcp/servers/sec", own(as), nil, "2025-11-25")
	res := call(t, cs, "echo", map[string]any{"text": "hi"})
	if res.IsError || hits.Load() != 1 {
		t.Fatalf("call as alice: %+v (hits %d)", res.Content[0], hits.Load())
	}
	h.mu.Lock()
	rec := h.recs[len(h.recs)-1]
	h.mu.Unlock()
	if rec.GetPrincipalClass() != "developer" || rec.GetSelected().GetAccess().GetGrant() != config.GrantTokenExchange ||
		strings.Join(rec.GetSelected().GetAccess().GetGrantedScopes(), " ") != "read" {
		t.Fatalf("receipt principal %q access %v", rec.GetPrincipalClass(), rec.GetSelected().GetAccess())
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "forger", Version: "1"}, nil)
	_, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: h.url + "/mcp/servers/sec",
		HTTPClient: &http.Client{Transport: bearer{own(forger)}}, MaxRetries: -1}, nil)
	if err == nil || !strings.Contains(err.Error(), "Unauthorized") {
		t.Fatalf("forged JWT: %v, want 401", err)
	}
}
