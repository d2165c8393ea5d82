package upstream

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/mcpready/mcpready/agent/access"
	"github.com/mcpready/mcpready/agent/config"
	"github.com/mcpready/mcpready/agent/validate"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
)

// credentialed is the transport of an HTTP upstream: the pool's, through
// Options.Access when the upstream has OAuth settings (tokens per request
// and principal, authorization on 401/403).
func (p *Pool) credentialed(server string, up config.Upstream) (http.RoundTripper, error) {
	if up.OAuth == nil {
		return p.opts.Transport, nil
	}
	if p.opts.Access == nil {
		return nil, fmt.Errorf("%w %q: oauth is configured but the pool has no access client", ErrUnknownUpstream, server)
	}
	return p.opts.Access.Transport(p.opts.Transport, access.Upstream{Name: server, URL: up.URL, OAuth: *up.OAuth}), nil
}

// owner is whose token requests of ctx present at t (access.Owner), ""
// for an upstream without oauth.
func (p *Pool) owner(ctx context.Context, t Target) string {
	up, ok := p.opts.Resolve(t)
	if !ok || up.OAuth == nil {
		return ""
	}
	return access.Owner(access.PrincipalFrom(ctx), &access.Upstream{Name: t.Server, URL: up.URL, OAuth: *up.OAuth})
}

// accessOutcome classifies a request the access layer refused before or
// after sending it: ACCESS_NOT_READY with the access reason, nil for
// another error.
func accessOutcome(err error, sent bool) *validate.Outcome {
	if !errors.Is(err, access.ErrNotReady) {
		return nil
	}
	reason := string(access.ReasonOf(err))
	var rj *access.RejectedError
	if errors.As(err, &rj) {
		reason = string(rj.Rejection.Code)
	}
	return &validate.Outcome{Class: mcpreadyv1.OutcomeClass_OUTCOME_CLASS_ACCESS_NOT_READY, Layer: mcpreadyv1.ReadinessLayer_READINESS_LAYER_ACCESS,
		Sent: sent, Err: fmt.Errorf("%w: %s", validate.ErrAccess, reason), From: "upstream", Detail: "access not ready: " + reason}
}

// carryPrincipal gives to the access principal of from (the principal whose
// token the upstream request presents), if any.
func carryPrincipal(from, to context.Context) context.Context {
	if p := access.PrincipalFrom(from); p != (access.Principal{}) {
		return access.WithPrincipal(to, p)
	}
	return to
}
