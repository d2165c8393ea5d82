package pipeline

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/mcpready/mcpready/agent/decide"
	"github.com/mcpready/mcpready/agent/quota"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
)

// BenchmarkCallBookkeeping is what cold/warm and RateLimit hints add to
// one call with two routes: ranking by hints, one session touch, the
// response observer's context and one response without RateLimit fields.
func BenchmarkCallBookkeeping(b *testing.B) {
	p := New(Options{})
	routes := []decide.Route{{Entry: "a", Identity: &mcpreadyv1.ToolIdentity{Endpoint: "https://a/mcp"}},
		{Entry: "b", Identity: &mcpreadyv1.ToolIdentity{Endpoint: "https://b/mcp"}}}
	session, h, ctx := new(int), http.Header{"Content-Type": {"application/json"}}, context.Background()
	for b.Loop() {
		now := time.Now()
		d := decide.Decision{Routes: routes}
		p.rankByHints(&d, now)
		p.warm.touch(session, now)
		_ = p.observeRateLimit(ctx, d.Routes[0])
		if hints, err := quota.ParseRateLimit(h.Get(rateLimitField), h.Get(rateLimitPolicyField)); err == nil && hints != nil {
			b.Fatal("hints from a response without RateLimit fields")
		}
	}
}
