package access

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// Claims are the facts of a verified access token the checks need.
type Claims struct {
	Issuer   string
	Subject  string
	Audience []string
	Scopes   []string
	Expiry   time.Time
	// Extra holds the remaining claims (for mapping local principals).
	Extra map[string]any
}

// signatureAlgorithms accepted for access tokens.
var signatureAlgorithms = []jose.SignatureAlgorithm{jose.RS256, jose.RS384, jose.RS512, jose.ES256, jose.ES384, jose.ES512, jose.PS256, jose.EdDSA}

// maxJWKS bounds a JWKS document.
const maxJWKS = 1 << 20

// KeySets caches issuers' JWKS, refetched once when a token names an
// unknown key id. It is safe for concurrent use.
type KeySets struct {
	HTTP *http.Client
	mu   sync.Mutex
	sets map[string]*jose.JSONWebKeySet // by JWKS URL
}

func (k *KeySets) get(ctx context.Context, jwksURL string, refresh bool) (*jose.JSONWebKeySet, error) {
	k.mu.Lock()
	ks := k.sets[jwksURL]
	k.mu.Unlock()
	if ks != nil && !refresh {
		return ks, nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, jwksURL, nil)
	if err != nil {
		return nil, err
	}
	hc := k.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("JWKS unreachable")
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("JWKS: HTTP %d", resp.StatusCode)
	}
	var set jose.JSONWebKeySet
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxJWKS)).Decode(&set); err != nil {
		return nil, fmt.Errorf("JWKS malformed")
	}
	k.mu.Lock()
	if k.sets == nil {
		k.sets = map[string]*jose.JSONWebKeySet{}
	}
	k.sets[jwksURL] = &set
	k.mu.Unlock()
	return &set, nil
}

// Verify checks tok's signature against the JWKS at jwksURL and that it
// was issued by issuer, and returns its claims. Audience, scopes and
// expiry are Check's. Errors are NotReadyError with
// ReasonSignatureInvalid and never contain the token.
func (k *KeySets) Verify(ctx context.Context, tok, jwksURL, issuer string) (*Claims, error) {
	parsed, err := jwt.ParseSigned(tok, signatureAlgorithms)
	if err != nil || len(parsed.Headers) != 1 {
		return nil, notReady(ReasonSignatureInvalid, "the access token is not a signed JWT")
	}
	kid := parsed.Headers[0].KeyID
	var raw map[string]any
	var std jwt.Claims
	for _, refresh := range []bool{false, true} {
		ks, err := k.get(ctx, jwksURL, refresh)
		if err != nil {
			return nil, notReady(ReasonSignatureInvalid, "issuer keys: %v", err)
		}
		keys := ks.Key(kid)
		if len(keys) == 0 {
			continue
		}
		if err := parsed.Claims(keys[0], &std, &raw); err != nil {
			return nil, notReady(ReasonSignatureInvalid, "the access token's signature does not verify against the issuer's JWKS")
		}
		return claimsFrom(std, raw, issuer)
	}
	return nil, notReady(ReasonSignatureInvalid, "the access token's key is not in the issuer's JWKS")
}

func claimsFrom(std jwt.Claims, raw map[string]any, issuer string) (*Claims, error) {
	if std.Issuer != issuer {
		return nil, notReady(ReasonIssuerMismatch, "the access token was issued by another authorization server")
	}
	if std.Expiry == nil {
		return nil, notReady(ReasonExpired, "the access token has no expiry")
	}
	c := &Claims{Issuer: std.Issuer, Subject: std.Subject, Audience: std.Audience, Expiry: std.Expiry.Time(), Extra: raw}
	switch sc := raw["scope"].(type) {
	case string:
		c.Scopes = strings.Fields(sc)
	case []any:
		for _, s := range sc {
			if s, ok := s.(string); ok {
				c.Scopes = append(c.Scopes, s)
			}
		}
	}
	for _, k := range []string{"iss", "sub", "aud", "exp", "iat", "nbf", "jti", "scope"} {
		delete(raw, k)
	}
	return c, nil
}

// factsOf are the facts of a verified token cl of up, discovered as d:
// what Check checks and receipts record.
func factsOf(cl *Claims, d *Discovery, up *Upstream) Facts {
	return Facts{Issuer: cl.Issuer, Audience: cl.Audience, Scopes: grantedScopes(cl.Scopes), Expiry: cl.Expiry,
		Tenant: cl.Claim(up.OAuth.TenantClaim), AuthorizationServers: d.AuthorizationServers}
}

// Claim is the string value of the token's claim name, "" when name is
// "", the claim is absent or it is not a string.
func (c *Claims) Claim(name string) string {
	s, _ := c.Extra[name].(string)
	return s
}
