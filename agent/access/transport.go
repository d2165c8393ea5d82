package access

import (
	"context"
	"io"
	"net/http"
)

type principalKey struct{}

// WithPrincipal returns ctx carrying the local principal the requests made
// with it act for (set by the front, read by Transport).
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	return WithPrincipalAt(ctx, &p)
}

// WithPrincipalAt is WithPrincipal with the principal where the caller
// keeps it, unchanged while ctx is in use: a context value holding a
// Principal itself would box it, one allocation more per call.
func WithPrincipalAt(ctx context.Context, p *Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// PrincipalFrom returns the principal WithPrincipal stored, the zero
// Principal (the agent itself) when none.
func PrincipalFrom(ctx context.Context) Principal {
	if p, ok := ctx.Value(principalKey{}).(*Principal); ok {
		return *p
	}
	return Principal{}
}

// Transport returns a RoundTripper that presents c's token for up and the
// request context's principal on every request through base, after
// checking it against what the decision admitted (Guard), and on a 401 or
// insufficient_scope 403 authorizes again and resends the request once.
// A request it cannot authorize fails with a NotReadyError or a
// *RejectedError; neither contains the token.
func (c *Client) Transport(base http.RoundTripper, up Upstream) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return &transport{c: c, up: up, base: base}
}

type transport struct {
	c    *Client
	up   Upstream
	base http.RoundTripper
}

// RejectedError is a token that failed the per-call check at the moment
// of presenting it.
type RejectedError struct{ Rejection Rejection }

func (e *RejectedError) Error() string {
	return "ACCESS_NOT_READY: " + string(e.Rejection.Code) + ": " + e.Rejection.Detail
}

// Unwrap makes errors.Is(err, ErrNotReady) hold.
func (e *RejectedError) Unwrap() error { return ErrNotReady }

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	p := PrincipalFrom(ctx)
	var g *Grant
	var err error
	if !t.c.challengeFirst(p, &t.up) {
		if g, err = t.c.Token(ctx, p, &t.up); err != nil {
			return nil, err
		}
	}
	resp, err := t.send(req, p, g)
	if err != nil || !refused(resp) {
		if err == nil {
			g.succeeded()
		}
		return resp, err
	}
	if req.Body != nil && req.GetBody == nil {
		return resp, nil // cannot be resent
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	_ = resp.Body.Close()
	if g, err = t.c.Authorize(ctx, p, &t.up, g, resp.StatusCode, resp.Header); err != nil {
		return nil, err
	}
	again := req.Clone(ctx)
	if req.GetBody != nil {
		if again.Body, err = req.GetBody(); err != nil {
			return nil, err
		}
	}
	if resp, err = t.send(again, p, g); err == nil && !refused(resp) {
		g.succeeded()
	}
	return resp, err
}

// refused reports whether resp refused the token it was sent with.
func refused(resp *http.Response) bool {
	return resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden
}

// send checks g against the admitted expectation (and an introspected
// token's activity) and sends req with it (without a token when g is nil).
func (t *transport) send(req *http.Request, p Principal, g *Grant) (*http.Response, error) {
	if g == nil {
		return t.base.RoundTrip(req)
	}
	if x := t.c.admitted(p, &t.up); x != nil {
		if rj, ok := checkMemo(&g.Facts, x, t.c.o.Now()); !ok {
			return nil, &RejectedError{rj}
		}
	}
	if err := t.c.stillActive(req.Context(), g, &t.up); err != nil {
		return nil, err
	}
	return t.c.present(t.base, req, g, &t.up)
}
