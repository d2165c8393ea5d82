package redirect

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
)

// A client with SameOrigin follows redirects within the origin, at most
// Max of them, and never reaches another origin.
func TestSameOrigin(t *testing.T) {
	var reached atomic.Bool
	other := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { reached.Store(true) }))
	defer other.Close()
	var hops atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/loop":
			hops.Add(1)
			http.Redirect(w, r, "/loop", http.StatusFound)
		case "/three":
			http.Redirect(w, r, "/two", http.StatusFound)
		case "/two":
			http.Redirect(w, r, "/one", http.StatusFound)
		case "/one":
			http.Redirect(w, r, "/ok", http.StatusFound)
		case "/away":
			http.Redirect(w, r, other.URL+"/x", http.StatusTemporaryRedirect)
		}
	}))
	defer srv.Close()
	c := &http.Client{CheckRedirect: SameOrigin}
	resp, err := c.Get(srv.URL + "/three")
	if err != nil || resp.Request.URL.Path != "/ok" {
		t.Fatalf("three redirects within the origin: %v", err)
	}
	resp.Body.Close()
	if _, err := c.Get(srv.URL + "/loop"); !errors.Is(err, ErrTooMany) || hops.Load() != Max+1 {
		t.Fatalf("loop: %v after %d requests", err, hops.Load())
	}
	if _, err := c.Get(srv.URL + "/away"); !errors.Is(err, ErrCrossOrigin) || reached.Load() {
		t.Fatalf("another origin: %v, reached %v", err, reached.Load())
	}
}
