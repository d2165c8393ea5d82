package pipeline

import (
	"context"

	"github.com/mcpready/mcpready/agent/access"
	"github.com/mcpready/mcpready/agent/decide"
)

// accessGuard is the decision's per-call access check for c: the cached
// upstream tokens of c's principal (nil without Options.Access).
func (p *Pipeline) accessGuard(c Caller) decide.AccessGuard {
	if p.opts.Access == nil {
		return nil
	}
	return p.opts.Access.Guard(access.Principal{Name: c.Name}, p.opts.AccessUpstream)
}

// withPrincipal makes the upstream requests of ctx act for c (the access
// transport reads it to pick c's tokens).
func withPrincipal(ctx context.Context, c Caller) context.Context {
	return access.WithPrincipal(ctx, access.Principal{Name: c.Name, SubjectToken: c.SubjectToken})
}
