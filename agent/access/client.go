package access

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcpready/mcpready/agent/config"
	"github.com/mcpready/mcpready/internal/redirect"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
	"golang.org/x/sync/singleflight"
)

// RFC 8693 identifiers.
const (
	tokenTypeAccessToken = "urn:ietf:params:oauth:token-type:access_token"
	grantTypeExchange    = "urn:ietf:params:oauth:grant-type:token-exchange"
)

// Upstream is one upstream as the access layer sees it.
type Upstream struct {
	// Name is the server name (the cache key).
	Name string
	// URL is the MCP endpoint, the resource the tokens are for.
	URL   string
	OAuth config.OAuth
}

// Principal is the local principal a token is for.
type Principal struct {
	// Name identifies the principal (the cache key); "" for the agent
	// itself as a service principal.
	Name string
	// SubjectToken is the principal's own access token from the
	// organisation's identity provider, exchanged under GrantTokenExchange;
	// memory only.
	SubjectToken string
}

// Options configures a Client. The zero value is usable.
type Options struct {
	// HTTP reaches authorization servers and metadata; nil uses a client
	// like http.DefaultClient. Unless it has a CheckRedirect of its own, a
	// redirect is followed only within the origin of the first request
	// (ErrCrossOriginRedirect): token, introspection and registration
	// requests carry client credentials, which a 307 or 308 would re-send
	// to wherever it points.
	HTTP *http.Client
	// RefreshAhead: a cached token with less lifetime left is replaced
	// before it is presented (a token living less than twice it, at half
	// its life); zero means 30s.
	RefreshAhead time.Duration
	// Now is the clock; nil uses time.Now.
	Now func() time.Time
	// Authorizer has the user complete authorization-code flows; nil
	// makes grant authorization_code ACCESS_NOT_READY (oauth-not-configured).
	Authorizer Authorizer
	// AuthorizationTimeout bounds one authorization-code flow (the user's
	// time included); zero means 5 minutes.
	AuthorizationTimeout time.Duration
}

// unverifiedLifetime is how long a token response without expires_in is
// presented when tokens are not verified.
const unverifiedLifetime = 5 * time.Minute

// Grant is a verified token and its facts. The token is only for the
// Authorization header; Facts are what may be recorded.
type Grant struct {
	token string
	Facts Facts
	// obtained is when the token was obtained (Options.Now).
	obtained time.Time
	pr       *pair  // whose grant it is: its step-up sequence ends when it succeeds
	sel      string // the scope selection it was obtained for (joined)
}

// succeeded ends the step-up sequence of g's principal at its upstream: a
// request that presented g was answered with neither 401 nor 403.
func (g *Grant) succeeded() {
	if g != nil && g.pr != nil && g.pr.stepUps.Load() != 0 {
		g.pr.stepUps.Store(0)
	}
}

// Client obtains, verifies and caches upstream tokens. It is safe for
// concurrent use; tokens live in its memory only.
type Client struct {
	o     Options
	keys  KeySets
	intro introspections // results of RFC 7662 introspection (introspect.go)
	dpop  sync.Map       // upstream name → *dpopState (dpop.go)

	// flights are the token requests under way, by flightKey: concurrent
	// misses of one (principal, upstream, scope set) share one.
	flights singleflight.Group

	mu    sync.Mutex
	disc  map[string]*Discovery // by upstream name
	pairs map[pairKey]*pair     // per principal and upstream
	regs  map[regKey]registration
}

type pairKey struct{ principal, upstream string }

// pair is the state of one principal at one upstream.
type pair struct {
	sel    *selection        // nil: the default selection (selectionLocked)
	grants map[string]*Grant // by scope set (joined, sorted)
	// cur is grants[sel.key] (nil without a selection), set under c.mu
	// whenever either changes (setCur), read without the lock (Guard).
	cur    atomic.Pointer[Grant]
	expect atomic.Pointer[Expect]
	// The authorization-code flow's: the pending flow, and the refresh
	// token of the last one with its scope set.
	flow                *flow
	refresh, refreshKey string
	// stepUps counts the step-ups of the current challenge sequence: since
	// the last request of this pair that succeeded (Grant.succeeded).
	stepUps atomic.Int32
}

type selection struct {
	scopes []string
	key    string // joined(scopes)
}

// New returns a Client.
func New(o Options) *Client {
	if o.HTTP == nil {
		o.HTTP = &http.Client{}
	}
	if o.HTTP.CheckRedirect == nil {
		hc := *o.HTTP
		hc.CheckRedirect = redirect.SameOrigin
		o.HTTP = &hc
	}
	if o.RefreshAhead == 0 {
		o.RefreshAhead = 30 * time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.AuthorizationTimeout == 0 {
		o.AuthorizationTimeout = 5 * time.Minute
	}
	return &Client{o: o, keys: KeySets{HTTP: o.HTTP}, disc: map[string]*Discovery{}, pairs: map[pairKey]*pair{}, regs: map[regKey]registration{}}
}

// ErrCrossOriginRedirect: an authorization server, or the metadata of
// one, redirected the agent to another origin; the redirect was not
// followed.
var ErrCrossOriginRedirect = redirect.ErrCrossOrigin

func (c *Client) principalOf(p Principal, up *Upstream) pairKey {
	return pairKey{Owner(p, up), up.Name}
}

// Owner is whose token p's requests present at up: p's name under token
// exchange and the authorization-code flow, "" (the agent itself) under
// the other grants and for requests of no principal. An upstream binds a
// session to the user whose token opened it, so a session is shared only
// among the requests of one owner.
func Owner(p Principal, up *Upstream) string {
	switch grantOf(p, up) {
	case config.GrantClientCredentials, config.GrantJWTBearer, config.GrantIDJAG:
		// The agent's own identity (its credentials, its files), not p's.
		return ""
	}
	return p.Name
}

// grantOf is the grant a request of p uses at up: the configured one,
// except that requests for no principal (a session's initialize, listings
// and event stream, which no principal makes) use the agent's own client
// credentials on a token-exchange upstream too. Calls and methods always
// carry their principal (the pipeline sets it).
func grantOf(p Principal, up *Upstream) string {
	if up.OAuth.Grant == config.GrantTokenExchange && p == (Principal{}) {
		return config.GrantClientCredentials
	}
	return up.OAuth.Grant
}

// Token returns a verified token for p at up that is not within
// RefreshAhead of its expiry: the cached one, else a new one (discovering
// the authorization server first when it is not known yet). When getting
// the new one fails, a held token that has not expired yet is returned;
// an expired one never is.
func (c *Client) Token(ctx context.Context, p Principal, up *Upstream) (*Grant, error) {
	pk := c.principalOf(p, up)
	now := c.o.Now()
	c.mu.Lock()
	sel := c.selectionLocked(pk, up)
	g := c.grantLocked(pk)
	c.mu.Unlock()
	if g != nil && g.Facts.Expiry.Sub(now) > g.refreshMargin(c.o.RefreshAhead) {
		return g, nil
	}
	fresh, err := c.fetch(ctx, p, up, nil, pk, sel)
	if err != nil && g != nil && g.Facts.Expiry.After(now) {
		return g, nil // refresh failed early: the held token is still valid
	}
	return fresh, err
}

// refreshMargin is how long before its expiry g is replaced: ahead
// (Options.RefreshAhead), or half g's lifetime when that is shorter, so
// that a token living less than ahead is reused for half its life rather
// than replaced at every request.
func (g *Grant) refreshMargin(ahead time.Duration) time.Duration {
	if half := g.Facts.Expiry.Sub(g.obtained) / 2; !g.obtained.IsZero() && half < ahead {
		return half
	}
	return ahead
}

// flight is what one token request gave its callers.
type flight struct {
	g *Grant
	// abandoned: the caller that made the request gave up on it (its
	// context ended), so the others ask again for themselves.
	abandoned bool
}

// fetch obtains a new token for pk's scopes sel at up (discovering the
// authorization server first when d is nil and it is not known yet), one
// request per (principal, upstream, scope set) at a time: callers that
// miss the cache together share the first one's request and its result.
// (The authorization-code flow shares its pending flow itself: codeToken.)
func (c *Client) fetch(ctx context.Context, p Principal, up *Upstream, d *Discovery, pk pairKey, sel []string) (*Grant, error) {
	if grantOf(p, up) == config.GrantAuthorizationCode {
		return c.miss(ctx, p, up, d, pk, sel)
	}
	key := pk.principal + "\x00" + pk.upstream + "\x00" + joined(sel)
	for {
		ch := c.flights.DoChan(key, func() (any, error) {
			g, err := c.miss(ctx, p, up, d, pk, sel)
			return flight{g: g, abandoned: ctx.Err() != nil}, err
		})
		select {
		case <-ctx.Done():
			return nil, tokenError(ctx.Err()) // as if it had made the request itself
		case r := <-ch:
			f := r.Val.(flight)
			if r.Err != nil && f.abandoned && ctx.Err() == nil {
				continue
			}
			return f.g, r.Err
		}
	}
}

// miss is one token request of fetch.
func (c *Client) miss(ctx context.Context, p Principal, up *Upstream, d *Discovery, pk pairKey, sel []string) (*Grant, error) {
	if d == nil {
		c.mu.Lock()
		d = c.disc[up.Name]
		c.mu.Unlock()
	}
	if d == nil || d.TokenEndpoint == "" { // unknown, or it named a foreign issuer
		var err error
		if d, err = c.discover(ctx, up, nil); err != nil {
			return nil, err
		}
	}
	return c.obtain(ctx, p, up, d, pk, sel)
}

// Lookup returns the cached grant for p at up without any I/O, nil when
// there is none.
func (c *Client) Lookup(p Principal, up *Upstream) *Grant {
	pk := c.principalOf(p, up)
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.grantLocked(pk)
}

// selectionLocked is the current scope selection of pk: what a challenge
// or a step-up selected, else the configured scopes, else the scope of the
// upstream's last 401 challenge (to any principal), else the metadata's
// scopes_supported.
func (c *Client) selectionLocked(pk pairKey, up *Upstream) []string {
	if pr := c.pairs[pk]; pr != nil && pr.sel != nil {
		return pr.sel.scopes
	}
	if len(up.OAuth.Scopes) > 0 {
		return sortedSet(up.OAuth.Scopes)
	}
	if d := c.disc[up.Name]; d != nil {
		if len(d.ChallengeScopes) > 0 {
			return sortedSet(d.ChallengeScopes)
		}
		return sortedSet(d.ScopesSupported)
	}
	return nil
}

// grantLocked is pk's cached grant for its current selection (a grant is
// only cached once the pair has a selection: obtain).
func (c *Client) grantLocked(pk pairKey) *Grant {
	pr := c.pairs[pk]
	if pr == nil {
		return nil
	}
	return pr.cur.Load()
}

// setCur makes cur the grant of pr's selection; called under c.mu after
// every change of pr.sel or pr.grants.
func (pr *pair) setCur() {
	if pr.sel == nil {
		pr.cur.Store(nil)
		return
	}
	pr.cur.Store(pr.grants[pr.sel.key])
}

// selectLocked makes scopes pk's selection.
func (c *Client) selectLocked(pk pairKey, scopes []string) *selection {
	pr := c.pairLocked(pk)
	if pr.sel == nil {
		pr.sel = &selection{}
	}
	pr.sel.scopes, pr.sel.key = scopes, joined(scopes)
	pr.setCur()
	return pr.sel
}

// pairLocked is pk's state, created on first use.
func (c *Client) pairLocked(pk pairKey) *pair {
	pr := c.pairs[pk]
	if pr == nil {
		pr = &pair{grants: map[string]*Grant{}}
		c.pairs[pk] = pr
	}
	return pr
}

// Authorize handles a 401 or 403 answer of up to p's request: it
// (re)discovers the authorization server from the challenge, selects the
// scopes (the challenge's scope, else the configured ones, else
// scopes_supported; on insufficient_scope the union with what was held,
// only when the challenge asks for something new, and at most
// OAuth.MaxStepUps times in one challenge sequence, which a request that
// succeeds ends) and obtains a new token. refused is the grant the
// answered request presented (nil: none): when another request has
// already stepped up to what the challenge asks since refused was
// obtained, that selection's token is used and no step-up is counted.
func (c *Client) Authorize(ctx context.Context, p Principal, up *Upstream, refused *Grant, status int, hdr http.Header) (*Grant, error) {
	ch := ParseChallenge(hdr)
	pk := c.principalOf(p, up)
	if status == http.StatusForbidden && ch.Error != "insufficient_scope" {
		return nil, notReady(ReasonTokenFailed, "the upstream refused the token (HTTP 403)")
	}
	d, err := c.discover(ctx, up, hdr)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	held := c.selectionLocked(pk, up)
	var sel []string
	switch {
	case ch.Error == "insufficient_scope":
		pr := c.pairLocked(pk)
		union := sortedSet(append(slices.Clone(held), ch.Scopes...))
		if len(union) == len(held) && refused != nil && refused.sel != joined(held) {
			// Stepped up meanwhile by a request refused at the same time.
			g := pr.grants[joined(held)]
			c.mu.Unlock()
			if g != nil && g.Facts.Expiry.After(c.o.Now()) {
				return g, nil
			}
			return c.fetch(ctx, p, up, d, pk, held)
		}
		limit := int32(up.OAuth.MaxStepUps)
		if limit == 0 {
			limit = 2
		}
		if n := pr.stepUps.Load(); len(union) == len(held) || n >= limit {
			c.mu.Unlock()
			return nil, notReady(ReasonStepUpExhausted, "insufficient_scope after %d step-up(s)", n)
		}
		pr.stepUps.Add(1)
		c.selectLocked(pk, union)
		sel = union
	case len(ch.Scopes) > 0 && len(up.OAuth.Scopes) == 0:
		sel = sortedSet(ch.Scopes)
		c.selectLocked(pk, sel)
		c.pairLocked(pk).stepUps.Store(0)
	default:
		sel = held
	}
	// The token the upstream refused is no longer presented.
	pr := c.pairLocked(pk)
	delete(pr.grants, joined(held))
	pr.setCur()
	c.mu.Unlock()
	return c.fetch(ctx, p, up, d, pk, sel)
}

// discover learns up's authorization server. A protected resource that
// names another issuer than the configured one is remembered too, so that
// Guard keeps rejecting it.
func (c *Client) discover(ctx context.Context, up *Upstream, hdr http.Header) (*Discovery, error) {
	d, err := discover(ctx, c.o.HTTP, up.URL, hdr, up.OAuth.Issuer)
	if ch := ParseChallenge(hdr); d != nil && ch.Error == "" {
		d.ChallengeScopes = ch.Scopes
	}
	if d != nil {
		c.mu.Lock()
		c.disc[up.Name] = d
		c.mu.Unlock()
	}
	if err != nil {
		return nil, err
	}
	return d, nil
}

// obtain requests a token for the selected scopes, verifies it and caches
// it under (principal, upstream, scopes).
func (c *Client) obtain(ctx context.Context, p Principal, up *Upstream, d *Discovery, pk pairKey, scopes []string) (*Grant, error) {
	o := up.OAuth
	resource := resourceOf(up, d)
	hc, err := c.tokenHTTP(up, d)
	if err != nil {
		return nil, err
	}
	hctx := context.WithValue(ctx, oauth2.HTTPClient, hc)
	var tok *oauth2.Token
	asked := scopes
	switch grant := grantOf(p, up); grant {
	case config.GrantAuthorizationCode:
		var err error
		if tok, err = c.codeToken(ctx, p, up, d, pk, scopes); err != nil {
			return nil, err
		}
		asked = askedScopes(scopes, d)
	case config.GrantClientCredentials, config.GrantTokenExchange, config.GrantJWTBearer, config.GrantIDJAG:
		secret, err := o.ClientSecret()
		if err != nil {
			return nil, notReady(ReasonCredentials, "%v", err)
		}
		ca, err := newClientAuth(o, o.ClientID, secret, "", d, c.o.Now())
		if err != nil {
			return nil, err
		}
		switch grant {
		case config.GrantJWTBearer, config.GrantIDJAG:
			if tok, err = c.bearerGrant(hctx, up, d, ca, resource, scopes); err != nil {
				return nil, err
			}
		case config.GrantClientCredentials:
			params := url.Values{"resource": {resource}}
			for k, v := range ca.params {
				params[k] = v
			}
			cc := clientcredentials.Config{ClientID: ca.id, ClientSecret: ca.secret, TokenURL: d.TokenEndpoint, Scopes: scopes,
				AuthStyle: ca.style, EndpointParams: params}
			tok, err = cc.Token(hctx)
		default:
			if p.SubjectToken == "" {
				return nil, notReady(ReasonNoSubjectToken, "token exchange needs the principal's own token; principal %q has none", p.Name)
			}
			tok, err = tokenRequest(hctx, ca, d.TokenEndpoint, scopes,
				"grant_type", grantTypeExchange,
				"subject_token", p.SubjectToken,
				"subject_token_type", tokenTypeAccessToken,
				"requested_token_type", tokenTypeAccessToken,
				"audience", resource,
				"resource", resource)
		}
		if err != nil {
			return nil, tokenError(err)
		}
	default:
		return nil, notReady(ReasonNotConfigured, "unknown grant %q", o.Grant)
	}
	if err := dpopBound(up, tok.TokenType); err != nil {
		return nil, err
	}
	g, err := c.grantOf(ctx, tok, up, d, asked)
	if err != nil {
		return nil, err
	}
	// What the upstream and this request allow, before anything is cached.
	switch {
	case !oauthex.MatchesResource(g.Facts.Audience, resource):
		return nil, notReady(ReasonAudienceMismatch, "the token is not for the upstream resource")
	case len(asked) > 0 && !subset(g.Facts.Scopes, asked):
		return nil, notReady(ReasonScopeExceeded, "the authorization server granted more scopes than were asked for")
	case !g.Facts.Expiry.After(c.o.Now()):
		return nil, notReady(ReasonExpired, "the token endpoint issued an expired token")
	}
	c.mu.Lock()
	pr := c.pairLocked(pk)
	if pr.sel == nil {
		c.selectLocked(pk, scopes) // later lookups need not rebuild the key
	}
	g.pr, g.sel = pr, joined(scopes)
	pr.grants[g.sel] = g
	pr.setCur()
	c.mu.Unlock()
	return g, nil
}

// grantOf makes tok a Grant: a JWT verified against the issuer's JWKS
// (its claims are the facts), or, under tokenVerification unverified, the
// token response's facts (the resource asked for as the audience, the
// scopes it names, its expires_in, else unverifiedLifetime).
func (c *Client) grantOf(ctx context.Context, tok *oauth2.Token, up *Upstream, d *Discovery, asked []string) (*Grant, error) {
	if up.OAuth.TokenVerification == config.VerifyUnverified {
		f := Facts{Issuer: d.Issuer, Audience: []string{resourceOf(up, d)}, Scopes: grantedScopes(responseScopes(tok, asked)),
			Expiry: tok.Expiry, AuthorizationServers: d.AuthorizationServers, Unverified: true}
		if f.Expiry.IsZero() {
			f.Expiry = c.o.Now().Add(unverifiedLifetime)
		}
		return &Grant{token: tok.AccessToken, Facts: f, obtained: c.o.Now()}, nil
	}
	cl, err := c.verify(ctx, tok, up, d)
	if err != nil {
		return nil, err
	}
	g := &Grant{token: tok.AccessToken, Facts: factsOf(cl, d, up), obtained: c.o.Now()}
	if !tok.Expiry.IsZero() && tok.Expiry.Before(g.Facts.Expiry) {
		g.Facts.Expiry = tok.Expiry
	}
	return g, nil
}

// resourceOf is the RFC 8707 resource of up: the protected resource's
// identifier, else its URL.
func resourceOf(up *Upstream, d *Discovery) string {
	if d.Resource != "" {
		return d.Resource
	}
	return up.URL
}

// tokenError is a failed token request as a NotReadyError: the error
// code the token endpoint answered, never its description.
func tokenError(err error) error {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) && re.ErrorCode != "" {
		return notReady(ReasonTokenFailed, "the token endpoint answered %s", re.ErrorCode)
	}
	return notReady(ReasonTokenFailed, "the token endpoint is unreachable or answered malformed data")
}

// sortedSet is s sorted without duplicates (a new slice).
func sortedSet(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return slices.Compact(out)
}

// joined is a scope set's cache key.
func joined(s []string) string { return strings.Join(s, " ") }

// subset reports whether every element of a is in b.
func subset(a, b []string) bool {
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}
