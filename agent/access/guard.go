package access

import (
	"slices"
	"time"

	"github.com/mcpready/mcpready/readiness"
)

// Guard is the decision's per-call view of one principal's access: it
// checks, without I/O, the token that would be presented to an upstream
// (decision step 2) and remembers what the decision admitted so that
// Transport checks a token obtained afterwards against the same facts.
type Guard struct {
	c       *Client
	p       Principal
	resolve func(server string) (*Upstream, bool)
}

// Guard returns the Guard of p. resolve names the OAuth upstream of a
// server (false for one without OAuth, which Guard always admits).
func (c *Client) Guard(p Principal, resolve func(server string) (*Upstream, bool)) *Guard {
	return &Guard{c: c, p: p, resolve: resolve}
}

// Check checks the access of a call to server against x: the cached
// token's facts with Check; without a token, the issuer the protected
// resource named (if discovered) against x's issuers, so a resource that
// names a foreign issuer stays ineligible until the Declaration changes.
func (g *Guard) Check(server string, x *Expect, now time.Time) (Rejection, bool) {
	up, ok := g.resolve(server)
	if !ok {
		return Rejection{}, true
	}
	pk := g.c.principalOf(g.p, up)
	c := g.c
	c.mu.Lock()
	c.expects[pk] = x
	gr := c.grants[grantKey{pk, joined(c.selectionLocked(pk, up))}]
	d := c.disc[up.Name]
	c.mu.Unlock()
	if gr != nil {
		return Check(&gr.Facts, x, now)
	}
	if d != nil {
		if up.OAuth.Issuer != "" && !slices.Contains(d.AuthorizationServers, up.OAuth.Issuer) {
			return Rejection{readiness.CodeIssuerMismatch, "the protected resource names another authorization server than the configured issuer"}, false
		}
		return checkIssuer(d.Issuer, d.AuthorizationServers, x)
	}
	return Rejection{}, true
}

func (c *Client) admitted(p Principal, up *Upstream) *Expect {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.expects[c.principalOf(p, up)]
}
