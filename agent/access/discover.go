package access

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/mcpready/mcpready/internal/resourcemeta"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// Challenge is what a 401 or 403 answer's WWW-Authenticate says.
type Challenge struct {
	// Scopes of the challenge's scope parameter.
	Scopes []string
	// Error is the error parameter, e.g. "insufficient_scope".
	Error string
}

// ParseChallenge reads the Bearer challenge of WWW-Authenticate headers;
// a malformed or absent header is the zero Challenge.
func ParseChallenge(h http.Header) Challenge {
	var c Challenge
	cs, err := oauthex.ParseWWWAuthenticate(h.Values("WWW-Authenticate"))
	if err != nil {
		return c
	}
	for _, x := range cs {
		if x.Scheme != "bearer" {
			continue
		}
		c.Scopes = strings.Fields(x.Params["scope"])
		c.Error = x.Params["error"]
		return c
	}
	return c
}

// Discovery is what the agent learned about an upstream's authorization.
type Discovery struct {
	// Resource is the protected resource's identifier (RFC 9728 resource).
	Resource string
	// AuthorizationServers the protected resource names.
	AuthorizationServers []string
	// ScopesSupported by the protected resource.
	ScopesSupported []string
	// Issuer is the chosen authorization server's issuer (its metadata's).
	Issuer        string
	TokenEndpoint string
	JWKSURI       string
	// IntrospectionEndpoint is the metadata's RFC 7662 endpoint, if any.
	IntrospectionEndpoint string
	AuthMethods           []string
}

// discover fetches the protected-resource metadata of resource (the
// challenge's resource_metadata, then the well-known URIs) and the metadata of the authorization server it names;
// issuer, when set, must be among those named (else the Discovery of what
// was named comes back with the issuer_mismatch error).
func discover(ctx context.Context, hc *http.Client, resource string, hdr http.Header, issuer string) (*Discovery, error) {
	ru, err := url.Parse(resource)
	if err != nil {
		return nil, notReady(ReasonMetadataInvalid, "the upstream URL does not parse")
	}
	var prm *oauthex.ProtectedResourceMetadata
	for _, mu := range resourcemeta.URLs(ru, hdr) {
		m, err := oauthex.GetProtectedResourceMetadata(ctx, mu, resource, hc)
		if err == nil && m != nil {
			prm = m
			break
		}
	}
	if prm == nil {
		return nil, notReady(ReasonMetadataInvalid, "no valid protected-resource metadata (RFC 9728) for the upstream")
	}
	if len(prm.AuthorizationServers) == 0 {
		return nil, notReady(ReasonMetadataInvalid, "the protected-resource metadata names no authorization server")
	}
	as := prm.AuthorizationServers[0]
	if issuer != "" {
		if !slices.Contains(prm.AuthorizationServers, issuer) {
			named := &Discovery{Resource: prm.Resource, AuthorizationServers: prm.AuthorizationServers, Issuer: as}
			return named, notReady(ReasonIssuerMismatch, "the protected resource names %d authorization server(s), not the configured issuer", len(prm.AuthorizationServers))
		}
		as = issuer
	}
	asm, err := auth.GetAuthServerMetadata(ctx, as, hc)
	if err != nil || asm == nil || asm.TokenEndpoint == "" {
		return nil, notReady(ReasonASMetadataInvalid, "the authorization server's metadata (RFC 8414 / OpenID) is missing or invalid")
	}
	if asm.Issuer != as {
		return nil, notReady(ReasonIssuerMismatch, "the authorization server's metadata names another issuer")
	}
	return &Discovery{
		Resource:              prm.Resource,
		AuthorizationServers:  prm.AuthorizationServers,
		ScopesSupported:       prm.ScopesSupported,
		Issuer:                asm.Issuer,
		TokenEndpoint:         asm.TokenEndpoint,
		JWKSURI:               asm.JWKSURI,
		IntrospectionEndpoint: asm.IntrospectionEndpoint,
		AuthMethods:           asm.TokenEndpointAuthMethodsSupported,
	}, nil
}
