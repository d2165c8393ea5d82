package oauthtest

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
)

func claimsOf(t *testing.T, s *Server, tok string) map[string]any {
	t.Helper()
	resp, err := http.Get(s.JWKSURL())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var ks jose.JSONWebKeySet
	if err := json.NewDecoder(resp.Body).Decode(&ks); err != nil {
		t.Fatal(err)
	}
	parsed, err := jwt.ParseSigned(tok, []jose.SignatureAlgorithm{jose.RS256})
	if err != nil {
		t.Fatal(err)
	}
	var c map[string]any
	if err := parsed.Claims(ks, &c); err != nil {
		t.Fatalf("token does not verify against the JWKS: %v", err)
	}
	return c
}

func TestClientCredentialsJWTWithResourceAudience(t *testing.T) {
	s := Start(t, Options{Clients: []Client{{ID: "svc", Secret: "s3cret", Scopes: []string{"read", "write"}}}})
	for _, style := range []oauth2.AuthStyle{oauth2.AuthStyleInHeader, oauth2.AuthStyleInParams} {
		cc := clientcredentials.Config{ClientID: "svc", ClientSecret: "s3cret", TokenURL: s.TokenEndpoint(), Scopes: []string{"read"},
			AuthStyle: style, EndpointParams: url.Values{"resource": {"http://mcp.example/mcp"}}}
		tok, err := cc.Token(context.Background())
		if err != nil {
			t.Fatalf("style %d: %v", style, err)
		}
		c := claimsOf(t, s, tok.AccessToken)
		if c["iss"] != s.Issuer || c["scope"] != "read" || c["sub"] != "svc" {
			t.Fatalf("claims = %v", c)
		}
		if aud, _ := c["aud"].([]any); len(aud) != 1 || aud[0] != "http://mcp.example/mcp" {
			t.Fatalf("aud = %v, want the resource indicator", c["aud"])
		}
	}
	cc := clientcredentials.Config{ClientID: "svc", ClientSecret: "wrong", TokenURL: s.TokenEndpoint()}
	if _, err := cc.Token(context.Background()); err == nil {
		t.Fatal("wrong secret accepted")
	}
	cc = clientcredentials.Config{ClientID: "svc", ClientSecret: "s3cret", TokenURL: s.TokenEndpoint(), Scopes: []string{"admin"}}
	if _, err := cc.Token(context.Background()); err == nil || !strings.Contains(err.Error(), "invalid_scope") {
		t.Fatalf("scope outside the client's = %v, want invalid_scope", err)
	}
}

func TestTokenExchangeNarrowsScopes(t *testing.T) {
	s := Start(t, Options{Clients: []Client{
		{ID: "user", Secret: "u", Scopes: []string{"read", "write"}},
		{ID: "agent", Secret: "a", TokenExchange: true},
	}})
	cc := clientcredentials.Config{ClientID: "user", ClientSecret: "u", TokenURL: s.TokenEndpoint(), Scopes: []string{"read", "write"}}
	subj, err := cc.Token(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	cfg := oauth2.Config{ClientID: "agent", ClientSecret: "a", Endpoint: oauth2.Endpoint{TokenURL: s.TokenEndpoint(), AuthStyle: oauth2.AuthStyleInHeader}}
	tok, err := cfg.Exchange(context.Background(), "",
		oauth2.SetAuthURLParam("grant_type", "urn:ietf:params:oauth:grant-type:token-exchange"),
		oauth2.SetAuthURLParam("subject_token", subj.AccessToken),
		oauth2.SetAuthURLParam("subject_token_type", "urn:ietf:params:oauth:token-type:access_token"),
		oauth2.SetAuthURLParam("audience", "http://mcp.example/mcp"),
		oauth2.SetAuthURLParam("scope", "read"))
	if err != nil {
		t.Fatal(err)
	}
	c := claimsOf(t, s, tok.AccessToken)
	if c["sub"] != "user" || c["scope"] != "read" {
		t.Fatalf("exchanged claims = %v", c)
	}
	if s.Issued() != 2 {
		t.Fatalf("issued = %d, want 2", s.Issued())
	}
}

func TestProtectChallengesAndServesMetadata(t *testing.T) {
	s := Start(t, Options{})
	h := s.Protect(Resource{URL: "http://mcp.example/mcp", Scopes: []string{"read"}}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	req, _ := http.NewRequest("POST", "http://mcp.example/mcp", nil)
	w := &recorder{h: http.Header{}}
	h.ServeHTTP(w, req)
	if w.code != 401 || !strings.Contains(w.h.Get("WWW-Authenticate"), `resource_metadata="http://mcp.example/.well-known/oauth-protected-resource"`) {
		t.Fatalf("got %d %q", w.code, w.h.Get("WWW-Authenticate"))
	}
}

type recorder struct {
	h    http.Header
	code int
}

func (r *recorder) Header() http.Header         { return r.h }
func (r *recorder) Write(b []byte) (int, error) { return len(b), nil }
func (r *recorder) WriteHeader(c int)           { r.code = c }
