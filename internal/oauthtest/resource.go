package oauthtest

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"github.com/zitadel/oidc/v3/pkg/client/rp"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// Resource describes a protected resource for Protect.
type Resource struct {
	// URL is the resource identifier: the MCP endpoint's URL.
	URL string
	// AuthorizationServers the metadata names; the default is the server
	// the tokens are verified against.
	AuthorizationServers []string
	// Scopes required of every token (the challenge's scope).
	Scopes []string
	// ScopesSupported published in the metadata.
	ScopesSupported []string
}

// Protect serves h as a protected resource whose tokens s issued: RFC 9728
// metadata at /.well-known/oauth-protected-resource (and the path-specific
// location), 401 with a resource_metadata challenge without a valid token,
// 403 insufficient_scope when a required scope is missing.
func (s *Server) Protect(res Resource, h http.Handler) http.Handler {
	ks := rp.NewRemoteKeySet(s.srv.Client(), s.JWKSURL())
	v := op.NewAccessTokenVerifier(s.Issuer, ks)
	verify := func(ctx context.Context, tok string, _ *http.Request) (*auth.TokenInfo, error) {
		claims, err := op.VerifyAccessToken[*oidc.AccessTokenClaims](ctx, tok, v)
		if err != nil {
			return nil, errors.Join(auth.ErrInvalidToken, err)
		}
		if !oauthex.MatchesResource(claims.Audience, res.URL) {
			return nil, auth.ErrInvalidToken
		}
		scopes := []string(claims.Scopes)
		if sc, ok := claims.Claims["scope"].(string); ok && len(scopes) == 0 {
			scopes = strings.Fields(sc)
		}
		return &auth.TokenInfo{Scopes: scopes, Expiration: claims.Expiration.AsTime(), UserID: claims.Subject}, nil
	}
	servers := res.AuthorizationServers
	if servers == nil {
		servers = []string{s.Issuer}
	}
	prmPath := "/.well-known/oauth-protected-resource"
	meta := auth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{
		Resource:             res.URL,
		AuthorizationServers: servers,
		ScopesSupported:      res.ScopesSupported,
	})
	guarded := auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{
		ResourceMetadataURL: strings.TrimSuffix(originOf(res.URL), "/") + prmPath,
		Scopes:              res.Scopes,
	})(h)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, prmPath) {
			meta.ServeHTTP(w, r)
			return
		}
		if len(res.Scopes) > 0 {
			// The go-sdk answers a missing scope with 403 without the
			// insufficient_scope error MCP step-up looks for.
			w = &scopeChallenge{ResponseWriter: w, scope: strings.Join(res.Scopes, " "), metadata: strings.TrimSuffix(originOf(res.URL), "/") + prmPath}
		}
		guarded.ServeHTTP(w, r)
	})
}

type scopeChallenge struct {
	http.ResponseWriter
	scope, metadata string
}

func (c *scopeChallenge) WriteHeader(code int) {
	h := c.Header()
	if code == http.StatusForbidden {
		h.Set("WWW-Authenticate", `Bearer error="insufficient_scope", resource_metadata="`+c.metadata+`", scope="`+c.scope+`"`)
	}
	c.ResponseWriter.WriteHeader(code)
}

func (c *scopeChallenge) Flush() {
	if f, ok := c.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func originOf(u string) string {
	i := strings.Index(u, "://")
	if i < 0 {
		return u
	}
	if j := strings.IndexByte(u[i+3:], '/'); j >= 0 {
		return u[:i+3+j]
	}
	return u
}
