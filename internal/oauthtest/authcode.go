package oauthtest

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// approvePath is the login step of the op package's authorization flow:
// it approves the request at once, for the subject "user".
const approvePath = "/approve"

// Subject is the user every approved authorization request is for.
const Subject = "user"

// Approvals counts the authorization requests the server approved.
func (s *Server) Approvals() int64 { return s.approvals.Load() }

// serveExtra serves what the op package does not: the approval step,
// RFC 7591 registration (Options.Registration) and its advertisement in
// the metadata. It reports whether it answered r.
func (s *Server) serveExtra(w http.ResponseWriter, r *http.Request) bool {
	switch {
	case r.URL.Path == approvePath:
		id := r.URL.Query().Get("id")
		if !s.st.codes.approve(id) {
			http.Error(w, "unknown authorization request", http.StatusBadRequest)
			return true
		}
		s.approvals.Add(1)
		http.Redirect(w, r, s.callback(op.ContextWithIssuer(r.Context(), s.Issuer), id), http.StatusFound)
		return true
	case r.URL.Path == "/register" && s.st.o.Registration:
		s.register(w, r)
		return true
	case r.URL.Path == "/.well-known/openid-configuration" && s.st.o.Registration:
		// The op package's metadata, with the registration endpoint.
		rec := httptest.NewRecorder()
		s.provider.ServeHTTP(rec, r)
		meta := map[string]any{}
		if rec.Code != http.StatusOK || json.Unmarshal(rec.Body.Bytes(), &meta) != nil {
			http.Error(w, "metadata", http.StatusInternalServerError)
			return true
		}
		meta["registration_endpoint"] = s.Issuer + "/register"
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(meta)
		return true
	}
	return false
}

// register is RFC 7591 dynamic client registration: a client with the
// redirect URIs and token endpoint authentication method asked for
// (client_secret_basic by default; a secret unless none).
func (s *Server) register(w http.ResponseWriter, r *http.Request) {
	var req struct {
		RedirectURIs []string `json:"redirect_uris"`
		AuthMethod   string   `json:"token_endpoint_auth_method"`
	}
	if r.Method != http.MethodPost || json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16)).Decode(&req) != nil || len(req.RedirectURIs) == 0 {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"error":"invalid_client_metadata"}`))
		return
	}
	c := Client{ID: "dyn-" + rand.Text(), RedirectURIs: req.RedirectURIs, AuthMethod: oidc.AuthMethod(req.AuthMethod)}
	switch c.AuthMethod {
	case "":
		c.AuthMethod = oidc.AuthMethodBasic
		c.Secret = rand.Text()
	case oidc.AuthMethodBasic, oidc.AuthMethodPost:
		c.Secret = rand.Text()
	case oidc.AuthMethodNone:
	default:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"error":"invalid_client_metadata"}`))
		return
	}
	s.st.mu.Lock()
	s.st.clients[c.ID] = c
	s.st.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(map[string]any{"client_id": c.ID, "client_secret": c.Secret,
		"redirect_uris": c.RedirectURIs, "token_endpoint_auth_method": string(c.AuthMethod)})
}

type assertedKey struct{}

// assertClient verifies a private_key_jwt client assertion with the op
// package's verifier (which the op package applies to code exchanges, not
// to client credentials) and carries the client it names to
// ClientCredentials; a bad assertion carries nothing, so the request fails.
func (s *Server) assertClient(ctx context.Context, assertion string) context.Context {
	v := op.NewJWTProfileVerifier(s.st, s.Issuer, time.Hour, time.Second)
	req, err := op.VerifyJWTAssertion(ctx, assertion, v)
	if err != nil {
		return context.WithValue(ctx, assertedKey{}, "\x00invalid")
	}
	return context.WithValue(ctx, assertedKey{}, req.Issuer)
}

// GetKeyByIDAndClientID implements op.JWTProfileKeyStorage: the client's
// PublicKey, whatever the key id.
func (s *storage) GetKeyByIDAndClientID(_ context.Context, _, clientID string) (*jose.JSONWebKey, error) {
	c, ok := s.lookup(clientID)
	if !ok || c.PublicKey == nil {
		return nil, errors.New("oauthtest: no key for the client")
	}
	return &jose.JSONWebKey{Key: c.PublicKey}, nil
}

// authRequest is one authorization request (op.AuthRequest) and the
// refresh-token grant made from it (op.RefreshTokenRequest).
type authRequest struct {
	id       string
	req      oidc.AuthRequest
	audience []string
	done     bool
	scopes   []string
	authTime time.Time
}

func (a *authRequest) GetID() string                      { return a.id }
func (a *authRequest) GetACR() string                     { return "" }
func (a *authRequest) GetAMR() []string                   { return nil }
func (a *authRequest) GetAudience() []string              { return a.audience }
func (a *authRequest) GetAuthTime() time.Time             { return a.authTime }
func (a *authRequest) GetClientID() string                { return a.req.ClientID }
func (a *authRequest) GetNonce() string                   { return a.req.Nonce }
func (a *authRequest) GetRedirectURI() string             { return a.req.RedirectURI }
func (a *authRequest) GetResponseType() oidc.ResponseType { return a.req.ResponseType }
func (a *authRequest) GetResponseMode() oidc.ResponseMode { return a.req.ResponseMode }
func (a *authRequest) GetScopes() []string                { return a.scopes }
func (a *authRequest) SetCurrentScopes(scopes []string)   { a.scopes = scopes }
func (a *authRequest) GetState() string                   { return a.req.State }
func (a *authRequest) GetSubject() string                 { return Subject }
func (a *authRequest) Done() bool                         { return a.done }
func (a *authRequest) GetCodeChallenge() *oidc.CodeChallenge {
	if a.req.CodeChallenge == "" {
		return nil
	}
	return &oidc.CodeChallenge{Challenge: a.req.CodeChallenge, Method: a.req.CodeChallengeMethod}
}

// codeStore holds authorization requests, codes and refresh tokens.
type codeStore struct {
	mu       sync.Mutex
	requests map[string]*authRequest // by id
	codes    map[string]string       // code -> request id
	refresh  map[string]*authRequest // refresh token -> grant
}

func newCodeStore() *codeStore {
	return &codeStore{requests: map[string]*authRequest{}, codes: map[string]string{}, refresh: map[string]*authRequest{}}
}

func (c *codeStore) approve(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	a := c.requests[id]
	if a == nil {
		return false
	}
	a.done, a.authTime = true, time.Now()
	return true
}

// CreateAuthRequest implements op.AuthStorage: the resource indicator of
// the request is the audience of its tokens; scopes are granted within
// the client's (plus Options.ExtraScopes).
func (s *storage) CreateAuthRequest(ctx context.Context, r *oidc.AuthRequest, _ string) (op.AuthRequest, error) {
	c, _ := s.lookup(r.ClientID)
	sc, err := s.grant(c, r.Scopes)
	if err != nil {
		return nil, err
	}
	a := &authRequest{id: rand.Text(), req: *r, audience: s.audience(ctx, nil), scopes: sc}
	s.codes.mu.Lock()
	s.codes.requests[a.id] = a
	s.codes.mu.Unlock()
	return a, nil
}

func (s *storage) AuthRequestByID(_ context.Context, id string) (op.AuthRequest, error) {
	s.codes.mu.Lock()
	defer s.codes.mu.Unlock()
	if a := s.codes.requests[id]; a != nil {
		return a, nil
	}
	return nil, errors.New("oauthtest: unknown authorization request")
}

func (s *storage) AuthRequestByCode(_ context.Context, code string) (op.AuthRequest, error) {
	s.codes.mu.Lock()
	defer s.codes.mu.Unlock()
	if a := s.codes.requests[s.codes.codes[code]]; a != nil {
		return a, nil
	}
	return nil, errors.New("oauthtest: unknown code")
}

func (s *storage) SaveAuthCode(_ context.Context, id, code string) error {
	s.codes.mu.Lock()
	defer s.codes.mu.Unlock()
	s.codes.codes[code] = id
	return nil
}

// DeleteAuthRequest implements op.AuthStorage: a code is redeemed once.
func (s *storage) DeleteAuthRequest(_ context.Context, id string) error {
	s.codes.mu.Lock()
	defer s.codes.mu.Unlock()
	delete(s.codes.requests, id)
	for code, rid := range s.codes.codes {
		if rid == id {
			delete(s.codes.codes, code)
		}
	}
	return nil
}

// CreateAccessAndRefreshTokens implements op.AuthStorage: a new refresh
// token replaces the one redeemed.
func (s *storage) CreateAccessAndRefreshTokens(ctx context.Context, r op.TokenRequest, current string) (string, string, time.Time, error) {
	id, exp, err := s.CreateAccessToken(ctx, r)
	if err != nil {
		return "", "", time.Time{}, err
	}
	g := &authRequest{audience: r.GetAudience(), scopes: r.GetScopes(), authTime: time.Now()}
	switch a := r.(type) {
	case *authRequest:
		g.req = a.req
	}
	rt := rand.Text()
	s.codes.mu.Lock()
	if old := s.codes.refresh[current]; old != nil {
		g.req = old.req
		delete(s.codes.refresh, current)
	}
	s.codes.refresh[rt] = g
	s.codes.mu.Unlock()
	return id, rt, exp, nil
}

func (s *storage) TokenRequestByRefreshToken(_ context.Context, rt string) (op.RefreshTokenRequest, error) {
	s.codes.mu.Lock()
	defer s.codes.mu.Unlock()
	if g := s.codes.refresh[rt]; g != nil {
		return g, nil
	}
	return nil, op.ErrInvalidRefreshToken
}
