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

	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
)

// Failure is one classified upstream failure. It is an error; use errors.As.
type Failure struct {
	// Outcome is the outcome class of the failed call.
	Outcome mcpreadyv1.OutcomeClass
	// Layer is the readiness layer that failed.
	Layer mcpreadyv1.ReadinessLayer
	// HTTPStatus is the upstream's HTTP status, 0 when none was received.
	HTTPStatus int
	// RetryAfter is the upstream's Retry-After, 0 when absent.
	RetryAfter time.Duration
	// ResourceMetadata is the RFC 9728 resource_metadata URL of a 401 challenge.
	ResourceMetadata string
	// RPCCode is the JSON-RPC error code of a protocol error.
	RPCCode int64
	// Sent reports that the request was written to the upstream, so a
	// state-changing call may have taken effect.
	Sent bool
	// Detail says what happened, without credentials or arguments.
	Detail string
}

func (f *Failure) Error() string {
	s := fmt.Sprintf("upstream %s", outcomeName(f.Outcome))
	if f.HTTPStatus != 0 {
		s += fmt.Sprintf(" (HTTP %d)", f.HTTPStatus)
	}
	if f.Detail != "" {
		s += ": " + f.Detail
	}
	return s
}

// TransportStatus is the short transport status recorded in receipts, e.g.
// "http 429", "reset", "timeout".
func (f *Failure) TransportStatus() string {
	if f.HTTPStatus != 0 {
		return "http " + strconv.Itoa(f.HTTPStatus)
	}
	switch f.Outcome {
	case mcpreadyv1.OutcomeClass_OUTCOME_CLASS_AMBIGUOUS, mcpreadyv1.OutcomeClass_OUTCOME_CLASS_TIMEOUT:
		return "timeout"
	case mcpreadyv1.OutcomeClass_OUTCOME_CLASS_TRANSPORT_FAILURE:
		return "error"
	}
	return ""
}

func outcomeName(o mcpreadyv1.OutcomeClass) string {
	switch o {
	case mcpreadyv1.OutcomeClass_OUTCOME_CLASS_ACCESS_NOT_READY:
		return "access not ready"
	case mcpreadyv1.OutcomeClass_OUTCOME_CLASS_BILLING:
		return "billing required"
	case mcpreadyv1.OutcomeClass_OUTCOME_CLASS_RATE_LIMITED:
		return "rate limited"
	case mcpreadyv1.OutcomeClass_OUTCOME_CLASS_PROTOCOL_ERROR:
		return "protocol error"
	case mcpreadyv1.OutcomeClass_OUTCOME_CLASS_AMBIGUOUS:
		return "ambiguous outcome (timed out after send)"
	case mcpreadyv1.OutcomeClass_OUTCOME_CLASS_TIMEOUT:
		return "timeout"
	}
	return "transport failure"
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
	f = &Failure{Sent: sent, HTTPStatus: status, Layer: mcpreadyv1.ReadinessLayer_READINESS_LAYER_REACHABILITY,
		Outcome: mcpreadyv1.OutcomeClass_OUTCOME_CLASS_TRANSPORT_FAILURE}
	var rpcErr *jsonrpc.Error
	switch {
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		f.Outcome, f.Layer = mcpreadyv1.OutcomeClass_OUTCOME_CLASS_ACCESS_NOT_READY, mcpreadyv1.ReadinessLayer_READINESS_LAYER_ACCESS
		if m := resourceMetadataRE.FindStringSubmatch(h.Get("WWW-Authenticate")); m != nil {
			f.ResourceMetadata = m[1]
			f.Detail = "authorization required (RFC 9728 protected resource metadata at " + m[1] + ")"
		} else {
			f.Detail = "authorization rejected"
		}
	case status == http.StatusPaymentRequired:
		f.Outcome, f.Layer = mcpreadyv1.OutcomeClass_OUTCOME_CLASS_BILLING, mcpreadyv1.ReadinessLayer_READINESS_LAYER_ACCESS
		f.Detail = "payment required"
	case status == http.StatusTooManyRequests:
		f.Outcome, f.Layer = mcpreadyv1.OutcomeClass_OUTCOME_CLASS_RATE_LIMITED, mcpreadyv1.ReadinessLayer_READINESS_LAYER_INVOCATION
		f.RetryAfter = parseRetryAfter(h.Get("Retry-After"), time.Now())
		f.Detail = "rate limited"
		if f.RetryAfter > 0 {
			f.Detail += fmt.Sprintf(", retry after %s", f.RetryAfter)
		}
	case status >= 500:
		f.Detail = fmt.Sprintf("server error %d", status)
		f.RetryAfter = parseRetryAfter(h.Get("Retry-After"), time.Now())
	case errors.As(err, &rpcErr) && rpcErr.Code != codeRejectedByTransport:
		f.Outcome, f.Layer = mcpreadyv1.OutcomeClass_OUTCOME_CLASS_PROTOCOL_ERROR, mcpreadyv1.ReadinessLayer_READINESS_LAYER_PROTOCOL
		f.RPCCode = rpcErr.Code
		f.Detail = fmt.Sprintf("JSON-RPC error %d: %s", rpcErr.Code, truncate(rpcErr.Message, 200))
		if status >= 200 && status < 300 {
			f.Detail += fmt.Sprintf(" (inside HTTP %d)", status)
		}
	case ctxErr != nil && errors.Is(ctxErr, context.DeadlineExceeded):
		if sent {
			f.Outcome, f.Layer = mcpreadyv1.OutcomeClass_OUTCOME_CLASS_AMBIGUOUS, mcpreadyv1.ReadinessLayer_READINESS_LAYER_INVOCATION
			f.Detail = "no answer before the deadline; the call may have taken effect"
		} else {
			f.Outcome = mcpreadyv1.OutcomeClass_OUTCOME_CLASS_TIMEOUT
			f.Detail = "deadline passed before the request was sent"
		}
	case ctxErr != nil:
		f.Detail = "cancelled"
		if sent {
			f.Outcome = mcpreadyv1.OutcomeClass_OUTCOME_CLASS_AMBIGUOUS
		}
	case status >= 200 && status < 300:
		// The server answered but the answer could not be read as MCP.
		f.Outcome, f.Layer = mcpreadyv1.OutcomeClass_OUTCOME_CLASS_PROTOCOL_ERROR, mcpreadyv1.ReadinessLayer_READINESS_LAYER_PROTOCOL
		f.Detail = fmt.Sprintf("malformed response (content-type %q)", ctype)
	case status != 0:
		f.Detail = fmt.Sprintf("unexpected HTTP status %d", status)
	case errors.Is(err, mcp.ErrConnectionClosed):
		f.Detail = "connection closed"
	default:
		if sent {
			f.Detail = "connection lost after the request was sent"
		} else {
			f.Detail = "connection failed"
		}
	}
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
