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

	// The last upstream checked and its lookup.
	looked bool
	up     *Upstream
	gr     *Grant
	d      *Discovery // only looked up without a grant
	pair   *pair
}

// guards are released Guards, reused so that a decision allocates none.
var guards = sync.Pool{New: func() any { return new(Guard) }}

// Guard returns a Guard of p for one decision. resolve names the OAuth
// upstream of a server (false for one without OAuth, which Guard always
// admits); all Guards of one Client must be given the same resolve (its
// answers are memoized in the Expects checked). Release it when the
// decision is made.
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
	up, ok := g.upstreamOf(server, x)
	if !ok {
		return Rejection{}, true
	}
	if !g.looked || g.up != up {
		g.lookup(up, x.memo)
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

// upstreamOf resolves server, the server of the entry x was compiled for:
// from x's memo when this Client resolved it before (the resolve function
// of a Client's Guards names its configuration's upstreams, which a
// configuration change replaces together with the Expects).
func (g *Guard) upstreamOf(server string, x *Expect) (*Upstream, bool) {
	m := x.memo
	if m == nil {
		return g.resolve(server)
	}
	if r := m.up.Load(); r != nil && r.c == g.c {
		return r.up, r.ok
	}
	up, ok := g.resolve(server)
	m.up.Store(&resolved{c: g.c, up: up, ok: ok})
	return up, ok
}

// lookup loads the principal's state at up: its pair from m (the memo of
// the Expect checked) when m remembers this Client's pair of the same
// owner, else under the lock (remembering it in m), and the discovery
// only when no grant is held. With a grant and a remembered pair it takes
// no lock and allocates nothing (pairs live as long as their Client).
func (g *Guard) lookup(up *Upstream, m *memo) {
	c := g.c
	owner := Owner(g.p, up)
	g.looked, g.up = true, up
	g.pair = nil
	if m != nil {
		if r := m.pair.Load(); r != nil && r.c == c && r.up == up && r.owner == owner {
			g.pair = r.pr
		}
	}
	if g.pair != nil {
		if g.gr, g.d = g.pair.cur.Load(), nil; g.gr != nil {
			return
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if g.pair == nil {
		g.pair = c.pairLocked(pairKey{owner, up.Name})
		if m != nil {
			m.pair.Store(&pairRef{c: c, up: up, owner: owner, pr: g.pair})
		}
	}
	g.gr = g.pair.cur.Load()
	g.d = c.disc[up.Name]
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
