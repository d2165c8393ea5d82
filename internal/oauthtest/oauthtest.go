// Package oauthtest starts a real OAuth 2.0 / OpenID Connect authorization
// server in-process for tests: zitadel/oidc's op package over an in-memory
// storage, on a loopback httptest server. It issues signed JWT access tokens
// (RS256, keys served at the JWKS endpoint), supports client credentials
// (client_secret_basic, client_secret_post and private_key_jwt), RFC 8693
// token exchange, and the authorization-code flow with PKCE and refresh
// tokens whose authorization endpoint approves every request at once (no
// login page: the user is "user"), optionally with RFC 7591 dynamic client
// registration (authcode.go); it honours RFC 8707 resource indicators by
// making the resource the token's audience.
//
// Protect wraps an MCP handler as a protected resource (RFC 9728 metadata,
// WWW-Authenticate challenges, bearer tokens verified against the server's
// JWKS with the go-sdk's auth middleware).
//
// It is for tests only: it keeps everything in memory, trusts loopback HTTP
// and must not be imported by production code.
package oauthtest

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// Client is a registered OAuth client.
type Client struct {
	ID     string
	Secret string
	// AuthMethod is how the client authenticates at the token endpoint
	// (oidc.AuthMethodBasic when empty).
	AuthMethod oidc.AuthMethod
	// Scopes the client may be granted; empty allows every scope.
	Scopes []string
	// TokenExchange permits the RFC 8693 grant besides client credentials.
	TokenExchange bool
	// Claims are added to the access tokens the client obtains with client
	// credentials (e.g. an identity provider's principal claims).
	Claims map[string]any
	// Opaque: the client's access tokens are opaque (not JWTs), to be
	// checked by RFC 7662 introspection (introspect.go).
	Opaque bool
	// PublicKey verifies the client's private_key_jwt assertions
	// (AuthMethod oidc.AuthMethodPrivateKeyJWT).
	PublicKey any
	// RedirectURIs permit the authorization-code flow (loopback http URIs:
	// a native client).
	RedirectURIs []string
	// JWTBearer permits the RFC 7523 JWT-bearer grant of assertions whose
	// issuer and subject are the client's ID, signed by PublicKey (a
	// workload identity token the client holds).
	JWTBearer bool
}

// Options configures a Server. The zero value issues tokens for an hour,
// grants exactly the scopes asked for and uses the resource indicator as the
// audience.
type Options struct {
	Clients []Client
	// Lifetime of access tokens; zero means one hour.
	Lifetime time.Duration
	// ExtraScopes are added to every grant (an authorization server that
	// grants more than was asked for).
	ExtraScopes []string
	// Audience, when set, replaces the resource indicator as every token's
	// audience (a token minted for another resource).
	Audience string
	// Registration serves RFC 7591 dynamic client registration at
	// /register and advertises it in the metadata.
	Registration bool
	// TLS serves https with httptest's certificate (Certificate), so that
	// the issuer is an https URL only a client trusting it reaches.
	TLS bool
}

// Server is a running authorization server.
type Server struct {
	// Issuer is the server's issuer URL (also its base URL).
	Issuer string
	srv    *httptest.Server
	st     *storage
	tokens atomic.Int64
	// approvals counts the authorization requests approved.
	approvals atomic.Int64
	// provider is the op package's handler; callback its authorization
	// callback URL of a request id.
	provider http.Handler
	callback func(context.Context, string) string
}

// Start starts a server and stops it when t ends.
func Start(t testing.TB, o Options) *Server {
	t.Helper()
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// New starts a server; Close stops it.
func New(o Options) (*Server, error) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	if o.Lifetime == 0 {
		o.Lifetime = time.Hour
	}
	st := &storage{o: o, key: key, kid: "k1", clients: map[string]Client{}, codes: newCodeStore()}
	for _, c := range o.Clients {
		if c.AuthMethod == "" {
			c.AuthMethod = oidc.AuthMethodBasic
		}
		st.clients[c.ID] = c
	}
	s := &Server{st: st}
	st.issued = &s.tokens
	var h http.Handler = http.NotFoundHandler()
	var mu sync.RWMutex
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.RLock()
		defer mu.RUnlock()
		if s.serveExtra(w, r) {
			return
		}
		// RFC 8707: the op package parses resource for token exchange but
		// not for client credentials or authorization requests; carry it
		// to the storage.
		switch r.URL.Path {
		case "/oauth/token":
			_ = r.ParseForm()
			ctx := context.WithValue(r.Context(), resourceKey{}, r.PostForm["resource"])
			if a := r.PostForm.Get("client_assertion"); a != "" && r.PostForm.Get("grant_type") == string(oidc.GrantTypeClientCredentials) {
				ctx = s.assertClient(ctx, a)
			}
			r = r.WithContext(ctx)
		case "/authorize":
			r = r.WithContext(context.WithValue(r.Context(), resourceKey{}, r.URL.Query()["resource"]))
		}
		h.ServeHTTP(w, r)
	}))
	if o.TLS {
		s.srv.StartTLS()
	} else {
		s.srv.Start()
	}
	s.Issuer = s.srv.URL
	var ck [32]byte
	if _, err := rand.Read(ck[:]); err != nil {
		s.srv.Close()
		return nil, err
	}
	p, err := op.NewProvider(&op.Config{CryptoKey: ck, AuthMethodPost: true, CodeMethodS256: true, AuthMethodPrivateKeyJWT: true, GrantTypeRefreshToken: true},
		st, op.StaticIssuer(s.Issuer), op.WithAllowInsecure())
	if err != nil {
		s.srv.Close()
		return nil, err
	}
	mu.Lock()
	h = p
	s.provider, s.callback = p, op.AuthCallbackURL(p)
	mu.Unlock()
	return s, nil
}

// Certificate is the server's TLS certificate (with Options.TLS), which
// httptest's TLS servers all share; nil without TLS.
func (s *Server) Certificate() *x509.Certificate { return s.srv.Certificate() }

// Close stops the server.
func (s *Server) Close() { s.srv.Close() }

// TokenEndpoint is the token endpoint's URL.
func (s *Server) TokenEndpoint() string { return s.Issuer + "/oauth/token" }

// JWKSURL is where the server publishes its signing keys.
func (s *Server) JWKSURL() string { return s.Issuer + "/keys" }

// Issued counts the access tokens the server has issued.
func (s *Server) Issued() int64 { return s.tokens.Load() }

type resourceKey struct{}

// storage is the op.Storage of a Server: clients and signing key from
// Options, nothing persisted.
type storage struct {
	o       Options
	key     *rsa.PrivateKey
	kid     string
	mu      sync.Mutex // guards clients (dynamic registration adds some)
	clients map[string]Client
	issued  *atomic.Int64
	intro   introspection // opaque tokens issued, for introspection (introspect.go)
	codes   *codeStore
}

// lookup is the registered client id.
func (s *storage) lookup(id string) (Client, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.clients[id]
	return c, ok
}

var errUnsupported = errors.New("oauthtest: not supported")

// tokenRequest is what a client-credentials grant issues for.
type tokenRequest struct {
	subject  string
	audience []string
	scopes   []string
}

func (r *tokenRequest) GetSubject() string    { return r.subject }
func (r *tokenRequest) GetAudience() []string { return r.audience }
func (r *tokenRequest) GetScopes() []string   { return r.scopes }

// grant is the scope set a grant issues: what was asked for, within the
// client's scopes, plus Options.ExtraScopes.
func (s *storage) grant(c Client, asked []string) ([]string, error) {
	for _, sc := range asked {
		if len(c.Scopes) > 0 && !slices.Contains(c.Scopes, sc) {
			return nil, oidc.ErrInvalidScope().WithDescription("scope %q is not allowed for this client", sc)
		}
	}
	out := append(slices.Clone(asked), s.o.ExtraScopes...)
	slices.Sort(out)
	return slices.Compact(out), nil
}

func (s *storage) audience(ctx context.Context, asked []string) []string {
	if s.o.Audience != "" {
		return []string{s.o.Audience}
	}
	if len(asked) > 0 {
		return asked
	}
	res, _ := ctx.Value(resourceKey{}).([]string)
	return res
}

func (s *storage) client(id, secret string) (Client, error) {
	c, ok := s.lookup(id)
	if !ok || c.AuthMethod != oidc.AuthMethodNone && c.Secret != secret {
		return Client{}, errors.New("oauthtest: unknown client or wrong secret")
	}
	return c, nil
}

// ClientCredentials implements op.ClientCredentialsStorage. A
// private_key_jwt client is the one whose assertion the request carried
// (verified by assertClient).
func (s *storage) ClientCredentials(ctx context.Context, id, secret string) (op.Client, error) {
	if asserted, _ := ctx.Value(assertedKey{}).(string); asserted != "" {
		c, ok := s.lookup(asserted)
		if !ok || c.AuthMethod != oidc.AuthMethodPrivateKeyJWT || id != "" && id != asserted {
			return nil, errors.New("oauthtest: assertion of another client")
		}
		return &opClient{c}, nil
	}
	c, err := s.client(id, secret)
	if err != nil {
		return nil, err
	}
	return &opClient{c}, nil
}

// ClientCredentialsTokenRequest implements op.ClientCredentialsStorage.
func (s *storage) ClientCredentialsTokenRequest(ctx context.Context, id string, scopes []string) (op.TokenRequest, error) {
	if asserted, _ := ctx.Value(assertedKey{}).(string); asserted != "" {
		id = asserted
	}
	c, _ := s.lookup(id)
	sc, err := s.grant(c, scopes)
	if err != nil {
		return nil, err
	}
	return &tokenRequest{subject: id, audience: s.audience(ctx, nil), scopes: sc}, nil
}

// ValidateTokenExchangeRequest implements op.TokenExchangeStorage: only
// access tokens this server issued are exchanged, for an access token whose
// scopes are those asked for (within the client's), never more than the
// subject token had unless ExtraScopes says so.
func (s *storage) ValidateTokenExchangeRequest(_ context.Context, r op.TokenExchangeRequest) error {
	if r.GetExchangeSubjectTokenType() != oidc.AccessTokenType {
		return oidc.ErrInvalidRequest().WithDescription("subject_token_type must be an access token")
	}
	if r.GetRequestedTokenType() == "" {
		r.SetRequestedTokenType(oidc.AccessTokenType)
	}
	if r.GetRequestedTokenType() != oidc.AccessTokenType {
		return oidc.ErrInvalidRequest().WithDescription("only access tokens are issued")
	}
	c, _ := s.lookup(r.GetClientID())
	sc, err := s.grant(c, r.GetScopes())
	if err != nil {
		return err
	}
	r.SetCurrentScopes(sc)
	return nil
}

// CreateTokenExchangeRequest implements op.TokenExchangeStorage.
func (s *storage) CreateTokenExchangeRequest(context.Context, op.TokenExchangeRequest) error {
	return nil
}

// GetPrivateClaimsFromTokenExchangeRequest implements op.TokenExchangeStorage.
func (s *storage) GetPrivateClaimsFromTokenExchangeRequest(_ context.Context, r op.TokenExchangeRequest) (map[string]any, error) {
	claims := map[string]any{"scope": strings.Join(r.GetScopes(), " ")}
	if a := r.GetExchangeActor(); a != "" {
		claims["act"] = map[string]any{"sub": a}
	}
	return claims, nil
}

// SetUserinfoFromTokenExchangeRequest implements op.TokenExchangeStorage.
func (s *storage) SetUserinfoFromTokenExchangeRequest(context.Context, *oidc.UserInfo, op.TokenExchangeRequest) error {
	return nil
}

// GetPrivateClaimsFromRequest implements op.CanGetPrivateClaimsFromRequest:
// the granted scopes travel in the JWT's scope claim.
func (s *storage) GetPrivateClaimsFromRequest(_ context.Context, r op.TokenRequest, _ []string) (map[string]any, error) {
	claims := map[string]any{"scope": strings.Join(r.GetScopes(), " ")}
	c, _ := s.lookup(r.GetSubject())
	for k, v := range c.Claims {
		claims[k] = v
	}
	return claims, nil
}

func (s *storage) CreateAccessToken(ctx context.Context, r op.TokenRequest) (string, time.Time, error) {
	s.issued.Add(1)
	if te, ok := r.(op.TokenExchangeRequest); ok && s.o.Audience == "" && len(te.GetAudience()) == 0 {
		return "", time.Time{}, oidc.ErrInvalidTarget().WithDescription("audience or resource is required")
	}
	id, exp := rand.Text(), time.Now().Add(s.o.Lifetime)
	s.remember(ctx, id, r, exp)
	return id, exp, nil
}

func (s *storage) GetClientByClientID(_ context.Context, id string) (op.Client, error) {
	c, ok := s.lookup(id)
	if !ok {
		return nil, errors.New("oauthtest: unknown client")
	}
	return &opClient{c}, nil
}

func (s *storage) AuthorizeClientIDSecret(_ context.Context, id, secret string) error {
	_, err := s.client(id, secret)
	return err
}

func (s *storage) SigningKey(context.Context) (op.SigningKey, error) { return signingKey{s}, nil }
func (s *storage) SignatureAlgorithms(context.Context) ([]jose.SignatureAlgorithm, error) {
	return []jose.SignatureAlgorithm{jose.RS256}, nil
}
func (s *storage) KeySet(context.Context) ([]op.Key, error) { return []op.Key{publicKey{s}}, nil }
func (s *storage) Health(context.Context) error             { return nil }

// The rest of op.Storage serves flows these tests do not use (revocation,
// userinfo, sessions); each refuses.

func (s *storage) TerminateSession(context.Context, string, string) error { return errUnsupported }
func (s *storage) RevokeToken(context.Context, string, string, string) *oidc.Error {
	return oidc.ErrUnsupportedGrantType()
}
func (s *storage) GetRefreshTokenInfo(context.Context, string, string) (string, string, error) {
	return "", "", op.ErrInvalidRefreshToken
}
func (s *storage) SetUserinfoFromScopes(context.Context, *oidc.UserInfo, string, string, []string) error {
	return nil
}
func (s *storage) SetUserinfoFromToken(context.Context, *oidc.UserInfo, string, string, string) error {
	return errUnsupported
}
func (s *storage) GetPrivateClaimsFromScopes(context.Context, string, string, []string) (map[string]any, error) {
	return nil, nil
}

// ValidateJWTProfileScopes admits a JWT-bearer grant of a JWTBearer
// client (the assertion's issuer) for the scopes it may be granted.
func (s *storage) ValidateJWTProfileScopes(_ context.Context, issuer string, scopes []string) ([]string, error) {
	c, ok := s.lookup(issuer)
	if !ok || !c.JWTBearer {
		return nil, oidc.ErrUnauthorizedClient().WithDescription("the JWT-bearer grant is not permitted for this issuer")
	}
	return s.grant(c, scopes)
}

type signingKey struct{ s *storage }

func (k signingKey) SignatureAlgorithm() jose.SignatureAlgorithm { return jose.RS256 }
func (k signingKey) Key() any                                    { return k.s.key }
func (k signingKey) ID() string                                  { return k.s.kid }

type publicKey struct{ s *storage }

func (k publicKey) ID() string                         { return k.s.kid }
func (k publicKey) Algorithm() jose.SignatureAlgorithm { return jose.RS256 }
func (k publicKey) Use() string                        { return "sig" }
func (k publicKey) Key() any                           { return &k.s.key.PublicKey }

// opClient is a Client as the op package sees it: confidential, JWT
// access tokens, client credentials and (when allowed) token exchange.
type opClient struct{ c Client }

func (c *opClient) GetID() string                    { return c.c.ID }
func (c *opClient) RedirectURIs() []string           { return c.c.RedirectURIs }
func (c *opClient) PostLogoutRedirectURIs() []string { return nil }
func (c *opClient) ApplicationType() op.ApplicationType {
	if len(c.c.RedirectURIs) > 0 {
		return op.ApplicationTypeNative // loopback redirects
	}
	return op.ApplicationTypeWeb
}
func (c *opClient) AuthMethod() oidc.AuthMethod { return c.c.AuthMethod }
func (c *opClient) ResponseTypes() []oidc.ResponseType {
	if len(c.c.RedirectURIs) > 0 {
		return []oidc.ResponseType{oidc.ResponseTypeCode}
	}
	return nil
}
func (c *opClient) GrantTypes() []oidc.GrantType {
	g := []oidc.GrantType{oidc.GrantTypeClientCredentials}
	if len(c.c.RedirectURIs) > 0 {
		g = append(g, oidc.GrantTypeCode, oidc.GrantTypeRefreshToken)
	}
	if c.c.TokenExchange {
		g = append(g, oidc.GrantTypeTokenExchange)
	}
	return g
}
func (c *opClient) LoginURL(id string) string            { return approvePath + "?id=" + url.QueryEscape(id) }
func (c *opClient) AccessTokenType() op.AccessTokenType  { return accessTokenType(c.c) }
func (c *opClient) IDTokenLifetime() time.Duration       { return time.Hour }
func (c *opClient) DevMode() bool                        { return false }
func (c *opClient) IsScopeAllowed(string) bool           { return true }
func (c *opClient) IDTokenUserinfoClaimsAssertion() bool { return false }
func (c *opClient) ClockSkew() time.Duration             { return 0 }
func (c *opClient) RestrictAdditionalIdTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}
func (c *opClient) RestrictAdditionalAccessTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}

// String names the server in test output.
func (s *Server) String() string { return fmt.Sprintf("oauthtest(%s)", s.Issuer) }
