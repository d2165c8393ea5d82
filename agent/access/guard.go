package access

import (
	"slices"
	"sync"
	"time"

	"github.com/mcpready/mcpready/readiness"
)

// Guard is the decision's per-call view of one principal's access: it
// checks, without I/O, the token that would be presented to an upstream
// (decision step 2) and remembers what the decision admitted so that
// Transport checks a token obtained afterwards against the same facts.
// A Guard serves one decision (it caches the lookup of the last upstream
// checked) and is not safe for concurrent use.
type Guard struct {
	c       *Client
	p       Principal
	resolve func(server string) (*Upstream, bool)

	// The last server checked and its upstream's lookup.
	server string
	looked bool
	up     *Upstream
	gr     *Grant
	d      *Discovery
	pair   *pair
}

// guards are released Guards, reused so that a decision allocates none.
var guards = sync.Pool{New: func() any { return new(Guard) }}

// Guard returns a Guard of p for one decision. resolve names the OAuth
// upstream of a server (false for one without OAuth, which Guard always
// admits). Release it when the decision is made.
func (c *Client) Guard(p Principal, resolve func(server string) (*Upstream, bool)) *Guard {
	g := guards.Get().(*Guard)
	*g = Guard{c: c, p: p, resolve: resolve}
	return g
}

// Release hands g back for a later decision's Guard; g must not be used
// afterwards. A Guard that is never released is simply collected.
func (g *Guard) Release() {
	*g = Guard{}
	guards.Put(g)
}

// Check checks the access of a call to server against x: the cached
// token's facts with Check; without a token, the issuer the protected
// resource named (if discovered) against x's issuers, so a resource that
// names a foreign issuer stays ineligible until the Declaration changes.
func (g *Guard) Check(server string, x *Expect, now time.Time) (Rejection, bool) {
	if !g.looked || g.server != server {
		g.lookup(server)
	}
	g.server = server
	if g.up == nil {
		return Rejection{}, true
	}
	g.pair.expect.Store(x)
	if g.gr != nil {
		return checkMemo(&g.gr.Facts, x, now)
	}
	if d := g.d; d != nil {
		if g.up.OAuth.Issuer != "" && !slices.Contains(d.AuthorizationServers, g.up.OAuth.Issuer) {
			return Rejection{readiness.CodeIssuerMismatch, "the protected resource names another authorization server than the configured issuer"}, false
		}
		return checkIssuer(d.Issuer, d.AuthorizationServers, x)
	}
	return Rejection{}, true
}

func (g *Guard) lookup(server string) {
	up, ok := g.resolve(server)
	if ok && g.looked && up == g.up {
		return // another server of the same upstream
	}
	g.looked, g.up, g.gr, g.d, g.pair = true, nil, nil, nil, nil
	if !ok {
		return
	}
	c := g.c
	pk := c.principalOf(g.p, up)
	c.mu.Lock()
	defer c.mu.Unlock()
	g.up = up
	g.gr = c.grantLocked(pk, up)
	g.d = c.disc[up.Name]
	g.pair = c.pairLocked(pk)
}

// admitted is what the decision last admitted for p at up, nil if nothing.
func (c *Client) admitted(p Principal, up *Upstream) *Expect {
	c.mu.Lock()
	pr := c.pairs[c.principalOf(p, up)]
	c.mu.Unlock()
	if pr == nil {
		return nil
	}
	return pr.expect.Load()
}
