package upstream

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/mcpready/mcpready/agent/config"
	"github.com/mcpready/mcpready/agent/validate"
)

// The server's certificate names example.com and 127.0.0.1, not
// localhost. Pinned at https://localhost:PORT, the agent must refuse it
// even when its TLS configuration names example.com (before, a configured
// ServerName replaced the pinned host and the handshake succeeded); pinned
// at https://127.0.0.1:PORT it is accepted.
func TestTLSIdentityIsThePinnedHost(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"x":1}`))
	}))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	rt := newDirectTransport()
	cfg := srv.Client().Transport.(*http.Transport).TLSClientConfig.Clone()
	cfg.ServerName = "example.com"
	rt.tlsConfig = cfg
	if _, _, err := get(t, rt, context.Background(), "https://localhost:"+u.Port()); err == nil {
		t.Fatal("a certificate not valid for the pinned host was accepted")
	}
	cfg.InsecureSkipVerify = true
	if _, _, err := get(t, rt, context.Background(), "https://localhost:"+u.Port()); err == nil {
		t.Fatal("InsecureSkipVerify in the configuration skipped the pinned host's check")
	}
	if code, _, err := get(t, rt, context.Background(), srv.URL); err != nil || code != 200 {
		t.Fatalf("pinned host the certificate names: %d %v", code, err)
	}
}

// A certificate that does not verify is a classified reachability failure
// that says so.
func TestTLSFailureClassified(t *testing.T) {
	srv := httptest.NewTLSServer(http.NotFoundHandler())
	defer srv.Close()
	p := NewPool(Options{Resolve: func(Target) (config.Upstream, bool) {
		return config.Upstream{Name: "t", URL: srv.URL + "/mcp"}, true
	}})
	defer p.Close()
	_, err := p.Shared(context.Background(), Target{Server: "t"})
	var f *validate.Outcome
	if !errors.As(err, &f) || !strings.Contains(f.Detail, "TLS identity") {
		t.Fatalf("got %v, want a TLS identity failure", err)
	}
}
