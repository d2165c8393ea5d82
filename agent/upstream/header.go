package upstream

import (
	"context"
	"net/http"
)

type headerKey struct{}

// WithHeader returns ctx carrying one more HTTP header for the upstream
// requests made under it (a tools/call's idempotency key, in the header the
// provider's Declaration names). Session.Do keeps these headers across its
// value isolation; the connection's own headers and credentials are set
// after them and win.
func WithHeader(ctx context.Context, name, value string) context.Context {
	h := headersOf(ctx).Clone()
	if h == nil {
		h = http.Header{}
	}
	h.Set(name, value)
	return context.WithValue(ctx, headerKey{}, h)
}

func headersOf(ctx context.Context) http.Header {
	h, _ := ctx.Value(headerKey{}).(http.Header)
	return h
}
