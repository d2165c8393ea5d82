package oauthtest

// RFC 7662 token introspection of opaque tokens (Client.Opaque): the op
// package serves the endpoint (/oauth/introspect, named in the metadata,
// client_secret_basic); the storage answers from the tokens it issued.

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// introspection holds what introspection answers about issued tokens.
type introspection struct {
	mu      sync.Mutex
	tokens  map[string]issuedToken // by token id
	revoked bool                   // every token is inactive (Server.RevokeAll)
	calls   atomic.Int64
}

type issuedToken struct {
	client   string
	scopes   []string
	audience []string
	exp      time.Time
	claims   map[string]any
}

func accessTokenType(c Client) op.AccessTokenType {
	if c.Opaque {
		return op.AccessTokenTypeBearer
	}
	return op.AccessTokenTypeJWT
}

// remember records a token for introspection.
func (s *storage) remember(ctx context.Context, id string, r op.TokenRequest, exp time.Time) {
	it := issuedToken{client: r.GetSubject(), scopes: slices.Clone(r.GetScopes()), audience: s.audience(ctx, r.GetAudience()), exp: exp}
	if te, ok := r.(op.TokenExchangeRequest); ok {
		it.client = te.GetClientID()
	}
	it.claims = s.clients[it.client].Claims
	s.intro.mu.Lock()
	defer s.intro.mu.Unlock()
	if s.intro.tokens == nil {
		s.intro.tokens = map[string]issuedToken{}
	}
	s.intro.tokens[id] = it
}

// SetIntrospectionFromToken implements op.Storage: an issued, unexpired
// token that RevokeAll has not revoked is active, with its scopes,
// audience, expiry and the client's claims.
func (s *storage) SetIntrospectionFromToken(_ context.Context, resp *oidc.IntrospectionResponse, id, subject, _ string) error {
	s.intro.calls.Add(1)
	s.intro.mu.Lock()
	it, ok := s.intro.tokens[id]
	revoked := s.intro.revoked
	s.intro.mu.Unlock()
	if !ok || revoked || time.Now().After(it.exp) {
		return errors.New("oauthtest: token not active")
	}
	resp.Scope = it.scopes
	resp.ClientID = it.client
	resp.Subject = subject
	resp.Audience = it.audience
	resp.Expiration = oidc.FromTime(it.exp)
	resp.TokenType = oidc.BearerToken
	resp.Claims = it.claims
	return nil
}

// IntrospectionEndpoint is the RFC 7662 endpoint's URL.
func (s *Server) IntrospectionEndpoint() string { return s.Issuer + "/oauth/introspect" }

// RevokeAll makes every token issued so far, and every later one,
// inactive for introspection.
func (s *Server) RevokeAll() {
	s.st.intro.mu.Lock()
	s.st.intro.revoked = true
	s.st.intro.mu.Unlock()
}

// Introspected counts the introspection requests answered about an
// issued token.
func (s *Server) Introspected() int64 { return s.st.intro.calls.Load() }
