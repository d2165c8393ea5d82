package access

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/mcpready/mcpready/agent/config"
)

// sink records every request that reaches it: the origin a redirect
// points at.
type sink struct {
	*httptest.Server
	mu     sync.Mutex
	bodies []string
}

func newSink(t *testing.T) *sink {
	s := &sink{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.bodies = append(s.bodies, r.Method+" "+r.URL.Path+" "+string(b))
		s.mu.Unlock()
		http.NotFound(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *sink) hits() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.bodies...)
}

// A protected resource (or the server its challenge names) that redirects
// the agent's metadata fetch to another origin, for example an internal
// address (server-side request forgery, MCP security best practices):
// the redirect is not followed, and discovery fails. (The go-sdk's
// discovery client defers to the client's own CheckRedirect, so this pins
// that the access layer's keeps the protection.)
func TestDiscoveryRedirectNotFollowed(t *testing.T) {
	o, _ := serviceClient(t, "read")
	elsewhere := newSink(t)
	redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, elsewhere.URL+"/latest/meta-data/", http.StatusFound)
	}))
	t.Cleanup(redirector.Close)
	up := Upstream{Name: "x", URL: redirector.URL + "/mcp", OAuth: o}
	hdr := http.Header{"Www-Authenticate": {`Bearer resource_metadata="` + redirector.URL + `/meta"`}}
	_, err := New(Options{}).discover(context.Background(), &up, hdr)
	if err == nil {
		t.Fatal("discovery through a cross-origin redirect succeeded")
	}
	if h := elsewhere.hits(); len(h) != 0 {
		t.Fatalf("the redirect's target was fetched: %q", h)
	}
}

// An authorization server whose token endpoint answers 307 to another
// origin had the client's secret re-posted there (net/http follows a 307
// with its body): the redirect is not followed.
func TestTokenRedirectNotFollowed(t *testing.T) {
	elsewhere := newSink(t)
	var as *httptest.Server
	as = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/.well-known/oauth-authorization-server":
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"issuer":"`+as.URL+`","token_endpoint":"`+as.URL+`/token","response_types_supported":["code"],"code_challenge_methods_supported":["S256"]}`)
		case "/token":
			http.Redirect(w, r, elsewhere.URL+"/token", http.StatusTemporaryRedirect)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(as.Close)
	var res *httptest.Server
	res = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/.well-known/oauth-protected-resource/mcp" {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"resource":"`+res.URL+`/mcp","authorization_servers":["`+as.URL+`"]}`)
			return
		}
		http.NotFound(w, r)
	}))
	t.Cleanup(res.Close)
	o := config.OAuth{Grant: config.GrantClientCredentials, ClientID: "svc", ClientSecretFile: secretFile(t, "svc-secret"), TokenEndpointAuth: "client_secret_post", Scopes: []string{"read"}}
	up := Upstream{Name: "x", URL: res.URL + "/mcp", OAuth: o}
	_, err := New(Options{}).Token(context.Background(), Principal{}, &up)
	if ReasonOf(err) != ReasonTokenFailed {
		t.Fatalf("a token through a cross-origin redirect: %v", err)
	}
	for _, h := range elsewhere.hits() {
		if strings.Contains(h, "svc-secret") || strings.Contains(h, "/token") {
			t.Fatalf("the token request was re-sent to another origin: %q", h)
		}
	}
}
