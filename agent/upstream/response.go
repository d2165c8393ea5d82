package upstream

import (
	"context"
	"net/http"
)

type responseKey struct{}

// WithResponseHeaders returns ctx under which every HTTP response to an
// upstream request is shown to fn (its headers only, before the body is
// read), e.g. for the provider's RateLimit hints. fn runs on the request's
// goroutine: it must be quick and must not keep h. Session.Do keeps fn
// across its value isolation, like WithHeader's headers.
func WithResponseHeaders(ctx context.Context, fn func(h http.Header)) context.Context {
	return context.WithValue(ctx, responseKey{}, fn)
}

// observeResponse hands h to the observer of ctx, if any.
func observeResponse(ctx context.Context, h http.Header) {
	if fn := observerOf(ctx); fn != nil {
		fn(h)
	}
}

func observerOf(ctx context.Context) func(http.Header) {
	fn, _ := ctx.Value(responseKey{}).(func(http.Header))
	return fn
}
