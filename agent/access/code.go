package access

import (
	"context"
	"crypto/rand"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/oauth2"

	"github.com/mcpready/mcpready/agent/config"
)

// scopeOfflineAccess asks for a refresh token (OpenID Connect); the agent
// asks for it where the authorization server supports it.
const scopeOfflineAccess = "offline_access"

// AuthorizationRequest is one authorization-code flow the user completes.
// URL carries the client id, the state and the PKCE challenge, never a
// token or a secret.
type AuthorizationRequest struct {
	Upstream  string
	Principal string
	// URL is the authorization URL the user opens in a browser.
	URL string
	// RedirectURL is where the authorization server sends the user back.
	RedirectURL string
}

// AuthorizationResponse is what the authorization server sent to the
// redirect URL: the code, the state and (RFC 9207) the issuer.
type AuthorizationResponse struct {
	Code, State, Iss string
}

// Authorizer has the user complete an authorization-code flow: it directs
// them to the request's URL and returns what came back to its redirect URL
// (LoopbackAuthorizer in the agent; a test drives the redirect itself).
type Authorizer func(ctx context.Context, r *AuthorizationRequest) (*AuthorizationResponse, error)

// challengeFirst reports whether p's request to up goes without a token
// to learn the upstream's challenge first: under authorization_code, when
// nothing is held or discovered yet (the challenge's resource_metadata and
// scope are what the user's authorization is for).
func (c *Client) challengeFirst(p Principal, up *Upstream) bool {
	if grantOf(p, up) != config.GrantAuthorizationCode {
		return false
	}
	pk := c.principalOf(p, up)
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.disc[up.Name] == nil && c.grantLocked(pk) == nil
}

// registration is a client at one authorization server.
type registration struct {
	id, secret, method string
}

// flow is a pending authorization-code flow of one pair and scope set:
// callers asking for the same wait for it instead of starting another.
type flow struct {
	key  string
	done chan struct{}
	tok  *oauth2.Token
	err  error
}

// codeToken obtains a token for p at up by the authorization-code flow:
// the refresh token held for the same scopes first, else a new flow (or
// the one pending). The flow runs for up to Options.AuthorizationTimeout,
// whether or not the caller waits that long.
func (c *Client) codeToken(ctx context.Context, p Principal, up *Upstream, d *Discovery, pk pairKey, scopes []string) (*oauth2.Token, error) {
	if c.o.Authorizer == nil {
		return nil, notReady(ReasonNotConfigured, "grant authorization_code needs an authorizer (the agent's loopback redirect)")
	}
	key := joined(scopes)
	c.mu.Lock()
	pr := c.pairLocked(pk)
	f := pr.flow
	if f == nil || f.key != key {
		f = &flow{key: key, done: make(chan struct{})}
		pr.flow = f
		refresh := ""
		if pr.refreshKey == key {
			refresh = pr.refresh
		}
		go c.runFlow(f, p, up, d, pk, scopes, refresh)
	}
	c.mu.Unlock()
	select {
	case <-f.done:
		return f.tok, f.err
	case <-ctx.Done():
		return nil, notReady(ReasonAuthorizationPending, "the authorization of principal %q at upstream %s is not complete yet", p.Name, up.Name)
	}
}

// runFlow completes f and records its refresh token.
func (c *Client) runFlow(f *flow, p Principal, up *Upstream, d *Discovery, pk pairKey, scopes []string, refresh string) {
	ctx, cancel := context.WithTimeout(context.Background(), c.o.AuthorizationTimeout)
	defer cancel()
	hc, err := c.tokenHTTP(up, d) // DPoP proofs, when up has them
	ctx = context.WithValue(ctx, oauth2.HTTPClient, hc)
	if err == nil && refresh != "" {
		f.tok, f.err = c.refresh(ctx, up, d, refresh)
	}
	if err != nil {
		f.err = err
	} else if refresh == "" || f.err != nil {
		f.tok, f.err = c.authorizeCode(ctx, p, up, d, scopes)
	}
	c.mu.Lock()
	pr := c.pairLocked(pk)
	if pr.flow == f {
		pr.flow = nil
	}
	if f.err == nil && f.tok.RefreshToken != "" {
		pr.refresh, pr.refreshKey = f.tok.RefreshToken, f.key
	}
	c.mu.Unlock()
	close(f.done)
}

// refresh redeems a refresh token (with the resource indicator).
func (c *Client) refresh(ctx context.Context, up *Upstream, d *Discovery, refresh string) (*oauth2.Token, error) {
	ca, err := c.clientAuth(ctx, up, d)
	if err != nil {
		return nil, err
	}
	cfg := oauth2.Config{ClientID: ca.id, ClientSecret: ca.secret, Endpoint: oauth2.Endpoint{TokenURL: d.TokenEndpoint, AuthStyle: ca.style}}
	opts := append(ca.options(), oauth2.SetAuthURLParam("grant_type", "refresh_token"),
		oauth2.SetAuthURLParam("refresh_token", refresh), oauth2.SetAuthURLParam("resource", resourceOf(up, d)))
	tok, err := cfg.Exchange(ctx, "", opts...)
	if err != nil {
		return nil, tokenError(err)
	}
	if tok.RefreshToken == "" {
		tok.RefreshToken = refresh
	}
	return tok, nil
}

// clientAuth is how the agent's client at d's authorization server (see
// register) authenticates now.
func (c *Client) clientAuth(ctx context.Context, up *Upstream, d *Discovery) (*clientAuth, error) {
	reg, err := c.register(ctx, up, d)
	if err != nil {
		return nil, err
	}
	return newClientAuth(up.OAuth, reg.id, reg.secret, reg.method, d, c.o.Now())
}

// authorizeCode runs one authorization-code flow with PKCE (S256), the
// resource indicator and the RFC 9207 issuer check.
func (c *Client) authorizeCode(ctx context.Context, p Principal, up *Upstream, d *Discovery, scopes []string) (*oauth2.Token, error) {
	if d.AuthorizationEndpoint == "" {
		return nil, notReady(ReasonASMetadataInvalid, "the authorization server has no authorization endpoint")
	}
	ca, err := c.clientAuth(ctx, up, d)
	if err != nil {
		return nil, err
	}
	resource := resourceOf(up, d)
	cfg := oauth2.Config{ClientID: ca.id, ClientSecret: ca.secret, RedirectURL: up.OAuth.RedirectURL,
		Endpoint: oauth2.Endpoint{AuthURL: d.AuthorizationEndpoint, TokenURL: d.TokenEndpoint, AuthStyle: ca.style},
		Scopes:   askedScopes(scopes, d)}
	verifier, state := oauth2.GenerateVerifier(), rand.Text()
	ar := &AuthorizationRequest{Upstream: up.Name, Principal: p.Name, RedirectURL: up.OAuth.RedirectURL,
		URL: cfg.AuthCodeURL(state, oauth2.S256ChallengeOption(verifier), oauth2.SetAuthURLParam("resource", resource))}
	res, err := c.o.Authorizer(ctx, ar)
	switch {
	case err != nil:
		return nil, notReady(ReasonAuthorizationFailed, "the authorization was not completed")
	case res.State != state:
		return nil, notReady(ReasonAuthorizationFailed, "the authorization response's state does not match")
	case res.Code == "":
		return nil, notReady(ReasonAuthorizationFailed, "the authorization response has no code")
	}
	if err := checkIss(res.Iss, d); err != nil {
		return nil, err
	}
	// The registration's authentication again: a private_key_jwt assertion
	// may have expired while the user took their time.
	if ca, err = c.clientAuth(ctx, up, d); err != nil {
		return nil, err
	}
	tok, err := cfg.Exchange(ctx, res.Code, append(ca.options(), oauth2.VerifierOption(verifier), oauth2.SetAuthURLParam("resource", resource))...)
	if err != nil {
		return nil, tokenError(err)
	}
	return tok, nil
}

// askedScopes are the scopes an authorization asks for: the selection,
// and offline_access where the authorization server supports it.
func askedScopes(scopes []string, d *Discovery) []string {
	if slices.Contains(d.ServerScopes, scopeOfflineAccess) && !slices.Contains(scopes, scopeOfflineAccess) {
		return append(slices.Clone(scopes), scopeOfflineAccess)
	}
	return scopes
}

// checkIss is RFC 9207: an authorization server that advertises the iss
// parameter must send its issuer; one that does not must send none.
func checkIss(iss string, d *Discovery) error {
	switch {
	case d.IssParameter && iss == "":
		return notReady(ReasonIssuerMismatch, "the authorization response has no iss, though the authorization server advertises it")
	case iss != "" && iss != d.Issuer: // exactly, without URL normalization (SEP-2468)
		return notReady(ReasonIssuerMismatch, "the authorization response names another issuer")
	case iss != "" && !d.IssParameter:
		return notReady(ReasonIssuerMismatch, "the authorization response has an iss the authorization server does not advertise")
	}
	return nil
}

// register is the client the agent is at d's authorization server, in the
// order of the MCP specification: its client ID metadata document (where
// supported), the pre-registered ClientID, else a dynamic registration
// (RFC 7591; made once per upstream and issuer).
func (c *Client) register(ctx context.Context, up *Upstream, d *Discovery) (registration, error) {
	o := up.OAuth
	secret, err := o.ClientSecret()
	if err != nil {
		return registration{}, notReady(ReasonCredentials, "%v", err)
	}
	switch {
	case o.ClientIDMetadataURL != "" && d.CIMDSupported:
		return registration{id: o.ClientIDMetadataURL, method: config.AuthNone}, nil
	case o.ClientID != "":
		return registration{id: o.ClientID, secret: secret}, nil
	case !o.DynamicRegistration || d.RegistrationEndpoint == "":
		return registration{}, notReady(ReasonRegistration, "no client registration the authorization server supports is configured")
	}
	rk := regKey{up.Name, d.Issuer}
	c.mu.Lock()
	reg, ok := c.regs[rk]
	c.mu.Unlock()
	if ok {
		return reg, nil
	}
	meta := &oauthex.ClientRegistrationMetadata{
		// The redirect URL is on a loopback address: a native client.
		RedirectURIs: []string{o.RedirectURL}, ClientName: "mcpready agent", ApplicationType: "native",
		GrantTypes: []string{"authorization_code", "refresh_token"}, ResponseTypes: []string{"code"},
		TokenEndpointAuthMethod: o.TokenEndpointAuth,
	}
	if meta.TokenEndpointAuthMethod == "" && len(d.AuthMethods) > 0 {
		meta.TokenEndpointAuthMethod = d.AuthMethods[0]
	}
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	resp, err := oauthex.RegisterClient(rctx, d.RegistrationEndpoint, meta, c.o.HTTP)
	if err != nil {
		var re *oauthex.ClientRegistrationError
		if errors.As(err, &re) && re.ErrorCode != "" {
			return registration{}, notReady(ReasonRegistration, "the registration endpoint answered %s", re.ErrorCode)
		}
		return registration{}, notReady(ReasonRegistration, "the registration endpoint is unreachable or answered malformed data")
	}
	reg = registration{id: resp.ClientID, secret: resp.ClientSecret, method: resp.TokenEndpointAuthMethod}
	if reg.method == "" && o.TokenEndpointAuth == "" {
		reg.method = pickAuthMethod(reg.secret != "", d.AuthMethods)
	}
	c.mu.Lock()
	c.regs[rk] = reg
	c.mu.Unlock()
	return reg, nil
}

type regKey struct{ upstream, issuer string }

// Verification names how the token of f was checked: VerifyJWT or
// VerifyUnverified (receipts record it).
func (f *Facts) Verification() string {
	if f.Unverified {
		return config.VerifyUnverified
	}
	return config.VerifyJWT
}

// grantedScopes are a token's scopes as facts: offline_access, which
// grants a refresh token at the authorization server and no authority at
// the resource, is not one.
func grantedScopes(s []string) []string {
	return slices.DeleteFunc(sortedSet(s), func(x string) bool { return x == scopeOfflineAccess })
}

// responseScopes are the scopes a token response names (RFC 6749 5.1),
// asked when it names none.
func responseScopes(tok *oauth2.Token, asked []string) []string {
	if s, ok := tok.Extra("scope").(string); ok && s != "" {
		return strings.Fields(s)
	}
	return asked
}
