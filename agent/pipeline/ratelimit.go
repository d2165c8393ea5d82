package pipeline

// Provider rate-limit hints on the call path: the RateLimit and
// RateLimit-Policy fields of each upstream response (quota.ParseRateLimit)
// mark the route's endpoint exhausted until the reset they give, and a
// later call ranks such a route after the others. A hint never refuses a
// call or reserves anything: with every route marked, the order is kept.

import (
	"context"
	"net/http"
	"time"

	"github.com/mcpready/mcpready/agent/decide"
	"github.com/mcpready/mcpready/agent/quota"
	"github.com/mcpready/mcpready/agent/upstream"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/readiness"
)

// observeRateLimit makes the responses to route r's requests under ctx
// update r's hints; a malformed field is ignored.
func (p *Pipeline) observeRateLimit(ctx context.Context, r decide.Route) context.Context {
	key := r.Identity.GetEndpoint()
	return upstream.WithResponseHeaders(ctx, func(h http.Header) {
		hints, err := quota.ParseRateLimit(h.Get(rateLimitField), h.Get(rateLimitPolicyField))
		if err == nil && hints != nil {
			p.hints.Observe(key, hints, p.opts.Now())
		}
	})
}

// The rate-limit fields' canonical keys (http.CanonicalHeaderKey):
// Header.Get returns an already canonical key as it is, where it would
// allocate the canonical form of "RateLimit" for every response.
const (
	rateLimitField       = "Ratelimit"
	rateLimitPolicyField = "Ratelimit-Policy"
)

// rankByHints moves the routes whose endpoint's last hint said its quota
// is spent after the others, keeping the order within each group, and
// returns an action per route moved (for the receipt). d's routes are
// shared, so a reordered list is a new slice.
func (p *Pipeline) rankByHints(d *decide.Decision, now time.Time) []*mcpreadyv1.Action {
	var spent []int
	for i := range d.Routes {
		if p.hints.Exhausted(d.Routes[i].Identity.GetEndpoint(), now) {
			spent = append(spent, i)
		}
	}
	if len(spent) == 0 || len(spent) == len(d.Routes) {
		return nil
	}
	out := make([]decide.Route, 0, len(d.Routes))
	j := 0
	for i := range d.Routes {
		if j < len(spent) && spent[j] == i {
			j++
			continue
		}
		out = append(out, d.Routes[i])
	}
	var acts []*mcpreadyv1.Action
	for _, i := range spent {
		out = append(out, d.Routes[i])
		acts = append(acts, readiness.NewAction(readiness.ActionRateLimitHint, d.Routes[i].Entry))
	}
	d.Routes = out
	return acts
}
