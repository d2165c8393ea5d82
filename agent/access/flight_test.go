package access

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpready/mcpready/internal/oauthtest"
)

// gate holds the token requests that pass through it until released, and
// counts them.
type gate struct {
	base    http.RoundTripper
	release chan struct{}
	mu      sync.Mutex
	n       int
	arrived chan struct{} // receives once per token request
}

func (g *gate) RoundTrip(req *http.Request) (*http.Response, error) {
	if strings.HasSuffix(req.URL.Path, "/oauth/token") {
		g.mu.Lock()
		g.n++
		g.mu.Unlock()
		g.arrived <- struct{}{}
		<-g.release
	}
	return g.base.RoundTrip(req)
}

// TestConcurrentMissesShareOneTokenRequest: callers that miss the cache for
// the same (principal, upstream, scope set) at once wait for one token
// request instead of each making its own (before: every one of them asked
// the authorization server).
func TestConcurrentMissesShareOneTokenRequest(t *testing.T) {
	const callers = 16
	o, oc := serviceClient(t, "read")
	as := oauthtest.Start(t, oauthtest.Options{Clients: []oauthtest.Client{oc}})
	r := newRig(t, as, oauthtest.Resource{Scopes: []string{"read"}}, o)
	g := &gate{base: http.DefaultTransport, release: make(chan struct{}), arrived: make(chan struct{}, callers)}
	c := New(Options{HTTP: &http.Client{Transport: g}})
	// Discovery first, so that every caller goes straight to the token request.
	if _, err := c.discover(context.Background(), &r.upstream, nil); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	grants := make([]*Grant, callers)
	errs := make([]error, callers)
	for i := range callers {
		wg.Go(func() { grants[i], errs[i] = c.Token(context.Background(), Principal{Name: "p"}, &r.upstream) })
	}
	// The first request is held until every caller that would make its
	// own has had the chance to (a second one fails the test at once).
	<-g.arrived
	select {
	case <-g.arrived:
		close(g.release)
		wg.Wait()
		t.Fatalf("concurrent misses made %d token requests, want 1", g.n)
	case <-time.After(500 * time.Millisecond):
	}
	close(g.release)
	wg.Wait()
	for i := range callers {
		if errs[i] != nil || grants[i] != grants[0] {
			t.Fatalf("caller %d: %v (grant %p, want %p)", i, errs[i], grants[i], grants[0])
		}
	}
	if n := as.Issued(); n != 1 {
		t.Fatalf("tokens issued = %d, want 1", n)
	}
}

// TestAbandonedTokenRequestIsNotShared: the caller whose request the
// others wait for gives up (its context ends); they ask again for
// themselves instead of taking its failure as theirs.
func TestAbandonedTokenRequestIsNotShared(t *testing.T) {
	o, oc := serviceClient(t, "read")
	as := oauthtest.Start(t, oauthtest.Options{Clients: []oauthtest.Client{oc}})
	r := newRig(t, as, oauthtest.Resource{Scopes: []string{"read"}}, o)
	g := &gate{base: http.DefaultTransport, release: make(chan struct{}), arrived: make(chan struct{}, 4)}
	c := New(Options{HTTP: &http.Client{Transport: g}})
	if _, err := c.discover(context.Background(), &r.upstream, nil); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	leader := make(chan error, 1)
	go func() { _, err := c.Token(ctx, Principal{}, &r.upstream); leader <- err }()
	<-g.arrived
	waiter := make(chan error, 1)
	go func() { _, err := c.Token(context.Background(), Principal{}, &r.upstream); waiter <- err }()
	time.Sleep(100 * time.Millisecond) // the waiter joins the leader's request (if it has not, it makes its own: the test still passes)
	cancel()
	if err := <-leader; err == nil {
		t.Fatal("the abandoned request returned a token")
	}
	close(g.release)
	if err := <-waiter; err != nil {
		t.Fatalf("the waiter got the abandoned request's failure: %v", err)
	}
}
