package probe

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/mcpready/mcpready/internal/resourcemeta"
	"github.com/mcpready/mcpready/readiness"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// access classifies the first answer's status: 401 with valid
// protected-resource metadata (RFC 9728) is access-not-ready, not endpoint
// down; 402 is a billing state; 403 is forbidden.
func (p *run) access(ctx context.Context, status int, hdr http.Header) bool {
	switch status {
	case http.StatusPaymentRequired:
		return p.add(LayerAccess, NotReady, "billing", "HTTP 402: a billing state, not unavailability")
	case http.StatusForbidden:
		return p.add(LayerAccess, NotReady, "forbidden", "HTTP 403")
	case http.StatusUnauthorized:
		return p.unauthorized(ctx, hdr)
	}
	if p.r.AuthClass != readiness.AuthKeyless {
		return p.add(LayerAccess, Ready, "token-accepted", "")
	}
	return p.add(LayerAccess, Ready, "no-auth-required", "")
}

// unauthorized fetches and checks the protected-resource metadata a 401
// points at (its WWW-Authenticate resource_metadata, else the well-known
// locations) and the first authorization server's metadata.
func (p *run) unauthorized(ctx context.Context, hdr http.Header) bool {
	ctx, cancel := context.WithTimeout(ctx, p.o.StepTimeout)
	defer cancel()
	var prm *oauthex.ProtectedResourceMetadata
	for _, mu := range resourcemeta.URLs(p.u, hdr) {
		m, err := oauthex.GetProtectedResourceMetadata(ctx, mu, p.u.String(), p.httpClient())
		if err == nil {
			prm = m
			break
		}
	}
	if prm == nil {
		return p.add(LayerAccess, NotReady, "auth-metadata-invalid", "HTTP 401 without valid protected-resource metadata (RFC 9728)")
	}
	p.r.Issuers = prm.AuthorizationServers
	if len(prm.AuthorizationServers) == 0 {
		return p.add(LayerAccess, NotReady, "auth-metadata-invalid", "the protected-resource metadata names no authorization server")
	}
	if len(p.o.ExpectedIssuers) > 0 && !slices.ContainsFunc(prm.AuthorizationServers, func(s string) bool {
		return slices.Contains(p.o.ExpectedIssuers, s)
	}) {
		return p.add(LayerAccess, NotReady, "foreign-issuer", fmt.Sprintf("the metadata names %d authorization server(s), none of them expected", len(prm.AuthorizationServers)))
	}
	issuer := prm.AuthorizationServers[0]
	asm, err := oauthex.GetAuthServerMeta(ctx, wellKnown(issuer, "oauth-authorization-server"), issuer, p.httpClient())
	if err != nil || asm == nil {
		asm, err = oauthex.GetAuthServerMeta(ctx, wellKnown(issuer, "openid-configuration"), issuer, p.httpClient())
	}
	if err != nil || asm == nil {
		return p.add(LayerAccess, NotReady, "auth-server-metadata-invalid", "the authorization server's metadata (RFC 8414) is missing or invalid")
	}
	reason := "auth-required"
	if p.r.AuthClass != readiness.AuthKeyless {
		reason = "token-refused"
	}
	return p.add(LayerAccess, NotReady, reason, "HTTP 401 with valid protected-resource and authorization-server metadata")
}

// wellKnown inserts /.well-known/<name> into issuer as RFC 8414 §3.1 says.
func wellKnown(issuer, name string) string {
	u, err := url.Parse(issuer)
	if err != nil {
		return issuer
	}
	u.Path = "/.well-known/" + name + strings.TrimSuffix(u.Path, "/")
	return u.String()
}
