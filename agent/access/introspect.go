package access

// RFC 7662 token introspection of opaque upstream tokens, where the
// upstream's configuration asks for it (config.OAuth.Introspection): the
// endpoint from the configuration, else the authorization server
// metadata's introspection_endpoint; the agent authenticates as the
// upstream's client; a result is cached per token (by its SHA-256, never
// the token) for at most the configured TTL and never past the token's
// expiry, and re-checked before the token is presented once it lapses.
// Without the configuration an opaque token is refused, as before.

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4/jwt"
	"golang.org/x/oauth2"

	"github.com/mcpready/mcpready/agent/config"
)

// defaultIntrospectionTTL is config.Introspection.CacheSeconds' zero value.
const defaultIntrospectionTTL = time.Minute

// maxIntrospection bounds an introspection response.
const maxIntrospection = 1 << 20

// introspections caches introspection results by token digest.
type introspections struct {
	mu sync.Mutex
	m  map[[sha256.Size]byte]introspected
}

type introspected struct {
	claims *Claims
	until  time.Time
}

func (in *introspections) get(k [sha256.Size]byte, now time.Time) *Claims {
	in.mu.Lock()
	defer in.mu.Unlock()
	if r, ok := in.m[k]; ok && now.Before(r.until) {
		return r.claims
	}
	return nil
}

func (in *introspections) put(k [sha256.Size]byte, cl *Claims, until, now time.Time) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.m == nil {
		in.m = map[[sha256.Size]byte]introspected{}
	}
	for old, r := range in.m { // lapsed results are never used again
		if !now.Before(r.until) {
			delete(in.m, old)
		}
	}
	in.m[k] = introspected{claims: cl, until: until}
}

// verify checks the token response tok of up: a JWT against the issuer's
// JWKS; an opaque token by introspection when up configures it (else it
// fails as a JWT that does not parse).
func (c *Client) verify(ctx context.Context, tok *oauth2.Token, up *Upstream, d *Discovery) (*Claims, error) {
	if up.OAuth.Introspection == nil || LooksLikeJWT(tok.AccessToken) {
		return c.keys.Verify(ctx, tok.AccessToken, d.JWKSURI, d.Issuer)
	}
	return c.introspect(ctx, tok.AccessToken, tok.Expiry, up, d)
}

// stillActive re-checks an introspected grant before it is presented: the
// cached result while it lasts, else a new introspection. An inactive
// token is dropped from the cache, so the next call obtains another.
func (c *Client) stillActive(ctx context.Context, g *Grant, up *Upstream) error {
	if up.OAuth.Introspection == nil || LooksLikeJWT(g.token) {
		return nil
	}
	c.mu.Lock()
	d := c.disc[up.Name]
	c.mu.Unlock()
	if d == nil {
		return notReady(ReasonIntrospectionUnavailable, "the authorization server of the upstream is not known")
	}
	_, err := c.introspect(ctx, g.token, g.Facts.Expiry, up, d)
	if ReasonOf(err) == ReasonTokenInactive {
		c.drop(g)
	}
	return err
}

// drop removes g from every scope-set cache that holds it.
func (c *Client) drop(g *Grant) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, pr := range c.pairs {
		for k, held := range pr.grants {
			if held == g {
				delete(pr.grants, k)
			}
		}
		pr.setCur()
	}
}

// introspect asks up's introspection endpoint about tok (RFC 7662) and
// returns its claims; exp is the token response's expiry, used when the
// answer has none. Errors never contain the token or the endpoint's text.
func (c *Client) introspect(ctx context.Context, tok string, exp time.Time, up *Upstream, d *Discovery) (*Claims, error) {
	key := sha256.Sum256([]byte(tok))
	now := c.o.Now()
	if cl := c.intro.get(key, now); cl != nil {
		return cl, nil
	}
	o := up.OAuth
	endpoint := o.Introspection.Endpoint
	if endpoint == "" {
		endpoint = d.IntrospectionEndpoint
	}
	if endpoint == "" {
		return nil, notReady(ReasonNotConfigured, "introspection is configured but the authorization server's metadata names no introspection_endpoint")
	}
	secret, err := o.ClientSecret()
	if err != nil {
		return nil, notReady(ReasonCredentials, "%v", err)
	}
	form := url.Values{"token": {tok}, "token_type_hint": {"access_token"}}
	if o.TokenEndpointAuth == config.AuthClientSecretPost {
		form.Set("client_id", o.ClientID)
		form.Set("client_secret", secret)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, notReady(ReasonIntrospectionUnavailable, "the introspection endpoint is not a valid URL")
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	if o.TokenEndpointAuth != config.AuthClientSecretPost {
		req.SetBasicAuth(url.QueryEscape(o.ClientID), url.QueryEscape(secret)) // RFC 6749 §2.3.1
	}
	resp, err := c.o.HTTP.Do(req)
	if err != nil {
		return nil, notReady(ReasonIntrospectionUnavailable, "the introspection endpoint is unreachable")
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, notReady(ReasonIntrospectionUnavailable, "the introspection endpoint answered HTTP %d", resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxIntrospection))
	if err != nil {
		return nil, notReady(ReasonIntrospectionUnavailable, "the introspection answer could not be read")
	}
	cl, err := ParseIntrospection(body, d.Issuer, exp)
	if err != nil {
		return nil, err
	}
	ttl := defaultIntrospectionTTL
	if s := o.Introspection.CacheSeconds; s > 0 {
		ttl = time.Duration(s) * time.Second
	}
	until := now.Add(ttl)
	if cl.Expiry.Before(until) {
		until = cl.Expiry
	}
	c.intro.put(key, cl, until, now)
	return cl, nil
}

// ParseIntrospection reads an RFC 7662 introspection response: an
// inactive token is a NotReadyError with ReasonTokenInactive; an active
// one's claims as Verify returns them for a JWT, its issuer the answer's
// iss (else issuer, the server asked) and its expiry exp (else the given
// exp; a token with neither is refused). A response that is not JSON or
// has no boolean "active" is ReasonIntrospectionUnavailable.
func ParseIntrospection(body []byte, issuer string, exp time.Time) (*Claims, error) {
	var head struct {
		Active *bool `json:"active"`
	}
	var std jwt.Claims
	var raw map[string]any
	if json.Unmarshal(body, &head) != nil || head.Active == nil || json.Unmarshal(body, &std) != nil || json.Unmarshal(body, &raw) != nil {
		return nil, notReady(ReasonIntrospectionUnavailable, "the introspection endpoint answered malformed data")
	}
	if !*head.Active {
		return nil, notReady(ReasonTokenInactive, "the authorization server says the token is not active")
	}
	if std.Issuer == "" {
		std.Issuer = issuer
	}
	if std.Expiry == nil && !exp.IsZero() {
		std.Expiry = jwt.NewNumericDate(exp)
	}
	for _, k := range []string{"active", "client_id", "token_type", "username"} {
		delete(raw, k)
	}
	return claimsFrom(std, raw, issuer)
}
