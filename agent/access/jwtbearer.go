package access

import (
	"context"
	"strings"

	"golang.org/x/oauth2"

	"github.com/mcpready/mcpready/agent/config"
)

// RFC 7523 and RFC 8693 identifiers of the JWT-bearer grants.
const (
	grantTypeJWTBearer = "urn:ietf:params:oauth:grant-type:jwt-bearer"
	tokenTypeIDToken   = "urn:ietf:params:oauth:token-type:id_token"
	tokenTypeIDJAG     = "urn:ietf:params:oauth:token-type:id-jag"
)

// bearerGrant obtains a token by an RFC 7523 JWT-bearer grant at up's
// authorization server: under GrantJWTBearer the configured JWT (a
// workload identity token), under GrantIDJAG an identity assertion
// authorization grant that the enterprise identity provider issued for
// this authorization server and resource in exchange for the configured
// ID token. A rejected grant is not retried nor replaced by another
// grant: the token endpoint's error code is the error.
func (c *Client) bearerGrant(hctx context.Context, up *Upstream, d *Discovery, ca *clientAuth, resource string, scopes []string) (*oauth2.Token, error) {
	o := up.OAuth
	var assertion string
	if o.Grant == config.GrantIDJAG {
		var err error
		if assertion, err = c.idJAG(hctx, o.EnterpriseIdP, d, resource, scopes); err != nil {
			return nil, err
		}
	} else {
		var err error
		if assertion, err = o.Assertion(); err != nil {
			return nil, notReady(ReasonCredentials, "jwt_bearer assertion: %v", err)
		}
	}
	tok, err := tokenRequest(hctx, ca, d.TokenEndpoint, scopes,
		"grant_type", grantTypeJWTBearer,
		"assertion", assertion,
		"resource", resource)
	if err != nil {
		return nil, tokenError(err)
	}
	return tok, nil
}

// tokenRequest asks tokenURL for a token with params (name, value pairs)
// and scopes, authenticated by ca (x/oauth2's Exchange, with the grant
// type replaced).
func tokenRequest(hctx context.Context, ca *clientAuth, tokenURL string, scopes []string, params ...string) (*oauth2.Token, error) {
	cfg := oauth2.Config{ClientID: ca.id, ClientSecret: ca.secret, Endpoint: oauth2.Endpoint{TokenURL: tokenURL, AuthStyle: ca.style}}
	opts := ca.options()
	for i := 0; i+1 < len(params); i += 2 {
		opts = append(opts, oauth2.SetAuthURLParam(params[i], params[i+1]))
	}
	if len(scopes) > 0 {
		opts = append(opts, oauth2.SetAuthURLParam("scope", strings.Join(scopes, " ")))
	}
	return cfg.Exchange(hctx, "", opts...)
}

// idJAG exchanges idp's ID token (RFC 8693) for an ID-JAG whose audience
// is d's issuer and whose resource is resource.
func (c *Client) idJAG(hctx context.Context, idp *config.EnterpriseIdP, d *Discovery, resource string, scopes []string) (string, error) {
	idToken, err := idp.IDToken()
	if err != nil {
		return "", notReady(ReasonNoSubjectToken, "enterprise ID token: %v", err)
	}
	secret, err := idp.ClientSecret()
	if err != nil {
		return "", notReady(ReasonCredentials, "enterprise identity provider client secret: %v", err)
	}
	ca := &clientAuth{id: idp.ClientID, secret: secret, style: oauth2.AuthStyleInHeader}
	if secret == "" {
		ca.style = oauth2.AuthStyleInParams
	}
	// The identity provider is not the upstream's authorization server:
	// its request carries no DPoP proof of the upstream's key.
	tok, err := tokenRequest(context.WithValue(hctx, oauth2.HTTPClient, c.o.HTTP), ca, idp.TokenEndpoint, scopes,
		"grant_type", grantTypeExchange,
		"subject_token", idToken,
		"subject_token_type", tokenTypeIDToken,
		"requested_token_type", tokenTypeIDJAG,
		"audience", d.Issuer,
		"resource", resource)
	if err != nil {
		return "", tokenError(err)
	}
	if it, _ := tok.Extra("issued_token_type").(string); it != tokenTypeIDJAG {
		return "", notReady(ReasonTokenFailed, "the enterprise identity provider answered another issued_token_type than an ID-JAG")
	}
	return tok.AccessToken, nil
}
