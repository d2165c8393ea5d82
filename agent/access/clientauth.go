package access

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net/url"
	"slices"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"golang.org/x/oauth2"

	"github.com/mcpready/mcpready/agent/config"
)

// RFC 7523 client assertion type.
const assertionTypeJWT = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"

// assertionLifetime bounds a private_key_jwt client assertion.
const assertionLifetime = 2 * time.Minute

// ErrPrivateKey is a private_key_jwt key file that holds no usable key.
var ErrPrivateKey = errors.New("private key: want a PEM PKCS #8, EC or RSA private key (RSA, P-256, P-384, P-521 or Ed25519)")

// clientAuth is how one token request authenticates the client.
type clientAuth struct {
	id, secret string
	style      oauth2.AuthStyle
	// params are added to the request (private_key_jwt's assertion).
	params url.Values
}

// options are params as x/oauth2 request options.
func (a *clientAuth) options() []oauth2.AuthCodeOption {
	var opts []oauth2.AuthCodeOption
	for k, v := range a.params {
		opts = append(opts, oauth2.SetAuthURLParam(k, v[0]))
	}
	return opts
}

// authMethodPreference: what the agent picks among an authorization
// server's token_endpoint_auth_methods_supported when nothing fixes it.
var authMethodPreference = []string{config.AuthClientSecretBasic, config.AuthClientSecretPost}

// pickAuthMethod is the method a client with (or without) a secret uses
// at an authorization server supporting supported (empty: unknown).
func pickAuthMethod(hasSecret bool, supported []string) string {
	if !hasSecret {
		return config.AuthNone
	}
	for _, m := range authMethodPreference {
		if len(supported) == 0 || slices.Contains(supported, m) {
			return m
		}
	}
	return config.AuthClientSecretBasic
}

// newClientAuth authenticates client id with secret (or o's private key)
// by method at the authorization server issuer ("" method: o's, else
// by what the server supports).
func newClientAuth(o config.OAuth, id, secret, method string, d *Discovery, now time.Time) (*clientAuth, error) {
	if method == "" {
		method = o.TokenEndpointAuth
	}
	if method == "" {
		method = pickAuthMethod(secret != "", d.AuthMethods)
	}
	a := &clientAuth{id: id, secret: secret, style: oauth2.AuthStyleInHeader}
	switch method {
	case config.AuthClientSecretBasic:
	case config.AuthClientSecretPost:
		a.style = oauth2.AuthStyleInParams
	case config.AuthNone:
		a.style, a.secret = oauth2.AuthStyleInParams, ""
	case config.AuthPrivateKeyJWT:
		pemKey, err := o.PrivateKey()
		if err != nil {
			return nil, notReady(ReasonCredentials, "%v", err)
		}
		assertion, err := signAssertion(pemKey, id, d.Issuer, now)
		if err != nil {
			return nil, notReady(ReasonCredentials, "%v", err)
		}
		a.style, a.secret = oauth2.AuthStyleInParams, ""
		a.params = url.Values{"client_assertion_type": {assertionTypeJWT}, "client_assertion": {assertion}}
	default:
		return nil, notReady(ReasonNotConfigured, "token endpoint authentication %q is not supported", method)
	}
	return a, nil
}

// signAssertion is an RFC 7523 client assertion of client id for the
// authorization server issuer (its audience), signed with pemKey.
func signAssertion(pemKey []byte, id, issuer string, now time.Time) (string, error) {
	key, alg, err := ParsePrivateKey(pemKey)
	if err != nil {
		return "", err
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: key}, (&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		return "", ErrPrivateKey
	}
	claims := jwt.Claims{Issuer: id, Subject: id, Audience: jwt.Audience{issuer}, ID: rand.Text(),
		IssuedAt: jwt.NewNumericDate(now), NotBefore: jwt.NewNumericDate(now), Expiry: jwt.NewNumericDate(now.Add(assertionLifetime))}
	return jwt.Signed(signer).Claims(claims).Serialize()
}

// ParsePrivateKey reads the first PEM block of b as a private key (PKCS #8,
// SEC 1 EC or PKCS #1 RSA) and returns it with the JWS algorithm it signs
// with; anything else is ErrPrivateKey.
func ParsePrivateKey(b []byte) (crypto.Signer, jose.SignatureAlgorithm, error) {
	block, _ := pem.Decode(b)
	if block == nil {
		return nil, "", ErrPrivateKey
	}
	var key any
	var err error
	switch block.Type {
	case "PRIVATE KEY":
		key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(block.Bytes)
	case "RSA PRIVATE KEY":
		key, err = x509.ParsePKCS1PrivateKey(block.Bytes)
	default:
		return nil, "", ErrPrivateKey
	}
	if err != nil {
		return nil, "", ErrPrivateKey
	}
	switch k := key.(type) {
	case *ecdsa.PrivateKey:
		switch k.Curve {
		case elliptic.P256():
			return k, jose.ES256, nil
		case elliptic.P384():
			return k, jose.ES384, nil
		case elliptic.P521():
			return k, jose.ES512, nil
		}
	case *rsa.PrivateKey:
		if k.N.BitLen() >= 2048 {
			return k, jose.RS256, nil
		}
	case ed25519.PrivateKey:
		return k, jose.EdDSA, nil
	}
	return nil, "", ErrPrivateKey
}
