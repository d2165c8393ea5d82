package pipeline

import (
	"context"

	"github.com/mcpready/mcpready/agent/access"
	"github.com/mcpready/mcpready/agent/decide"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
)

// accessGuard is the decision's per-call access check for c: the cached
// upstream tokens of c's principal (nil without Options.Access).
func (p *Pipeline) accessGuard(c Caller) decide.AccessGuard {
	if p.opts.Access == nil {
		return nil
	}
	return p.opts.Access.Guard(access.Principal{Name: c.Name}, p.opts.AccessUpstream)
}

// releaseGuard hands the access guard of a decision request back once the
// decision is made (the decision keeps no reference to it).
func releaseGuard(r *decide.Request) {
	if g, ok := r.Access.(*access.Guard); ok {
		r.Access = nil
		g.Release()
	}
}

// withPrincipal makes the upstream requests of ctx act for c (the access
// transport reads it to pick c's tokens), keeping the principal at at.
func withPrincipal(ctx context.Context, c Caller, at *access.Principal) context.Context {
	*at = access.Principal{Name: c.Name, SubjectToken: c.SubjectToken}
	return access.WithPrincipalAt(ctx, at)
}

// accessFacts are the facts of the token c's calls present to server, for
// the receipt (nil when the server has no OAuth or no token is held); the
// clock is read only for a token's facts.
func (p *Pipeline) accessFacts(c Caller, server string) *mcpreadyv1.AccessFacts {
	if p.opts.Access == nil {
		return nil
	}
	up, ok := p.opts.AccessUpstream(server)
	if !ok {
		return nil
	}
	g := p.opts.Access.Lookup(access.Principal{Name: c.Name}, up)
	if g == nil {
		return nil
	}
	f := &g.Facts
	return &mcpreadyv1.AccessFacts{Issuer: f.Issuer, Audience: f.Audience, GrantedScopes: f.Scopes,
		LifetimeClass: access.LifetimeClass(f.Expiry, p.opts.Now()), Grant: up.OAuth.Grant, Verification: f.Verification()}
}
