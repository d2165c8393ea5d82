package upstream

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpready/mcpready/agent/config"
	"github.com/mcpready/mcpready/agent/internal/mcptest"
	"github.com/mcpready/mcpready/agent/validate"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
)

// The pinned upstream redirects to another origin: the agent never follows,
// so the other origin sees neither the bearer token nor the call, and the
// failure is a network-identity failure at the reachability layer. Each
// case redirects a different request: initialize (at connect), tools/call
// (the fast path) and tools/list (the go-sdk client path).
func TestRedirectToAnotherOriginRefused(t *testing.T) {
	const secret = "upstream-bearer-s3cr3t"
	t.Setenv("MCPREADY_TEST_UPSTREAM_TOKEN", secret)
	for _, method := range []string{"initialize", "tools/call", "tools/list"} {
		t.Run(method, func(t *testing.T) {
			var seen, sawToken atomic.Int64
			other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				seen.Add(1)
				if r.Header.Get("Authorization") != "" {
					sawToken.Add(1)
				}
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"other origin"}]}}`))
			}))
			defer other.Close()
			up := mcptest.New(t, mcptest.Options{})
			up.RedirectTo(other.URL + "/mcp?sig=" + secret) // a query may carry credentials: never recorded
			p := NewPool(Options{Resolve: func(Target) (config.Upstream, bool) {
				return config.Upstream{Name: "t", URL: up.URL, TokenEnv: "MCPREADY_TEST_UPSTREAM_TOKEN"}, true
			}})
			defer p.Close()
			ctx := context.Background()
			var err error
			if method == "initialize" {
				up.SetFault(mcptest.FaultRedirect, method)
				_, err = p.Shared(ctx, Target{Server: "t"})
			} else {
				s, cerr := p.Shared(ctx, Target{Server: "t"})
				if cerr != nil {
					t.Fatal(cerr)
				}
				up.SetFault(mcptest.FaultRedirect, method)
				if method == "tools/call" {
					var res *mcp.CallToolResult
					res, err = s.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi"}})
					if err == nil {
						t.Fatalf("redirected call answered: %+v", res.Content)
					}
				} else {
					_, err = s.ListTools(ctx)
				}
			}
			if up.Hits() == 0 {
				t.Fatal("the pinned upstream was never asked")
			}
			if seen.Load() != 0 || sawToken.Load() != 0 {
				t.Fatalf("other origin saw %d requests, %d with the bearer token", seen.Load(), sawToken.Load())
			}
			var f *validate.Outcome
			if !errors.As(err, &f) || !errors.Is(err, validate.ErrNetworkIdentity) {
				t.Fatalf("got %v, want a network-identity failure", err)
			}
			if f.Layer != mcpreadyv1.ReadinessLayer_READINESS_LAYER_REACHABILITY || f.Class != mcpreadyv1.OutcomeClass_OUTCOME_CLASS_TRANSPORT_FAILURE {
				t.Fatalf("classified %v at %v", f.Class, f.Layer)
			}
			var re *RedirectError
			if !errors.As(err, &re) || re.Target != other.URL+"/mcp" || !strings.Contains(f.Detail, other.URL) || strings.Contains(err.Error(), secret) {
				t.Fatalf("redirect target %+v, detail %q: want %s/mcp named", re, f.Detail, other.URL)
			}
		})
	}
}
