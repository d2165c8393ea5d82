package access

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
	"time"

	"github.com/mcpready/mcpready/agent/config"
	"github.com/mcpready/mcpready/internal/oauthtest"
	"github.com/mcpready/mcpready/readiness"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/oauth2/clientcredentials"
)

// rig is a real MCP server protected by a real authorization server.
type rig struct {
	as       *oauthtest.Server
	url      string
	upstream Upstream
	tokens   []string // tokens the resource accepted
}

func secretFile(t testing.TB, secret string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(p, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func newRig(t testing.TB, as *oauthtest.Server, res oauthtest.Resource, o config.OAuth) *rig {
	t.Helper()
	return serveRig(t, as, o, func(url string, h http.Handler) http.Handler {
		res.URL = url
		return as.Protect(res, h)
	})
}

// serveRig serves an MCP server with the tool echo at the rig's URL
// through protect (given the URL and the MCP handler).
func serveRig(t testing.TB, as *oauthtest.Server, o config.OAuth, protect func(url string, h http.Handler) http.Handler) *rig {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{as: as, url: "http://" + ln.Addr().String() + "/mcp"}
	srv := mcp.NewServer(&mcp.Implementation{Name: "echo", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "echo"}, func(ctx context.Context, req *mcp.CallToolRequest, in struct{}) (*mcp.CallToolResult, struct{}, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, struct{}{}, nil
	})
	h := protect(r.url, mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	hs := &httptest.Server{Listener: ln, Config: &http.Server{Handler: h}}
	hs.Start()
	t.Cleanup(hs.Close)
	r.upstream = Upstream{Name: "echo", URL: r.url, OAuth: o}
	return r
}

func (r *rig) call(ctx context.Context, c *Client) error {
	cl := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil)
	cs, err := cl.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: r.url, HTTPClient: &http.Client{Transport: c.Transport(nil, r.upstream)}, MaxRetries: -1}, nil)
	if err != nil {
		return err
	}
	defer cs.Close()
	_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{}})
	return err
}

func serviceClient(t *testing.T, scopes ...string) (config.OAuth, oauthtest.Client) {
	return config.OAuth{Grant: config.GrantClientCredentials, ClientID: "svc", ClientSecretFile: secretFile(t, "svc-secret"), Scopes: scopes},
		oauthtest.Client{ID: "svc", Secret: "svc-secret"}
}

func TestClientCredentialsCachedPerScopeSet(t *testing.T) {
	for _, method := range []string{config.AuthClientSecretBasic, config.AuthClientSecretPost} {
		t.Run(method, func(t *testing.T) {
			o, oc := serviceClient(t, "read")
			o.TokenEndpointAuth = method
			as := oauthtest.Start(t, oauthtest.Options{Clients: []oauthtest.Client{oc}})
			r := newRig(t, as, oauthtest.Resource{Scopes: []string{"read"}}, o)
			c := New(Options{})
			for range 3 {
				if err := r.call(context.Background(), c); err != nil {
					t.Fatal(err)
				}
			}
			if n := as.Issued(); n != 1 {
				t.Fatalf("tokens issued = %d, want 1 (cached)", n)
			}
			g := c.Lookup(Principal{Name: "anyone"}, &r.upstream)
			if g == nil || g.Facts.Issuer != as.Issuer || strings.Join(g.Facts.Scopes, " ") != "read" || g.Facts.Audience[0] != r.url {
				t.Fatalf("facts = %+v", g)
			}
		})
	}
}

func TestScopeFromChallengeThenStepUp(t *testing.T) {
	o, oc := serviceClient(t) // no configured scopes: the challenge's
	as := oauthtest.Start(t, oauthtest.Options{Clients: []oauthtest.Client{oc}})
	r := newRig(t, as, oauthtest.Resource{Scopes: []string{"read", "write"}, ScopesSupported: []string{"read"}}, o)
	c := New(Options{})
	if err := r.call(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	if g := c.Lookup(Principal{}, &r.upstream); g == nil || strings.Join(g.Facts.Scopes, " ") != "read write" {
		t.Fatalf("grant = %+v, want the challenge's scopes", g)
	}

	// Configured "read" only: the 403 insufficient_scope steps up once.
	o2, _ := serviceClient(t, "read")
	r2 := newRig(t, as, oauthtest.Resource{Scopes: []string{"read", "write"}}, o2)
	c2 := New(Options{})
	if err := r2.call(context.Background(), c2); err != nil {
		t.Fatal(err)
	}
	if g := c2.Lookup(Principal{}, &r2.upstream); g == nil || strings.Join(g.Facts.Scopes, " ") != "read write" {
		t.Fatalf("grant after step-up = %+v", g)
	}
	// A challenge that asks for nothing new is not retried.
	hdr := http.Header{"Www-Authenticate": {`Bearer error="insufficient_scope", scope="read write"`}}
	_, err := c2.Authorize(context.Background(), Principal{}, &r2.upstream, nil, http.StatusForbidden, hdr)
	if ReasonOf(err) != ReasonStepUpExhausted {
		t.Fatalf("repeated step-up = %v, want %s", err, ReasonStepUpExhausted)
	}
}

func TestStepUpLimit(t *testing.T) {
	o, oc := serviceClient(t, "a")
	o.MaxStepUps = 1
	as := oauthtest.Start(t, oauthtest.Options{Clients: []oauthtest.Client{oc}})
	r := newRig(t, as, oauthtest.Resource{}, o)
	c := New(Options{})
	ask := func(sc string) error {
		_, err := c.Authorize(context.Background(), Principal{}, &r.upstream, nil, http.StatusForbidden, http.Header{"Www-Authenticate": {`Bearer error="insufficient_scope", scope="` + sc + `"`}})
		return err
	}
	if err := ask("b"); err != nil {
		t.Fatal(err)
	}
	if err := ask("c"); ReasonOf(err) != ReasonStepUpExhausted {
		t.Fatalf("second step-up = %v, want %s", err, ReasonStepUpExhausted)
	}
}

func TestTokenExchangeForLocalPrincipal(t *testing.T) {
	as := oauthtest.Start(t, oauthtest.Options{Clients: []oauthtest.Client{
		{ID: "alice", Secret: "alice-secret", Scopes: []string{"read", "write"}},
		{ID: "agent", Secret: "agent-secret", TokenExchange: true},
	}})
	o := config.OAuth{Grant: config.GrantTokenExchange, ClientID: "agent", ClientSecretFile: secretFile(t, "agent-secret"), Scopes: []string{"read"}, Issuer: as.Issuer}
	r := newRig(t, as, oauthtest.Resource{Scopes: []string{"read"}}, o)
	c := New(Options{})
	// No own token: nothing to exchange.
	_, err := c.Token(context.Background(), Principal{Name: "bob"}, &r.upstream)
	if ReasonOf(err) != ReasonNoSubjectToken {
		t.Fatalf("without a subject token = %v", err)
	}
	cc := clientcredentials.Config{ClientID: "alice", ClientSecret: "alice-secret", TokenURL: as.TokenEndpoint(), Scopes: []string{"read", "write"}}
	own, err := cc.Token(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	alice := Principal{Name: "alice", SubjectToken: own.AccessToken}
	if err := r.call(WithPrincipal(context.Background(), alice), c); err != nil {
		t.Fatal(err)
	}
	g := c.Lookup(alice, &r.upstream)
	if g == nil || strings.Join(g.Facts.Scopes, " ") != "read" {
		t.Fatalf("exchanged grant = %+v, want narrowed to read", g)
	}
	if g.token == own.AccessToken {
		t.Fatal("the principal's own token was presented upstream")
	}
	if c.Lookup(Principal{Name: "bob"}, &r.upstream) != nil {
		t.Fatal("alice's token is cached for bob")
	}
}

// TestForeignIssuer: the protected resource names an authorization server
// other than the configured one; no token is requested from either, and
// the decision keeps the candidate out.
func TestForeignIssuer(t *testing.T) {
	o, oc := serviceClient(t, "read")
	ours := oauthtest.Start(t, oauthtest.Options{Clients: []oauthtest.Client{oc}})
	foreign := oauthtest.Start(t, oauthtest.Options{Clients: []oauthtest.Client{oc}})
	o.Issuer = ours.Issuer
	r := newRig(t, foreign, oauthtest.Resource{}, o)
	c := New(Options{})
	err := r.call(context.Background(), c)
	if ReasonOf(err) != ReasonIssuerMismatch || !errors.Is(err, ErrNotReady) {
		t.Fatalf("call = %v, want %s", err, ReasonIssuerMismatch)
	}
	if ours.Issued()+foreign.Issued() != 0 {
		t.Fatal("a token was requested despite the issuer mismatch")
	}
	g := c.Guard(Principal{}, func(string) (*Upstream, bool) { return &r.upstream, true })
	rj, ok := g.Check("echo", &Expect{}, time.Now())
	if ok || rj.Code != readiness.CodeIssuerMismatch {
		t.Fatalf("guard = %+v %v, want issuer_mismatch", rj, ok)
	}
	// Without a configured issuer the Declaration decides.
	o.Issuer = ""
	r2 := newRig(t, foreign, oauthtest.Resource{}, o)
	c2 := New(Options{})
	g2 := c2.Guard(Principal{}, func(string) (*Upstream, bool) { return &r2.upstream, true })
	x := &Expect{DeclaredIssuers: []string{ours.Issuer}}
	if _, ok := g2.Check("echo", x, time.Now()); !ok {
		t.Fatal("nothing known yet must not reject")
	}
	if err := r2.call(context.Background(), c2); !errors.Is(err, ErrNotReady) {
		t.Fatalf("call with a token from an undeclared issuer = %v, want refused", err)
	}
	g2 = c2.Guard(Principal{}, func(string) (*Upstream, bool) { return &r2.upstream, true }) // a Guard serves one decision
	if rj, ok := g2.Check("echo", x, time.Now()); ok || rj.Code != readiness.CodeIssuerMismatch {
		t.Fatalf("guard = %+v, want issuer_mismatch", rj)
	}
}

func TestBadAuthorizationServers(t *testing.T) {
	o, oc := serviceClient(t, "read")
	cases := map[string]struct {
		opts oauthtest.Options
		want Reason
	}{
		"wrong audience": {oauthtest.Options{Clients: []oauthtest.Client{oc}, Audience: "http://elsewhere.example/mcp"}, ReasonAudienceMismatch},
		"more scopes":    {oauthtest.Options{Clients: []oauthtest.Client{oc}, ExtraScopes: []string{"admin"}}, ReasonScopeExceeded},
		"expired":        {oauthtest.Options{Clients: []oauthtest.Client{oc}, Lifetime: time.Millisecond}, ReasonExpired},
		"unknown client": {oauthtest.Options{}, ReasonTokenFailed},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			as := oauthtest.Start(t, tc.opts)
			r := newRig(t, as, oauthtest.Resource{}, o)
			_, err := New(Options{}).Token(context.Background(), Principal{}, &r.upstream)
			if ReasonOf(err) != tc.want {
				t.Fatalf("err = %v, want %s", err, tc.want)
			}
		})
	}
	t.Run("unreachable", func(t *testing.T) {
		as := oauthtest.Start(t, oauthtest.Options{Clients: []oauthtest.Client{oc}})
		dead := oauthtest.Start(t, oauthtest.Options{})
		dead.Close()
		r := newRig(t, as, oauthtest.Resource{AuthorizationServers: []string{dead.Issuer}}, o)
		_, err := New(Options{}).Token(context.Background(), Principal{}, &r.upstream)
		if ReasonOf(err) != ReasonASMetadataInvalid {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("malformed metadata", func(t *testing.T) {
		hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("{not json")) }))
		defer hs.Close()
		up := Upstream{Name: "x", URL: hs.URL + "/mcp", OAuth: o}
		_, err := New(Options{}).Token(context.Background(), Principal{}, &up)
		if ReasonOf(err) != ReasonMetadataInvalid {
			t.Fatalf("err = %v", err)
		}
	})
}

func TestWronglySignedToken(t *testing.T) {
	_, oc := serviceClient(t)
	a := oauthtest.Start(t, oauthtest.Options{Clients: []oauthtest.Client{oc}})
	b := oauthtest.Start(t, oauthtest.Options{Clients: []oauthtest.Client{oc}})
	cc := clientcredentials.Config{ClientID: "svc", ClientSecret: "svc-secret", TokenURL: b.TokenEndpoint()}
	tok, err := cc.Token(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var ks KeySets
	_, err = ks.Verify(context.Background(), tok.AccessToken, a.JWKSURL(), a.Issuer)
	if ReasonOf(err) != ReasonSignatureInvalid {
		t.Fatalf("token of b against a's JWKS = %v", err)
	}
	if strings.Contains(err.Error(), tok.AccessToken) {
		t.Fatal("the error contains the token")
	}
	if _, err := ks.Verify(context.Background(), tok.AccessToken, b.JWKSURL(), a.Issuer); ReasonOf(err) != ReasonIssuerMismatch {
		t.Fatalf("token of b claimed for issuer a = %v", err)
	}
	if _, err := ks.Verify(context.Background(), "opaque-token", b.JWKSURL(), b.Issuer); ReasonOf(err) != ReasonSignatureInvalid {
		t.Fatalf("opaque token = %v", err)
	}
}

// A token that lives less than RefreshAhead is reused for half its life,
// then replaced. Before, it was within the refresh margin from the start,
// and a new one was asked for at every request.
func TestShortLivedTokenReused(t *testing.T) {
	o, oc := serviceClient(t, "read")
	as := oauthtest.Start(t, oauthtest.Options{Clients: []oauthtest.Client{oc}, Lifetime: 20 * time.Second})
	r := newRig(t, as, oauthtest.Resource{}, o)
	now := time.Now()
	c := New(Options{Now: func() time.Time { return now }}) // RefreshAhead 30s
	for range 3 {
		if err := r.call(context.Background(), c); err != nil {
			t.Fatal(err)
		}
	}
	if n := as.Issued(); n != 1 {
		t.Fatalf("tokens issued = %d, want 1 (reused for half its 20s life)", n)
	}
	now = now.Add(11 * time.Second)
	if err := r.call(context.Background(), c); err != nil || as.Issued() != 2 {
		t.Fatalf("past half its life: %v, issued %d; want a new token", err, as.Issued())
	}
}

// TestRefreshAheadOfExpiry: a token within RefreshAhead of its expiry is
// replaced before it is presented; when that fails, it is presented until
// it expires, never after.
func TestRefreshAheadOfExpiry(t *testing.T) {
	o, oc := serviceClient(t, "read")
	as := oauthtest.Start(t, oauthtest.Options{Clients: []oauthtest.Client{oc}, Lifetime: 10 * time.Minute})
	r := newRig(t, as, oauthtest.Resource{}, o)
	now := time.Now()
	c := New(Options{RefreshAhead: time.Minute, Now: func() time.Time { return now }})
	g1, err := c.Token(context.Background(), Principal{}, &r.upstream)
	if err != nil {
		t.Fatal(err)
	}
	if g, _ := c.Token(context.Background(), Principal{}, &r.upstream); g != g1 {
		t.Fatal("a fresh token was not reused")
	}
	now = now.Add(9*time.Minute + 30*time.Second)
	g2, err := c.Token(context.Background(), Principal{}, &r.upstream)
	if err != nil || g2 == g1 || as.Issued() != 2 {
		t.Fatalf("near expiry: %v, issued %d; want a new token", err, as.Issued())
	}
	// The authorization server goes away: the held token is still
	// presented inside the refresh window, and never once it expired.
	as.Close()
	now = g2.Facts.Expiry.Add(-30 * time.Second)
	if g, err := c.Token(context.Background(), Principal{}, &r.upstream); err != nil || g != g2 {
		t.Fatalf("inside the refresh window with the server down: %v", err)
	}
	now = g2.Facts.Expiry
	if _, err := c.Token(context.Background(), Principal{}, &r.upstream); ReasonOf(err) != ReasonTokenFailed {
		t.Fatalf("after expiry with the server down = %v, want %s", err, ReasonTokenFailed)
	}
}

func TestSecretsNeverInErrors(t *testing.T) {
	o, oc := serviceClient(t, "read")
	o.ClientSecretFile = ""
	o.ClientSecretEnv = "ACCESS_TEST_SECRET_UNSET"
	as := oauthtest.Start(t, oauthtest.Options{Clients: []oauthtest.Client{oc}})
	r := newRig(t, as, oauthtest.Resource{}, o)
	_, err := New(Options{}).Token(context.Background(), Principal{}, &r.upstream)
	if ReasonOf(err) != ReasonCredentials {
		t.Fatalf("err = %v", err)
	}
	t.Setenv("ACCESS_TEST_SECRET_UNSET", "wrong-secret-value")
	_, err = New(Options{}).Token(context.Background(), Principal{}, &r.upstream)
	if ReasonOf(err) != ReasonTokenFailed || strings.Contains(err.Error(), "wrong-secret-value") {
		t.Fatalf("err = %v", err)
	}
	// The authorization-code flow: neither the code nor the secret.
	co, coc := codeClient(t)
	co.ClientSecretFile = ""
	co.ClientSecretEnv = "ACCESS_TEST_SECRET_UNSET"
	cas := oauthtest.Start(t, oauthtest.Options{Clients: []oauthtest.Client{coc}})
	cr := newRig(t, cas, oauthtest.Resource{}, co)
	var code string
	spy := func(ctx context.Context, ar *AuthorizationRequest) (*AuthorizationResponse, error) {
		res, err := browser(nil)(ctx, ar)
		if err == nil {
			code = res.Code
		}
		return res, err
	}
	err = cr.call(WithPrincipal(context.Background(), Principal{Name: "alice"}), New(Options{Authorizer: spy}))
	if ReasonOf(err) != ReasonTokenFailed || code == "" || strings.Contains(err.Error(), code) || strings.Contains(err.Error(), "wrong-secret-value") {
		t.Fatalf("code flow with a wrong secret = %v", err)
	}
}

// WithPrincipalAt keeps the principal where the caller does: the context
// value is its only allocation, and Transport reads the same principal
// WithPrincipal would give it.
func TestWithPrincipalAt(t *testing.T) {
	p := Principal{Name: "alice", SubjectToken: "t"}
	if got := PrincipalFrom(WithPrincipalAt(context.Background(), &p)); got != p {
		t.Errorf("PrincipalFrom(WithPrincipalAt) = %+v, want %+v", got, p)
	}
	if got := PrincipalFrom(WithPrincipal(context.Background(), p)); got != p {
		t.Errorf("PrincipalFrom(WithPrincipal) = %+v, want %+v", got, p)
	}
	if got := PrincipalFrom(context.Background()); got != (Principal{}) {
		t.Errorf("PrincipalFrom(no principal) = %+v, want the zero Principal", got)
	}
	ctx := context.Background()
	if n := testing.AllocsPerRun(100, func() { ctx = WithPrincipalAt(context.Background(), &p) }); n > 1 {
		t.Errorf("WithPrincipalAt: %v allocations, want 1", n)
	}
	_ = ctx
}
