package access

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/mcpready/mcpready/agent/config"
	"github.com/mcpready/mcpready/internal/oauthtest"
)

// opaqueRig is an upstream resource whose authorization server issues
// opaque tokens: it serves its protected-resource metadata and answers
// every other request with 200, recording the bearer tokens it was sent.
type opaqueRig struct {
	url    string
	up     Upstream
	mu     sync.Mutex
	tokens []string
}

func newOpaqueRig(t *testing.T, as *oauthtest.Server, o config.OAuth) *opaqueRig {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &opaqueRig{url: "http://" + ln.Addr().String() + "/mcp"}
	meta := auth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{Resource: r.url, AuthorizationServers: []string{as.Issuer}})
	hs := &httptest.Server{Listener: ln, Config: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if strings.HasPrefix(req.URL.Path, "/.well-known/oauth-protected-resource") {
			meta.ServeHTTP(w, req)
			return
		}
		r.mu.Lock()
		r.tokens = append(r.tokens, strings.TrimPrefix(req.Header.Get("Authorization"), "Bearer "))
		r.mu.Unlock()
		w.WriteHeader(http.StatusOK)
	})}}
	hs.Start()
	t.Cleanup(hs.Close)
	r.up = Upstream{Name: "opaque", URL: r.url, OAuth: o}
	return r
}

// get sends one request through c's transport for up.
func (r *opaqueRig) get(c *Client) error {
	req, _ := http.NewRequest(http.MethodGet, r.url, nil)
	resp, err := c.Transport(nil, r.up).RoundTrip(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}

type clock struct{ t atomic.Int64 }

func (c *clock) now() time.Time          { return time.Unix(0, c.t.Load()) }
func (c *clock) advance(d time.Duration) { c.t.Add(int64(d)) }
func newClock() *clock                   { c := &clock{}; c.t.Store(time.Now().UnixNano()); return c }
func opaqueClient(t *testing.T) config.OAuth {
	o, _ := serviceClient(t, "read")
	o.Introspection = &config.Introspection{}
	o.TenantClaim = "tid"
	return o
}

var opaqueAS = oauthtest.Client{ID: "svc", Secret: "svc-secret", Opaque: true, Claims: map[string]any{"tid": "t1"}}

// TestIntrospectionActive: an opaque token is checked by RFC 7662
// introspection at the endpoint the authorization server's metadata names;
// its facts (issuer, audience, scopes, tenant) come from the answer, which
// is reused per token until the cache lapses. Failed before: every opaque
// token was ACCESS_NOT_READY (token-signature-invalid).
func TestIntrospectionActive(t *testing.T) {
	as := oauthtest.Start(t, oauthtest.Options{Clients: []oauthtest.Client{opaqueAS}})
	r := newOpaqueRig(t, as, opaqueClient(t))
	clk := newClock()
	c := New(Options{Now: clk.now})
	for range 3 {
		if err := r.get(c); err != nil {
			t.Fatal(err)
		}
	}
	g := c.Lookup(Principal{}, &r.up)
	if g == nil || g.Facts.Issuer != as.Issuer || g.Facts.Audience[0] != r.url || strings.Join(g.Facts.Scopes, " ") != "read" || g.Facts.Tenant != "t1" {
		t.Fatalf("facts %+v", g)
	}
	if LooksLikeJWT(r.tokens[0]) {
		t.Fatal("the server issued a JWT, not an opaque token")
	}
	if n := as.Introspected(); n != 1 {
		t.Fatalf("%d introspections for one token within the cache TTL, want 1", n)
	}
	clk.advance(61 * time.Second)
	if err := r.get(c); err != nil {
		t.Fatal(err)
	}
	if n := as.Introspected(); n != 2 {
		t.Fatalf("%d introspections after the cache lapsed, want 2", n)
	}

	// Without introspection configured an opaque token stays refused.
	o := opaqueClient(t)
	o.Introspection = nil
	r2 := newOpaqueRig(t, as, o)
	if err := r2.get(New(Options{})); ReasonOf(err) != ReasonSignatureInvalid {
		t.Fatalf("opaque token without introspection: %v", err)
	}
}

// TestIntrospectionInactive: a token the authorization server no longer
// reports active is not presented once the cached answer lapses, and is
// dropped so that the next call obtains another (here inactive too, so
// the call is refused at acquisition). Failed before: no introspection.
func TestIntrospectionInactive(t *testing.T) {
	as := oauthtest.Start(t, oauthtest.Options{Clients: []oauthtest.Client{opaqueAS}})
	r := newOpaqueRig(t, as, opaqueClient(t))
	clk := newClock()
	c := New(Options{Now: clk.now})
	if err := r.get(c); err != nil {
		t.Fatal(err)
	}
	as.RevokeAll()
	clk.advance(61 * time.Second)
	sent := len(r.tokens)
	if err := r.get(c); ReasonOf(err) != ReasonTokenInactive {
		t.Fatalf("revoked token: %v, want %s", err, ReasonTokenInactive)
	}
	if len(r.tokens) != sent || c.Lookup(Principal{}, &r.up) != nil {
		t.Fatalf("the inactive token was presented (%d -> %d) or kept", sent, len(r.tokens))
	}
	if err := r.get(c); ReasonOf(err) != ReasonTokenInactive || as.Issued() != 2 {
		t.Fatalf("next call: %v after %d tokens, want a new token found inactive", err, as.Issued())
	}
}

// TestIntrospectionWrongAudience: an active token whose introspected
// audience is another resource is refused (audience_mismatch) before it
// is cached or presented.
func TestIntrospectionWrongAudience(t *testing.T) {
	as := oauthtest.Start(t, oauthtest.Options{Clients: []oauthtest.Client{opaqueAS}, Audience: "https://other.example/mcp"})
	r := newOpaqueRig(t, as, opaqueClient(t))
	c := New(Options{})
	if err := r.get(c); ReasonOf(err) != ReasonAudienceMismatch || len(r.tokens) != 0 {
		t.Fatalf("wrong audience: %v (presented %d)", err, len(r.tokens))
	}
}

// TestIntrospectionEndpointDown: an unreachable or failing introspection
// endpoint is ACCESS_NOT_READY (introspection-unavailable), never a crash,
// and the error carries neither the token nor the endpoint's text.
func TestIntrospectionEndpointDown(t *testing.T) {
	as := oauthtest.Start(t, oauthtest.Options{Clients: []oauthtest.Client{opaqueAS}})
	var got atomic.Value
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		_ = req.ParseForm()
		got.Store(req.PostForm.Get("token"))
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, "down for token "+req.PostForm.Get("token"))
	}))
	t.Cleanup(echo.Close)
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	for name, endpoint := range map[string]string{"failing": echo.URL, "unreachable": closed.URL, "malformed URL": "http://[::1"} {
		t.Run(name, func(t *testing.T) {
			o := opaqueClient(t)
			o.Introspection.Endpoint = endpoint
			r := newOpaqueRig(t, as, o)
			err := r.get(New(Options{}))
			if ReasonOf(err) != ReasonIntrospectionUnavailable || len(r.tokens) != 0 {
				t.Fatalf("%v (presented %d)", err, len(r.tokens))
			}
			if tok, _ := got.Load().(string); tok != "" && strings.Contains(err.Error(), tok) || strings.Contains(err.Error(), "down for") {
				t.Fatalf("the error carries the token or the endpoint's text: %v", err)
			}
		})
	}
}

func FuzzParseIntrospection(f *testing.F) {
	f.Add([]byte(`{"active":true,"scope":"read","aud":"https://mcp.example/mcp","exp":1900000000,"tid":"t1"}`))
	f.Add([]byte(`{"active":false}`))
	f.Add([]byte(`{"active":"true"}`))
	f.Add([]byte(`{"active":true,"aud":["a","b"],"iss":"https://evil.example"}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		cl, err := ParseIntrospection(body, "https://as.example", time.Time{})
		switch {
		case err == nil && (cl.Issuer != "https://as.example" || cl.Expiry.IsZero()):
			t.Fatalf("accepted %s as %+v", body, cl)
		case err != nil && ReasonOf(err) == "":
			t.Fatalf("untyped error %v", err)
		}
	})
}
