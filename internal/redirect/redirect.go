// Package redirect is the one redirect rule of mcpready's HTTP clients
// that follow redirects at all (authorization servers and metadata,
// probes, the MCP Registry, published artifacts): only within the first
// request's origin, at most Max times. A redirect elsewhere would carry
// the request, and perhaps a credential, to a host nobody chose.
//
// It must not follow or send anything itself; upstream MCP sessions
// follow no redirect at all (agent/upstream).
package redirect

import (
	"errors"
	"net/http"
	"strings"
)

// Max is the most redirects one request follows.
const Max = 3

var (
	// ErrCrossOrigin: a redirect to another scheme or host, not followed.
	ErrCrossOrigin = errors.New("redirect to another origin not followed")
	// ErrTooMany: more than Max redirects.
	ErrTooMany = errors.New("more than 3 redirects")
)

// SameOrigin is an http.Client CheckRedirect that follows a redirect only
// within the origin of the first request, at most Max times.
func SameOrigin(req *http.Request, via []*http.Request) error {
	first := via[0].URL
	switch {
	case !strings.EqualFold(req.URL.Scheme, first.Scheme) || !strings.EqualFold(req.URL.Host, first.Host):
		return ErrCrossOrigin
	case len(via) > Max:
		return ErrTooMany
	}
	return nil
}
