package access

import (
	"context"
	"encoding/json"
	"io"
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
		if x.Scheme != "bearer" && x.Scheme != "dpop" {
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
	// ChallengeScopes are the scope of the 401 challenge that led to this
	// discovery, if it named any.
	ChallengeScopes []string
	// Issuer is the chosen authorization server's issuer (its metadata's).
	Issuer        string
	TokenEndpoint string
	// DPoPAlgs are the protected resource's dpop_signing_alg_values_supported
	// (empty: not stated).
	DPoPAlgs []string
	JWKSURI  string
	// IntrospectionEndpoint is the metadata's RFC 7662 endpoint, if any.
	IntrospectionEndpoint string
	AuthMethods           []string
	// The authorization-code flow's: endpoints, whether client ID metadata
	// documents and the RFC 9207 iss parameter are supported, and the
	// authorization server's scopes_supported.
	AuthorizationEndpoint string
	RegistrationEndpoint  string
	CIMDSupported         bool
	IssParameter          bool
	ServerScopes          []string
}

// sameIssuer compares issuer identifiers, ignoring one trailing slash
// (as the go-sdk's metadata validation does).
func sameIssuer(a, b string) bool { return strings.TrimSuffix(a, "/") == strings.TrimSuffix(b, "/") }

// notFound reports whether a go-sdk metadata fetch failed with HTTP 404
// (its error type is unexported; TestLegacyDiscovery pins the text).
func notFound(err error) bool { return err != nil && strings.Contains(err.Error(), "bad status 404") }

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
	absent := true // every location answered 404
	urls := resourcemeta.URLs(ru, hdr)
	for i, mu := range urls {
		m, err := oauthex.GetProtectedResourceMetadata(ctx, mu, resource, hc)
		if err != nil && i == len(urls)-1 && ru.Path != "" {
			// The root location may describe the origin as the resource
			// (RFC 9728 §3.3: the identifier the location was formed from).
			m, err = oauthex.GetProtectedResourceMetadata(ctx, mu, ru.Scheme+"://"+ru.Host, hc)
		}
		if err == nil && m != nil {
			prm = m
			break
		}
		absent = absent && notFound(err)
	}
	if prm == nil && absent {
		return legacyDiscover(ctx, hc, ru, issuer)
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
	if !sameIssuer(asm.Issuer, as) {
		return nil, notReady(ReasonIssuerMismatch, "the authorization server's metadata names another issuer")
	}
	return discovery(prm, asm), nil
}

// discovery is what prm and asm say.
func discovery(prm *oauthex.ProtectedResourceMetadata, asm *oauthex.AuthServerMeta) *Discovery {
	return &Discovery{
		Resource:              prm.Resource,
		AuthorizationServers:  prm.AuthorizationServers,
		ScopesSupported:       prm.ScopesSupported,
		Issuer:                asm.Issuer,
		TokenEndpoint:         asm.TokenEndpoint,
		JWKSURI:               asm.JWKSURI,
		AuthMethods:           asm.TokenEndpointAuthMethodsSupported,
		IntrospectionEndpoint: asm.IntrospectionEndpoint,

		AuthorizationEndpoint: asm.AuthorizationEndpoint,
		RegistrationEndpoint:  asm.RegistrationEndpoint,
		CIMDSupported:         asm.ClientIDMetadataDocumentSupported,
		IssParameter:          asm.AuthorizationResponseIssParameterSupported,
		ServerScopes:          asm.ScopesSupported,
		DPoPAlgs:              prm.DPOPSigningAlgValuesSupported,
	}
}

// maxMetadata bounds a metadata document.
const maxMetadata = 1 << 20

// legacyDiscover is the discovery of a 2025-03-26 server, which publishes
// no protected-resource metadata: its origin is its authorization server,
// whose RFC 8414 metadata is at the origin's well-known URI (its issuer
// and endpoints must be on that origin; that version did not require the
// issuer to be the origin itself), else the default endpoints /authorize,
// /token and /register. issuer, when set, must be the one found.
func legacyDiscover(ctx context.Context, hc *http.Client, ru *url.URL, issuer string) (*Discovery, error) {
	origin := ru.Scheme + "://" + ru.Host
	asm := &oauthex.AuthServerMeta{Issuer: origin, AuthorizationEndpoint: origin + "/authorize",
		TokenEndpoint: origin + "/token", RegistrationEndpoint: origin + "/register"}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, origin+"/.well-known/oauth-authorization-server", nil)
	if err != nil {
		return nil, notReady(ReasonMetadataInvalid, "the upstream URL does not parse")
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, notReady(ReasonASMetadataInvalid, "the authorization server is unreachable")
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusNotFound:
	case http.StatusOK:
		var m oauthex.AuthServerMeta
		if json.NewDecoder(io.LimitReader(resp.Body, maxMetadata)).Decode(&m) != nil || m.TokenEndpoint == "" {
			return nil, notReady(ReasonASMetadataInvalid, "the authorization server's metadata (RFC 8414) is malformed")
		}
		for _, u := range []string{m.Issuer, m.AuthorizationEndpoint, m.TokenEndpoint, m.RegistrationEndpoint, m.JWKSURI} {
			if u != "" && u != origin && !strings.HasPrefix(u, origin+"/") {
				return nil, notReady(ReasonIssuerMismatch, "the 2025-03-26 authorization server's metadata names another origin")
			}
		}
		asm = &m
	default:
		return nil, notReady(ReasonASMetadataInvalid, "the authorization server's metadata answered HTTP %d", resp.StatusCode)
	}
	if issuer != "" && !sameIssuer(issuer, asm.Issuer) {
		return &Discovery{AuthorizationServers: []string{asm.Issuer}, Issuer: asm.Issuer},
			notReady(ReasonIssuerMismatch, "the upstream's authorization server is not the configured issuer")
	}
	return discovery(&oauthex.ProtectedResourceMetadata{Resource: ru.String(), AuthorizationServers: []string{asm.Issuer}}, asm), nil
}
