package upstream

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptrace"
	"regexp"
	"strconv"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpready/mcpready/agent/validate"

	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
)

// Failure is one classified upstream failure. It is an error that unwraps
// to a *validate.Error (and so to one of validate's sentinels).
type Failure struct {
	// Obs is what the transport saw, as validate classifies it.
	Obs validate.Observation
	// Outcome and Layer are validate's classification of Obs.
	Outcome mcpreadyv1.OutcomeClass
	Layer   mcpreadyv1.ReadinessLayer
	// RetryAfter is the upstream's Retry-After, 0 when absent.
	RetryAfter time.Duration
	// ResourceMetadata is the RFC 9728 resource_metadata URL of a 401 challenge.
	ResourceMetadata string
	// Detail says what happened, without credentials or arguments.
	Detail string
	cause  error
}

func (f *Failure) Error() string {
	if f.Detail == "" {
		return "upstream: " + f.cause.Error()
	}
	return "upstream: " + f.cause.Error() + " (" + f.Detail + ")"
}

// Unwrap returns validate's classification.
func (f *Failure) Unwrap() error { return f.cause }

// TransportStatus is the short transport status recorded in receipts, e.g.
// "http 429", "timeout", "error".
func (f *Failure) TransportStatus() string {
	switch {
	case f.Obs.HTTPStatus != 0:
		return "http " + strconv.Itoa(f.Obs.HTTPStatus)
	case f.Obs.TimedOut:
		return "timeout"
	case f.Obs.Err != nil:
		return "error"
	}
	return ""
}

// exchange records what the HTTP layer saw for one call. It travels in the
// call's context so classification never depends on error strings.
type exchange struct {
	mu     sync.Mutex
	sent   bool
	status int
	header http.Header
	ctype  string
}

type exchangeKey struct{}

func withExchange(ctx context.Context) (context.Context, *exchange) {
	x := &exchange{}
	return context.WithValue(ctx, exchangeKey{}, x), x
}

func (x *exchange) snapshot() (sent bool, status int, h http.Header, ctype string) {
	if x == nil {
		return false, 0, nil, ""
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.sent, x.status, x.header, x.ctype
}

// roundTripper adds credentials and headers and records the exchange. The
// token is read per request and never logged.
type roundTripper struct {
	base    http.RoundTripper
	token   func() (string, error)
	headers map[string]string
}

func (rt *roundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	for k, v := range rt.headers {
		req.Header.Set(k, v)
	}
	if rt.token != nil {
		tok, err := rt.token()
		if err != nil {
			return nil, fmt.Errorf("upstream credentials: %w", err)
		}
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
	}
	x, _ := req.Context().Value(exchangeKey{}).(*exchange)
	if x != nil && req.Method == http.MethodPost {
		trace := &httptrace.ClientTrace{WroteRequest: func(httptrace.WroteRequestInfo) {
			x.mu.Lock()
			x.sent = true
			x.mu.Unlock()
		}}
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), trace))
	}
	resp, err := rt.base.RoundTrip(req)
	if x != nil && resp != nil && req.Method == http.MethodPost {
		x.mu.Lock()
		x.status, x.header, x.ctype = resp.StatusCode, resp.Header.Clone(), resp.Header.Get("Content-Type")
		x.mu.Unlock()
	}
	return resp, err
}

// codeRejectedByTransport is the go-sdk's code for a request its transport
// could not deliver; it is a transport failure, not a server's JSON-RPC error.
const codeRejectedByTransport = -32005

var resourceMetadataRE = regexp.MustCompile(`resource_metadata="([^"]+)"`)

// classify turns the error of a call into a Failure. ctxErr is the call
// context's error after the call returned.
func classify(err error, x *exchange, ctxErr error) *Failure {
	var f *Failure
	if errors.As(err, &f) {
		return f
	}
	sent, status, h, ctype := x.snapshot()
	f = &Failure{Obs: validate.Observation{Sent: sent, HTTPStatus: status}}
	var rpcErr *jsonrpc.Error
	switch {
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		if m := resourceMetadataRE.FindStringSubmatch(h.Get("WWW-Authenticate")); m != nil {
			f.ResourceMetadata = m[1]
			f.Obs.ResourceMetadata = true
			f.Detail = "protected resource metadata at " + m[1]
		}
	case status == http.StatusTooManyRequests || status >= 500:
		f.RetryAfter = parseRetryAfter(h.Get("Retry-After"), time.Now())
		if f.RetryAfter > 0 {
			f.Detail = fmt.Sprintf("retry after %s", f.RetryAfter)
		}
	case status >= 400:
	case errors.As(err, &rpcErr) && rpcErr.Code != codeRejectedByTransport:
		f.Obs.JSONRPCError, f.Obs.JSONRPCCode = true, int(rpcErr.Code)
		f.Detail = truncate(rpcErr.Message, 200)
	case ctxErr != nil && errors.Is(ctxErr, context.DeadlineExceeded):
		f.Obs.TimedOut = true
	case ctxErr != nil:
		f.Obs.Err = ctxErr
		f.Detail = "cancelled"
	case errors.Is(err, errStreamLost):
		f.Obs.Err = err
		f.Detail = "connection lost after the request was sent"
	case status >= 200 && status < 300:
		// The server answered, but not with anything readable as MCP.
		f.Obs.JSONRPCError, f.Obs.JSONRPCCode = true, validate.JSONRPCParseError
		f.Detail = fmt.Sprintf("malformed response (content-type %q)", ctype)
	default:
		f.Obs.Err = err
		switch {
		case errors.Is(err, mcp.ErrConnectionClosed):
			f.Detail = "connection closed"
		case sent:
			f.Detail = "connection lost after the request was sent"
		default:
			f.Detail = "connection failed"
		}
	}
	f.cause = validate.Classify(f.Obs)
	if f.cause == nil { // an error the observation does not explain
		f.Obs.Err = err
		f.cause = validate.Classify(f.Obs)
	}
	f.Outcome, f.Layer = validate.ClassOf(f.cause), validate.LayerOf(f.cause)
	return f
}

func parseRetryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(v); err == nil && s >= 0 {
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
