package access

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zitadel/oidc/v3/pkg/oidc"

	"github.com/mcpready/mcpready/agent/config"
	"github.com/mcpready/mcpready/internal/oauthtest"
)

const testRedirect = "http://127.0.0.1:8765/callback"

// browser completes an authorization the way a user's browser does at the
// approving oauthtest server: it follows the redirects up to the redirect
// URL and reads the code there. seen, when set, records each request.
func browser(seen *[]*AuthorizationRequest) Authorizer {
	return func(ctx context.Context, r *AuthorizationRequest) (*AuthorizationResponse, error) {
		if seen != nil {
			*seen = append(*seen, r)
		}
		var loc *url.URL
		hc := &http.Client{CheckRedirect: func(req *http.Request, _ []*http.Request) error {
			if strings.HasPrefix(req.URL.String(), r.RedirectURL) {
				loc = req.URL
				return http.ErrUseLastResponse
			}
			return nil
		}}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.URL, nil)
		if err != nil {
			return nil, err
		}
		resp, err := hc.Do(req)
		if err != nil {
			return nil, err
		}
		resp.Body.Close()
		if loc == nil {
			return nil, http.ErrNoLocation
		}
		q := loc.Query()
		return &AuthorizationResponse{Code: q.Get("code"), State: q.Get("state"), Iss: q.Get("iss")}, nil
	}
}

func codeClient(t *testing.T) (config.OAuth, oauthtest.Client) {
	return config.OAuth{Grant: config.GrantAuthorizationCode, ClientID: "app", ClientSecretFile: secretFile(t, "app-secret"), RedirectURL: testRedirect},
		oauthtest.Client{ID: "app", Secret: "app-secret", RedirectURIs: []string{testRedirect}}
}

// TestAuthorizationCodeFlow: the user completes one authorization (PKCE
// S256, the resource indicator, the challenge's scope), the token is
// cached for the principal and refreshed with the refresh token, without
// asking the user again. Before: grant authorization_code did not exist.
func TestAuthorizationCodeFlow(t *testing.T) {
	o, oc := codeClient(t)
	as := oauthtest.Start(t, oauthtest.Options{Clients: []oauthtest.Client{oc}, Lifetime: 10 * time.Minute})
	r := newRig(t, as, oauthtest.Resource{Scopes: []string{"read"}}, o)
	var seen []*AuthorizationRequest
	now := time.Now()
	c := New(Options{Authorizer: browser(&seen), RefreshAhead: time.Minute, Now: func() time.Time { return now }})
	alice := Principal{Name: "alice"}
	ctx := WithPrincipal(context.Background(), alice)
	for range 2 {
		if err := r.call(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	if as.Approvals() != 1 || len(seen) != 1 {
		t.Fatalf("authorizations = %d, want 1", as.Approvals())
	}
	u, _ := url.Parse(seen[0].URL)
	q := u.Query()
	if q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "" || q.Get("resource") != r.url || !strings.Contains(q.Get("scope"), "read") {
		t.Fatalf("authorization URL = %s", seen[0].URL)
	}
	if seen[0].Principal != "alice" || seen[0].Upstream != "echo" {
		t.Fatalf("request = %+v", seen[0])
	}
	g := c.Lookup(alice, &r.upstream)
	if g == nil || g.Facts.Issuer != as.Issuer || g.Facts.Audience[0] != r.url || strings.Join(g.Facts.Scopes, " ") != "read" || g.Facts.Unverified {
		t.Fatalf("facts = %+v (offline_access is no fact)", g)
	}
	if c.Lookup(Principal{Name: "bob"}, &r.upstream) != nil {
		t.Fatal("alice's token is cached for bob")
	}
	// Near expiry: the refresh token, not the user.
	issued := as.Issued()
	now = now.Add(9*time.Minute + 30*time.Second)
	g2, err := c.Token(ctx, alice, &r.upstream)
	if err != nil || g2 == g || as.Issued() != issued+1 || as.Approvals() != 1 {
		t.Fatalf("refresh: %v, issued %d, approvals %d", err, as.Issued()-issued, as.Approvals())
	}
}

// TestAuthorizationCodeRegistration: without a client id the agent
// registers (RFC 7591) once and runs the flow as that client (the second
// principal asks for the scope the first one's challenge named, no
// step-up; failed before with 3 approvals); an
// authorization server without registration is a typed error.
func TestAuthorizationCodeRegistration(t *testing.T) {
	o := config.OAuth{Grant: config.GrantAuthorizationCode, DynamicRegistration: true, RedirectURL: testRedirect}
	as := oauthtest.Start(t, oauthtest.Options{Registration: true})
	r := newRig(t, as, oauthtest.Resource{Scopes: []string{"read"}}, o)
	c := New(Options{Authorizer: browser(nil)})
	for _, p := range []string{"alice", "bob"} {
		if err := r.call(WithPrincipal(context.Background(), Principal{Name: p}), c); err != nil {
			t.Fatal(p, err)
		}
	}
	if len(c.regs) != 1 || as.Approvals() != 2 {
		t.Fatalf("registrations %d, approvals %d; want 1 and 2", len(c.regs), as.Approvals())
	}
	plain := oauthtest.Start(t, oauthtest.Options{})
	r2 := newRig(t, plain, oauthtest.Resource{}, o)
	if err := r2.call(WithPrincipal(context.Background(), Principal{Name: "alice"}), New(Options{Authorizer: browser(nil)})); ReasonOf(err) != ReasonRegistration {
		t.Fatalf("without registration = %v, want %s", err, ReasonRegistration)
	}
}

// TestAuthorizationCodeRefusals: a response whose state does not match,
// an authorizer that fails, and no authorizer at all are typed errors;
// no token is requested.
func TestAuthorizationCodeRefusals(t *testing.T) {
	o, oc := codeClient(t)
	as := oauthtest.Start(t, oauthtest.Options{Clients: []oauthtest.Client{oc}})
	r := newRig(t, as, oauthtest.Resource{}, o)
	forged := func(ctx context.Context, ar *AuthorizationRequest) (*AuthorizationResponse, error) {
		res, err := browser(nil)(ctx, ar)
		if err == nil {
			res.State = "forged"
		}
		return res, err
	}
	cases := map[string]struct {
		a    Authorizer
		want Reason
	}{
		"state mismatch": {forged, ReasonAuthorizationFailed},
		"denied": {func(context.Context, *AuthorizationRequest) (*AuthorizationResponse, error) {
			return nil, context.Canceled
		}, ReasonAuthorizationFailed},
		"no authorizer": {nil, ReasonNotConfigured},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := r.call(WithPrincipal(context.Background(), Principal{Name: "alice"}), New(Options{Authorizer: tc.a}))
			if ReasonOf(err) != tc.want {
				t.Fatalf("err = %v, want %s", err, tc.want)
			}
		})
	}
	if as.Issued() != 0 {
		t.Fatalf("%d tokens issued", as.Issued())
	}
}

// TestAuthorizationPending: a caller that stops waiting gets
// authorization-pending; the flow goes on, and the next caller gets its
// token without a second authorization.
func TestAuthorizationPending(t *testing.T) {
	o, oc := codeClient(t)
	as := oauthtest.Start(t, oauthtest.Options{Clients: []oauthtest.Client{oc}})
	r := newRig(t, as, oauthtest.Resource{}, o)
	release := make(chan struct{})
	slow := func(ctx context.Context, ar *AuthorizationRequest) (*AuthorizationResponse, error) {
		<-release
		return browser(nil)(ctx, ar)
	}
	c := New(Options{Authorizer: slow})
	alice := Principal{Name: "alice"}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, err := c.Authorize(ctx, alice, &r.upstream, nil, http.StatusUnauthorized, http.Header{}); ReasonOf(err) != ReasonAuthorizationPending {
		t.Fatalf("err = %v, want %s", err, ReasonAuthorizationPending)
	}
	close(release)
	if _, err := c.Token(context.Background(), alice, &r.upstream); err != nil {
		t.Fatal(err)
	}
	if as.Approvals() != 1 {
		t.Fatalf("approvals = %d, want 1", as.Approvals())
	}
}

func ecKeyFile(t *testing.T) (string, *ecdsa.PrivateKey) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "key.pem")
	if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return p, k
}

// TestPrivateKeyJWT: RFC 7523 client authentication with the key file,
// for client credentials and the authorization-code flow; the
// authorization server refuses an assertion signed with another key.
// Before: private_key_jwt was not accepted.
func TestPrivateKeyJWT(t *testing.T) {
	keyFile, key := ecKeyFile(t)
	otherFile, _ := ecKeyFile(t)
	as := oauthtest.Start(t, oauthtest.Options{Clients: []oauthtest.Client{
		{ID: "svc", AuthMethod: oidc.AuthMethodPrivateKeyJWT, PublicKey: &key.PublicKey},
		{ID: "app", AuthMethod: oidc.AuthMethodPrivateKeyJWT, PublicKey: &key.PublicKey, RedirectURIs: []string{testRedirect}},
	}})
	svc := config.OAuth{Grant: config.GrantClientCredentials, ClientID: "svc", TokenEndpointAuth: config.AuthPrivateKeyJWT, PrivateKeyFile: keyFile, Scopes: []string{"read"}}
	r := newRig(t, as, oauthtest.Resource{}, svc)
	if err := r.call(context.Background(), New(Options{})); err != nil {
		t.Fatal("client credentials:", err)
	}
	app := config.OAuth{Grant: config.GrantAuthorizationCode, ClientID: "app", TokenEndpointAuth: config.AuthPrivateKeyJWT, PrivateKeyFile: keyFile, RedirectURL: testRedirect}
	r2 := newRig(t, as, oauthtest.Resource{}, app)
	if err := r2.call(WithPrincipal(context.Background(), Principal{Name: "alice"}), New(Options{Authorizer: browser(nil)})); err != nil {
		t.Fatal("authorization code:", err)
	}
	svc.PrivateKeyFile = otherFile
	r3 := newRig(t, as, oauthtest.Resource{}, svc)
	if err := r3.call(context.Background(), New(Options{})); ReasonOf(err) != ReasonTokenFailed {
		t.Fatalf("another key = %v, want %s", err, ReasonTokenFailed)
	}
	svc.PrivateKeyFile = secretFile(t, "not a key")
	r4 := newRig(t, as, oauthtest.Resource{}, svc)
	if err := r4.call(context.Background(), New(Options{})); ReasonOf(err) != ReasonCredentials || strings.Contains(err.Error(), "not a key") {
		t.Fatalf("no key = %v, want %s without the file's content", err, ReasonCredentials)
	}
}

// TestUnverifiedTokens: under tokenVerification unverified the token is
// presented as issued, and its facts say so (the token response's scopes,
// the resource asked for); under jwt (the default) a token that is no JWT
// is refused (TestWronglySignedToken).
func TestUnverifiedTokens(t *testing.T) {
	o, oc := serviceClient(t, "read")
	o.TokenVerification = config.VerifyUnverified
	as := oauthtest.Start(t, oauthtest.Options{Clients: []oauthtest.Client{oc}})
	r := newRig(t, as, oauthtest.Resource{}, o)
	c := New(Options{})
	if err := r.call(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	g := c.Lookup(Principal{}, &r.upstream)
	if g == nil || !g.Facts.Unverified || g.Facts.Verification() != config.VerifyUnverified || g.Facts.Issuer != as.Issuer || g.Facts.Audience[0] != r.url || strings.Join(g.Facts.Scopes, " ") != "read" {
		t.Fatalf("facts = %+v", g)
	}
}

// TestLegacyDiscovery: a 2025-03-26 server without protected-resource
// metadata is its own authorization server: its RFC 8414 metadata at the
// origin (on that origin only), else the default endpoints.
func TestLegacyDiscovery(t *testing.T) {
	var meta string
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/.well-known/oauth-authorization-server" && meta != "" {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(strings.ReplaceAll(meta, "ORIGIN", "http://"+r.Host)))
			return
		}
		http.NotFound(w, r)
	}))
	defer hs.Close()
	d, err := discover(context.Background(), http.DefaultClient, hs.URL+"/mcp", http.Header{}, "")
	if err != nil || d.TokenEndpoint != hs.URL+"/token" || d.AuthorizationEndpoint != hs.URL+"/authorize" || d.RegistrationEndpoint != hs.URL+"/register" {
		t.Fatalf("no metadata at all: %+v, %v", d, err)
	}
	meta = `{"issuer":"ORIGIN/oauth","authorization_endpoint":"ORIGIN/oauth/authorize","token_endpoint":"ORIGIN/oauth/token"}`
	if d, err = discover(context.Background(), http.DefaultClient, hs.URL+"/mcp", http.Header{}, ""); err != nil || d.Issuer != hs.URL+"/oauth" || d.AuthorizationServers[0] != d.Issuer {
		t.Fatalf("metadata at the origin: %+v, %v", d, err)
	}
	meta = `{"issuer":"ORIGIN","authorization_endpoint":"https://evil.example/authorize","token_endpoint":"ORIGIN/token"}`
	if _, err = discover(context.Background(), http.DefaultClient, hs.URL+"/mcp", http.Header{}, ""); ReasonOf(err) != ReasonIssuerMismatch {
		t.Fatalf("metadata naming another origin = %v", err)
	}
	if _, err = discover(context.Background(), http.DefaultClient, hs.URL+"/mcp", http.Header{}, "https://idp.example"); ReasonOf(err) != ReasonIssuerMismatch {
		t.Fatalf("configured issuer elsewhere = %v", err)
	}
}

func TestCheckIss(t *testing.T) {
	adv := &Discovery{Issuer: "https://as.example", IssParameter: true}
	not := &Discovery{Issuer: "https://as.example"}
	for _, tc := range []struct {
		iss string
		d   *Discovery
		ok  bool
	}{
		{"https://as.example", adv, true},
		{"", adv, false},
		{"https://as.example/", adv, false}, // no normalisation
		{"https://evil.example", adv, false},
		{"", not, true},
		{"https://as.example", not, false},
	} {
		if err := checkIss(tc.iss, tc.d); (err == nil) != tc.ok {
			t.Errorf("checkIss(%q, advertised=%v) = %v", tc.iss, tc.d.IssParameter, err)
		}
	}
}

func FuzzParsePrivateKey(f *testing.F) {
	k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	der, _ := x509.MarshalPKCS8PrivateKey(k)
	f.Add(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
	f.Add([]byte("-----BEGIN EC PRIVATE KEY-----\nAAAA\n-----END EC PRIVATE KEY-----\n"))
	f.Add([]byte("not pem"))
	f.Fuzz(func(t *testing.T, b []byte) {
		key, alg, err := ParsePrivateKey(b)
		if (err == nil) != (key != nil && alg != "") {
			t.Fatalf("key %v alg %q err %v", key, alg, err)
		}
	})
}

// TestLoopbackAuthorizer: the agent's authorizer logs the authorization
// URL (no token), serves the redirect URL on loopback and returns what the
// browser brought back; a non-loopback redirect URL is refused.
func TestLoopbackAuthorizer(t *testing.T) {
	var logs strings.Builder
	a := LoopbackAuthorizer(slog.New(slog.NewTextHandler(&logs, nil)))
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	redirect := "http://" + addr + "/callback"
	done := make(chan *AuthorizationResponse, 1)
	go func() {
		res, err := a(context.Background(), &AuthorizationRequest{Upstream: "tickets", Principal: "alice", URL: "https://as.example/authorize?x=1&state=s1", RedirectURL: redirect})
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	for i := 0; ; i++ {
		resp, err := http.Get(redirect + "?code=forged&state=other")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode != http.StatusBadRequest {
				t.Fatalf("a redirect with another state = HTTP %d", resp.StatusCode)
			}
			break
		}
		if i > 50 {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	resp, err := http.Get(redirect + "?code=c1&state=s1&iss=https%3A%2F%2Fas.example")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if res := <-done; res == nil || res.Code != "c1" || res.State != "s1" || res.Iss != "https://as.example" {
		t.Fatalf("response = %+v", res)
	}
	if !strings.Contains(logs.String(), "https://as.example/authorize?x=1&state=s1") || !strings.Contains(logs.String(), "alice") {
		t.Fatalf("log = %s", logs.String())
	}
	if _, err := a(context.Background(), &AuthorizationRequest{RedirectURL: "http://agent.example:8/cb"}); !errors.Is(err, ErrRedirectURL) {
		t.Fatalf("non-loopback = %v", err)
	}
}
