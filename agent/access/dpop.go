package access

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/mcpready/mcpready/agent/config"
)

// DPoP (RFC 9449): an upstream with oauth.dpop has one key; every token
// request to its authorization server and every request to it carries a
// fresh proof signed by that key, and its tokens are presented with the
// DPoP scheme. Server nonces (DPoP-Nonce) are kept per upstream, one for
// the token endpoint and one for the resource, and a use_dpop_nonce
// answer is resent with the new nonce at most MaxNonceRetries times.

// dpopState is one upstream's DPoP key and nonces.
type dpopState struct {
	signer  jose.Signer
	alg     jose.SignatureAlgorithm
	retries int

	mu               sync.Mutex
	asNonce, rsNonce string
}

// dpopOf is up's DPoP state, nil when up has none; its key is read (or
// generated) on first use.
func (c *Client) dpopOf(up *Upstream) (*dpopState, error) {
	o := up.OAuth.DPoP
	if o == nil {
		return nil, nil
	}
	if s, ok := c.dpop.Load(up.Name); ok {
		return s.(*dpopState), nil
	}
	s, err := newDPoP(o)
	if err != nil {
		return nil, err
	}
	got, _ := c.dpop.LoadOrStore(up.Name, s)
	return got.(*dpopState), nil
}

func newDPoP(o *config.DPoP) (*dpopState, error) {
	var key crypto.Signer
	alg := jose.ES256
	if o.KeyFile != "" {
		pemKey, err := o.Key()
		if err != nil {
			return nil, notReady(ReasonCredentials, "dpop key file: %v", err)
		}
		if key, alg, err = ParsePrivateKey(pemKey); err != nil {
			return nil, notReady(ReasonCredentials, "dpop key: %v", err)
		}
	} else {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, notReady(ReasonCredentials, "dpop key generation failed")
		}
		key = k
	}
	// EmbedJWK puts the public key (never the private part) in the header.
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: key}, (&jose.SignerOptions{EmbedJWK: true}).WithType("dpop+jwt"))
	if err != nil {
		return nil, notReady(ReasonCredentials, "dpop key: %v", ErrPrivateKey)
	}
	retries := o.MaxNonceRetries
	if retries == 0 {
		retries = 1
	}
	return &dpopState{signer: signer, alg: alg, retries: retries}, nil
}

// proof is a DPoP proof for method at u (its query and fragment dropped),
// bound to token when one is presented, with nonce when not "".
func (s *dpopState) proof(method string, u *url.URL, token, nonce string, now time.Time) (string, error) {
	htu := url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path, RawPath: u.RawPath}
	claims := map[string]any{"jti": rand.Text(), "htm": method, "htu": htu.String(), "iat": now.Unix()}
	if token != "" {
		sum := sha256.Sum256([]byte(token))
		claims["ath"] = base64.RawURLEncoding.EncodeToString(sum[:])
	}
	if nonce != "" {
		claims["nonce"] = nonce
	}
	p, err := jwt.Signed(s.signer).Claims(claims).Serialize()
	if err != nil {
		return "", notReady(ReasonCredentials, "dpop proof signing failed")
	}
	return p, nil
}

// nonce reads (resource: the resource's, else the token endpoint's).
func (s *dpopState) nonce(resource bool) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if resource {
		return s.rsNonce
	}
	return s.asNonce
}

// note keeps the nonce resp supplies; it reports whether there was one.
func (s *dpopState) note(resp *http.Response, resource bool) bool {
	n := resp.Header.Get("DPoP-Nonce")
	if n == "" || len(n) > 1024 {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if resource {
		s.rsNonce = n
	} else {
		s.asNonce = n
	}
	return true
}

// send sends req (a copy with the proof) through base, resent with the
// server's new nonce after use_dpop_nonce at most s.retries times, as
// long as req's body can be resent. token is the access token presented
// ("" at the token endpoint).
func (s *dpopState) send(base http.RoundTripper, req *http.Request, token string, resource bool, now func() time.Time) (*http.Response, error) {
	for n := 0; ; n++ {
		r := req.Clone(req.Context())
		if n > 0 {
			body, err := req.GetBody()
			if err != nil {
				return nil, err
			}
			r.Body = body
		}
		p, err := s.proof(req.Method, req.URL, token, s.nonce(resource), now())
		if err != nil {
			return nil, err
		}
		r.Header.Set("DPoP", p)
		if token != "" {
			r.Header.Set("Authorization", "DPoP "+token)
		}
		resp, err := base.RoundTrip(r)
		if err != nil {
			return nil, err
		}
		fresh := s.note(resp, resource)
		if !fresh || n >= s.retries || (req.Body != nil && req.GetBody == nil) || !UseDPoPNonce(resp) {
			return resp, nil
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
		_ = resp.Body.Close()
	}
}

// UseDPoPNonce reports whether resp asks for a DPoP proof with a server
// nonce (RFC 9449 §8, §9): a resource's 401 with a DPoP challenge of error
// use_dpop_nonce, or a token endpoint's 400 with that error code. A token
// endpoint's body is read and put back.
func UseDPoPNonce(resp *http.Response) bool {
	switch resp.StatusCode {
	case http.StatusUnauthorized:
		cs, err := oauthex.ParseWWWAuthenticate(resp.Header.Values("WWW-Authenticate"))
		if err != nil {
			return false
		}
		for _, c := range cs {
			if c.Scheme == "dpop" && c.Params["error"] == "use_dpop_nonce" {
				return true
			}
		}
	case http.StatusBadRequest:
		if resp.Body == nil {
			return false
		}
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
		_ = resp.Body.Close()
		resp.Body = io.NopCloser(bytes.NewReader(b))
		var e struct {
			Error string `json:"error"`
		}
		return json.Unmarshal(b, &e) == nil && e.Error == "use_dpop_nonce"
	}
	return false
}

// tokenHTTP is the HTTP client of up's token requests at the token
// endpoint of d: c's, with DPoP proofs on requests to that endpoint when
// up has oauth.dpop.
func (c *Client) tokenHTTP(up *Upstream, d *Discovery) (*http.Client, error) {
	s, err := c.dpopOf(up)
	if err != nil || s == nil {
		return c.o.HTTP, err
	}
	if len(d.DPoPAlgs) > 0 && !slices.Contains(d.DPoPAlgs, string(s.alg)) {
		return nil, notReady(ReasonNotConfigured, "the upstream accepts DPoP proofs signed with %d algorithm(s), not the key's %s", len(d.DPoPAlgs), s.alg)
	}
	hc := *c.o.HTTP
	base := hc.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	hc.Transport = &dpopTokenTransport{s: s, base: base, endpoint: d.TokenEndpoint, now: c.o.Now}
	return &hc, nil
}

type dpopTokenTransport struct {
	s        *dpopState
	base     http.RoundTripper
	endpoint string
	now      func() time.Time
}

func (t *dpopTokenTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodPost || !sameEndpoint(req.URL, t.endpoint) {
		return t.base.RoundTrip(req)
	}
	return t.s.send(t.base, req, "", false, t.now)
}

// sameEndpoint reports whether u is endpoint, query aside.
func sameEndpoint(u *url.URL, endpoint string) bool {
	e, err := url.Parse(endpoint)
	return err == nil && e.Scheme == u.Scheme && e.Host == u.Host && strings.TrimSuffix(e.Path, "/") == strings.TrimSuffix(u.Path, "/")
}

// present sends req to up with g's token: with the DPoP scheme and a
// fresh proof (and the resource's nonce) when up has oauth.dpop, else as
// a Bearer token.
func (c *Client) present(base http.RoundTripper, req *http.Request, g *Grant, up *Upstream) (*http.Response, error) {
	s, err := c.dpopOf(up)
	if err != nil {
		return nil, err
	}
	if s == nil {
		r := req.Clone(req.Context())
		r.Header.Set("Authorization", "Bearer "+g.token)
		return base.RoundTrip(r)
	}
	return s.send(base, req, g.token, true, c.o.Now)
}

// dpopBound refuses a token of a DPoP upstream that is not DPoP-bound
// (token_type other than DPoP): a bearer token would be weaker than the
// upstream is configured for.
func dpopBound(up *Upstream, tokenType string) error {
	if up.OAuth.DPoP != nil && !strings.EqualFold(tokenType, "DPoP") {
		return notReady(ReasonTokenFailed, "the authorization server issued a token that is not DPoP-bound")
	}
	return nil
}
