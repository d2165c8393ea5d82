// Package resourcemeta lists where a protected resource's RFC 9728
// metadata may be found, shared by the prober and the agent's access
// layer. It only builds URLs: it must not fetch or trust anything.
package resourcemeta

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// URLs lists where to look for resource's protected-resource metadata, in
// order: the resource_metadata of hdr's Bearer and DPoP (RFC 9449)
// challenges, then the
// path-specific and the root well-known URIs (RFC 9728 §3.1).
func URLs(resource *url.URL, hdr http.Header) []string {
	var out []string
	if cs, err := oauthex.ParseWWWAuthenticate(hdr.Values("WWW-Authenticate")); err == nil {
		for _, c := range cs {
			if (c.Scheme == "bearer" || c.Scheme == "dpop") && c.Params["resource_metadata"] != "" {
				out = append(out, c.Params["resource_metadata"])
			}
		}
	}
	root := &url.URL{Scheme: resource.Scheme, Host: resource.Host, Path: "/.well-known/oauth-protected-resource"}
	if path := strings.TrimSuffix(resource.Path, "/"); path != "" {
		withPath := *root
		withPath.Path += path
		out = append(out, withPath.String())
	}
	return append(out, root.String())
}
