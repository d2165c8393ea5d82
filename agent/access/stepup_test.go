package access

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/mcpready/mcpready/agent/config"
	"github.com/mcpready/mcpready/internal/oauthtest"
)

// newStepRig is newRig whose resource requires the scopes of the current
// phase: phases[i] while phase holds i.
func newStepRig(t *testing.T, as *oauthtest.Server, o config.OAuth, phases ...[]string) (*rig, *atomic.Int32) {
	t.Helper()
	phase := &atomic.Int32{}
	r := serveRig(t, as, o, func(url string, h http.Handler) http.Handler {
		var handlers []http.Handler
		for _, scopes := range phases {
			handlers = append(handlers, as.Protect(oauthtest.Resource{URL: url, Scopes: scopes}, h))
		}
		return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) { handlers[phase.Load()].ServeHTTP(w, req) })
	})
	return r, phase
}

// TestStepUpLimitIsPerChallengeSequence: the step-up limit bounds one
// sequence of insufficient_scope challenges, not the life of the process;
// a call that succeeds after stepping up ends the sequence, so a later
// call that needs yet another scope may step up again (before: the
// counter never reset, and after MaxStepUps step-ups in total every
// further one was refused as step-up-exhausted).
func TestStepUpLimitIsPerChallengeSequence(t *testing.T) {
	o, oc := serviceClient(t, "a")
	o.MaxStepUps = 1
	as := oauthtest.Start(t, oauthtest.Options{Clients: []oauthtest.Client{oc}})
	r, phase := newStepRig(t, as, o, []string{"a", "b"}, []string{"a", "b", "c"}, []string{"a", "b", "c", "d"})
	c := New(Options{})
	for i, want := range []string{"a b", "a b c", "a b c d"} {
		phase.Store(int32(i))
		if err := r.call(context.Background(), c); err != nil {
			t.Fatalf("call %d (needs %s): %v", i, want, err)
		}
		if g := c.Lookup(Principal{}, &r.upstream); g == nil || strings.Join(g.Facts.Scopes, " ") != want {
			t.Fatalf("grant after call %d = %+v, want scopes %s", i, g, want)
		}
	}
	// Within one sequence the limit still holds: two challenges for new
	// scopes without a success between them.
	ask := func(sc string) error {
		_, err := c.Authorize(context.Background(), Principal{}, &r.upstream, nil, http.StatusForbidden,
			http.Header{"Www-Authenticate": {`Bearer error="insufficient_scope", scope="` + sc + `"`}})
		return err
	}
	if err := ask("e"); err != nil {
		t.Fatal(err)
	}
	if err := ask("f"); ReasonOf(err) != ReasonStepUpExhausted {
		t.Fatalf("second step-up without a success = %v, want %s", err, ReasonStepUpExhausted)
	}
}

// TestConcurrentInsufficientScope: two requests refused at the same
// moment with insufficient_scope for the same new scope both go through:
// the second finds the selection already stepped up by the first and
// presents that token, without counting a step-up (before, it saw no new
// scope to ask for and failed with step-up-exhausted).
func TestConcurrentInsufficientScope(t *testing.T) {
	o, oc := serviceClient(t, "a")
	as := oauthtest.Start(t, oauthtest.Options{Clients: []oauthtest.Client{oc}})
	phase := &atomic.Int32{}
	var arrived sync.WaitGroup
	arrived.Add(2)
	r := serveRig(t, as, o, func(url string, h http.Handler) http.Handler {
		first := as.Protect(oauthtest.Resource{URL: url, Scopes: []string{"a"}}, h)
		second := as.Protect(oauthtest.Resource{URL: url, Scopes: []string{"a", "b"}}, h)
		var held atomic.Int32
		return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			if phase.Load() == 0 {
				first.ServeHTTP(w, req)
				return
			}
			if req.Method == http.MethodPost && held.Add(1) <= 2 {
				arrived.Done() // both refused requests arrive before either is answered
				arrived.Wait()
			}
			second.ServeHTTP(w, req)
		})
	})
	c := New(Options{})
	hc := &http.Client{Transport: c.Transport(nil, r.upstream)}
	post := func() (int, error) {
		req, err := http.NewRequest(http.MethodPost, r.url, bytes.NewReader([]byte(`{}`)))
		if err != nil {
			return 0, err
		}
		resp, err := hc.Do(req)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	if code, err := post(); err != nil || code == http.StatusUnauthorized || code == http.StatusForbidden {
		t.Fatalf("first request: %d %v", code, err)
	}
	phase.Store(1)
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range 2 {
		wg.Go(func() {
			code, err := post()
			if err == nil && (code == http.StatusUnauthorized || code == http.StatusForbidden) {
				err = fmt.Errorf("answered %d", code)
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("request %d refused at the same moment: %v", i, err)
		}
	}
	if g := c.Lookup(Principal{}, &r.upstream); g == nil || strings.Join(g.Facts.Scopes, " ") != "a b" {
		t.Fatalf("grant after the step-up: %+v", g)
	}
}
