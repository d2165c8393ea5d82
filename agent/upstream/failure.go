package upstream

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math"
	"mime"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpready/mcpready/agent/validate"
)

// exchange records what the HTTP layer saw for one call. It travels in the
// call's context so classification never depends on error strings.
type exchange struct {
	mu     sync.Mutex
	sent   bool
	status int
	header http.Header
	ctype  string
	// crossOrigin: the answer redirected to another origin (refused), to
	// target (redirectTarget's form of its Location).
	crossOrigin bool
	target      string
}

type exchangeKey struct{}

func withExchange(ctx context.Context) (context.Context, *exchange) {
	x := &exchange{}
	return context.WithValue(ctx, exchangeKey{}, x), x
}

// markSent records that the request was (possibly) sent: its writing began.
func (x *exchange) markSent() {
	x.mu.Lock()
	x.sent = true
	x.mu.Unlock()
}

func (x *exchange) snapshot() (sent bool, status int, h http.Header, ctype string, crossOrigin bool, target string) {
	if x == nil {
		return false, 0, nil, "", false, ""
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.sent, x.status, x.header, x.ctype, x.crossOrigin, x.target
}

// RedirectError is the cause of a refused redirect to another origin: it
// wraps the network-identity failure (validate.ErrNetworkIdentity) and
// names where the upstream sent the agent.
type RedirectError struct {
	// Target is the redirect's Location resolved against the request:
	// scheme, host, port and path only (no user info, query or fragment,
	// which may carry credentials); "" when the Location does not parse.
	Target string
	err    error
}

func (e *RedirectError) Error() string { return e.err.Error() }
func (e *RedirectError) Unwrap() error { return e.err }

// redirectTarget is the Location of resp as RedirectError.Target.
func redirectTarget(resp *http.Response) string {
	loc, err := resp.Location()
	if err != nil || loc.Host == "" {
		return ""
	}
	return (&url.URL{Scheme: loc.Scheme, Host: loc.Host, Path: loc.Path}).String()
}

// originOf is the scheme://host[:port] of a RedirectError.Target.
func originOf(target string) string {
	u, err := url.Parse(target)
	if err != nil || u.Host == "" {
		return "unknown"
	}
	return u.Scheme + "://" + u.Host
}

// errRedirect is an upstream answer that redirects elsewhere. Redirects are
// never followed: the request, its body and its credentials stay with the
// endpoint the admitted route pins.
var errRedirect = errors.New("upstream redirect not followed")

// refuseRedirect is the http.Client CheckRedirect of upstream sessions. The
// roundTripper already turns a redirect into an error; this keeps a
// redirect from being followed whatever the base transport does.
func refuseRedirect(*http.Request, []*http.Request) error { return errRedirect }

// crossOrigin reports whether a redirect answer to req points at another
// origin (scheme, host or port differ, or the Location does not parse).
func crossOrigin(req *http.Request, resp *http.Response) bool {
	loc, err := resp.Location()
	if err != nil {
		return true
	}
	return loc.Scheme != req.URL.Scheme || hostPortOf(loc.Scheme, loc.Host) != hostPortOf(req.URL.Scheme, req.URL.Host)
}

// hostPortOf is host with the scheme's default port made explicit.
func hostPortOf(scheme, host string) string {
	if _, _, err := net.SplitHostPort(host); err == nil {
		return strings.ToLower(host)
	}
	port := "80"
	if scheme == "https" {
		port = "443"
	}
	return strings.ToLower(net.JoinHostPort(strings.Trim(host, "[]"), port))
}

// roundTripper adds credentials and headers and records the exchange. The
// token is read per request and never logged.
type roundTripper struct {
	base    http.RoundTripper
	token   func() (string, error)
	headers map[string]string
}

func (rt *roundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	return rt.send(req.Clone(req.Context()))
}

// send is RoundTrip of a request the caller owns: its headers are changed
// in place instead of on a clone. Over the agent's own base transport the
// exchange learns that the request was (possibly) sent from the transport
// itself; over any other it learns it from a client trace.
func (rt *roundTripper) send(req *http.Request) (*http.Response, error) {
	for k, v := range headersOf(req.Context()) {
		req.Header[k] = v
	}
	for k, v := range rt.headers {
		req.Header.Set(k, v)
	}
	if rt.token != nil {
		tok, err := rt.token()
		if err != nil {
			closeBody(req)
			return nil, fmt.Errorf("upstream credentials: %w", err)
		}
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
	}
	x, _ := req.Context().Value(exchangeKey{}).(*exchange)
	if req.Method != http.MethodPost {
		x = nil
	}
	var resp *http.Response
	var err error
	if d, ok := rt.base.(*directTransport); ok {
		resp, err = d.roundTrip(req, x)
	} else {
		if x != nil {
			trace := &httptrace.ClientTrace{WroteRequest: func(httptrace.WroteRequestInfo) { x.markSent() }}
			req = req.WithContext(httptrace.WithClientTrace(req.Context(), trace))
		}
		resp, err = rt.base.RoundTrip(req)
	}
	if err != nil || resp == nil {
		return resp, err
	}
	observeResponse(req.Context(), resp.Header)
	redirect := resp.StatusCode >= 300 && resp.StatusCode < 400 && resp.Header.Get("Location") != ""
	if x != nil {
		x.mu.Lock()
		// The response's own header map: nothing changes it afterwards.
		x.status, x.header, x.ctype = resp.StatusCode, resp.Header, resp.Header.Get("Content-Type")
		x.crossOrigin = redirect && crossOrigin(req, resp)
		if x.crossOrigin {
			x.target = redirectTarget(resp)
		}
		x.mu.Unlock()
	}
	if redirect {
		// Not followed, not even to the same origin: nothing is sent twice.
		_ = resp.Body.Close()
		return nil, fmt.Errorf("%w (HTTP %d)", errRedirect, resp.StatusCode)
	}
	return resp, nil
}

// codeRejectedByTransport is the go-sdk's code for a request its transport
// could not deliver (the SDK does not export it); it is a transport
// failure, not a server's JSON-RPC error.
const codeRejectedByTransport = -32005

var resourceMetadataRE = regexp.MustCompile(`resource_metadata="([^"]+)"`)

// classify turns the error of a call into its *validate.Outcome (From
// "upstream"). ctxErr is the call context's error after the call returned.
func classify(err error, x *exchange, ctxErr error) *validate.Outcome {
	var f *validate.Outcome
	if errors.As(err, &f) {
		return f
	}
	sent, status, h, ctype, cross, target := x.snapshot()
	if f := accessOutcome(err, sent); f != nil {
		return f
	}
	obs := validate.Observation{Sent: sent, HTTPStatus: status, CrossOriginRedirect: cross}
	var detail, resourceMetadata, upstreamMessage string
	var retryAfter time.Duration
	var rpcErr *jsonrpc.Error
	switch {
	case cross:
		detail = fmt.Sprintf("HTTP %d redirect to another origin (%s), not followed", status, originOf(target))
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		if m := resourceMetadataRE.FindStringSubmatch(h.Get("WWW-Authenticate")); m != nil {
			resourceMetadata = m[1]
			obs.ResourceMetadata = true
			detail = "protected resource metadata at " + truncate(m[1], 200)
		}
	case status == http.StatusTooManyRequests || status >= 500:
		retryAfter = parseRetryAfter(h.Get("Retry-After"), time.Now())
		if retryAfter > 0 {
			detail = fmt.Sprintf("retry after %s", retryAfter)
		}
	case status >= 400:
	case errors.As(err, &rpcErr) && rpcErr.Code != codeRejectedByTransport:
		obs.JSONRPCError, obs.JSONRPCCode = true, int(rpcErr.Code)
		// The message is the upstream's text and may echo the arguments:
		// the code classifies it, the text goes only to UpstreamMessage.
		detail, upstreamMessage = "upstream message withheld", truncate(rpcErr.Message, 200)
	case ctxErr != nil && errors.Is(ctxErr, context.DeadlineExceeded):
		obs.TimedOut = true
	case ctxErr != nil:
		obs.Err = ctxErr
		detail = "cancelled"
	case errors.Is(err, errStreamLost):
		obs.Err = err
		detail = "connection lost after the request was sent"
	case status >= 200 && status < 300:
		// The server answered, but not with anything readable as MCP.
		obs.JSONRPCError, obs.JSONRPCCode = true, jsonrpc.CodeParseError
		mt, _, _ := mime.ParseMediaType(ctype)
		detail = fmt.Sprintf("malformed response (content-type %q)", truncate(mt, 64))
	default:
		obs.Err = err
		var tlsErr *tls.CertificateVerificationError
		switch {
		case errors.As(err, &tlsErr):
			detail = "TLS identity: the certificate does not verify for the pinned endpoint's host"
		case errors.Is(err, mcp.ErrConnectionClosed):
			detail = "connection closed"
		case sent:
			detail = "connection lost after the request was sent"
		default:
			detail = "connection failed"
		}
	}
	cause := validate.Classify(obs)
	if cause == nil { // an error the observation does not explain
		obs.Err = err
		cause = validate.Classify(obs)
	}
	errors.As(cause, &f)
	f.From, f.Detail, f.RetryAfter, f.ResourceMetadata, f.UpstreamMessage = "upstream", detail, retryAfter, resourceMetadata, upstreamMessage
	if cross {
		f.Err = &RedirectError{Target: target, err: f.Err}
	}
	return f
}

func parseRetryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseInt(v, 10, 64); err == nil && s >= 0 {
		if s > math.MaxInt64/int64(time.Second) {
			return math.MaxInt64 // saturate rather than wrap to a short or negative wait
		}
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
