package config

import (
	"errors"
	"fmt"
	"net/url"
	"os"

	"github.com/mcpready/mcpready/internal/loopback"
	"github.com/mcpready/mcpready/readiness"
)

// The JWT-bearer grants (RFC 7523) of OAuth.Grant, beside those of
// config.go.
const (
	// GrantJWTBearer: the agent presents a JWT it holds (a workload
	// identity token, SEP-1933) as an RFC 7523 authorization grant. The
	// JWT is read from AssertionFile or AssertionEnv at every token
	// request, so a rotated file is picked up.
	GrantJWTBearer = readiness.GrantJWTBearer
	// GrantIDJAG: enterprise-managed authorization (SEP-990): the agent
	// exchanges an ID token of the enterprise identity provider (RFC 8693,
	// at EnterpriseIdP's token endpoint) for an identity assertion
	// authorization grant (ID-JAG) for the upstream's authorization server
	// and resource, and presents that as an RFC 7523 grant there.
	GrantIDJAG = readiness.GrantIDJAG
)

// EnterpriseIdP is the enterprise identity provider of GrantIDJAG.
type EnterpriseIdP struct {
	// TokenEndpoint is the identity provider's token endpoint (https, or
	// http on loopback). Required.
	TokenEndpoint string `json:"tokenEndpoint"`
	// ClientID is the agent's client at the identity provider. Required.
	ClientID string `json:"clientID"`
	// ClientSecretFile or ClientSecretEnv hold that client's secret (sent
	// with client_secret_basic); neither: the client is public.
	ClientSecretFile string `json:"clientSecretFile,omitempty"`
	ClientSecretEnv  string `json:"clientSecretEnv,omitempty"`
	// IDTokenFile or IDTokenEnv hold the ID token exchanged (exactly one),
	// read at every exchange.
	IDTokenFile string `json:"idTokenFile,omitempty"`
	IDTokenEnv  string `json:"idTokenEnv,omitempty"`
}

// DPoP makes an upstream's tokens sender-constrained (RFC 9449): every
// token request and every request to the upstream carries a proof signed
// by the upstream's key, and tokens are presented with the DPoP scheme.
type DPoP struct {
	// KeyFile is a PEM private key (P-256, P-384, P-521, RSA or Ed25519)
	// that signs the proofs; "" generates a P-256 key in memory when the
	// agent starts (tokens then do not survive a restart, which they do
	// not anyway).
	KeyFile string `json:"keyFile,omitempty"`
	// MaxNonceRetries bounds how often one request is resent with a new
	// server nonce (use_dpop_nonce); zero means 1.
	MaxNonceRetries int `json:"maxNonceRetries,omitempty"`
}

// Assertion reads GrantJWTBearer's JWT.
func (o OAuth) Assertion() (string, error) {
	a, err := readSecret(o.AssertionFile, o.AssertionEnv)
	if err == nil && a == "" {
		err = errors.New("the assertion is empty")
	}
	return a, err
}

// IDToken reads GrantIDJAG's ID token.
func (p EnterpriseIdP) IDToken() (string, error) {
	t, err := readSecret(p.IDTokenFile, p.IDTokenEnv)
	if err == nil && t == "" {
		err = errors.New("the ID token is empty")
	}
	return t, err
}

// ClientSecret reads the identity provider client's secret, "" for a
// public client.
func (p EnterpriseIdP) ClientSecret() (string, error) {
	return readSecret(p.ClientSecretFile, p.ClientSecretEnv)
}

// validateExt checks the JWT-bearer grants' and DPoP's settings: each
// needs its own source and takes no other grant's.
func (o OAuth) validateExt() error {
	bearer := o.Grant == GrantJWTBearer
	if bearer != (o.AssertionFile != "" || o.AssertionEnv != "") {
		return errors.New("oauth: grant jwt_bearer needs assertionFile or assertionEnv, and only it takes them")
	}
	if o.AssertionFile != "" && o.AssertionEnv != "" {
		return errors.New("oauth: set at most one of assertionFile and assertionEnv")
	}
	jag := o.Grant == GrantIDJAG
	if jag != (o.EnterpriseIdP != nil) {
		return errors.New("oauth: grant id_jag needs enterpriseIdP, and only it takes one")
	}
	if p := o.EnterpriseIdP; p != nil {
		switch {
		case p.ClientID == "":
			return errors.New("oauth.enterpriseIdP.clientID is required")
		case !secureURL(p.TokenEndpoint):
			return fmt.Errorf("oauth.enterpriseIdP.tokenEndpoint %q: want an https URL (plain http on loopback only)", p.TokenEndpoint)
		case (p.IDTokenFile == "") == (p.IDTokenEnv == ""):
			return errors.New("oauth.enterpriseIdP: set exactly one of idTokenFile and idTokenEnv")
		case p.ClientSecretFile != "" && p.ClientSecretEnv != "":
			return errors.New("oauth.enterpriseIdP: set at most one of clientSecretFile and clientSecretEnv")
		}
	}
	if d := o.DPoP; d != nil && d.MaxNonceRetries < 0 {
		return errors.New("oauth.dpop.maxNonceRetries must not be negative")
	}
	return nil
}

// secureURL reports whether u is an https URL, or an http one on loopback.
// Its host is compared whole, so http://127.0.0.1.example is not loopback.
func secureURL(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return false
	}
	return u.Scheme == "https" || u.Scheme == "http" && loopback.Host(u.Hostname())
}

// Key reads DPoP's key file (KeyFile must be set).
func (d DPoP) Key() ([]byte, error) {
	b, err := os.ReadFile(d.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("read: %w", err)
	}
	return b, nil
}
