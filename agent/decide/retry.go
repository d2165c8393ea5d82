package decide

import (
	"strings"

	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
)

// RetryConditions is the set of failure conditions on which a retryable
// route may be retried (Route.RetryOn). The zero value is the default set,
// DefaultRetryConditions, used when neither the policy nor the provider's
// declaration names any condition; any other value (an OR of the
// constants) is a configured set. Conditions never make a route retryable:
// only Route.Retryable does (consumer read-only, or keyed with a key).
//
// Condition names (Policy.retry.retryable_conditions and
// Declaration.retryable_conditions; case-insensitive, '_' and '-' alike):
//
//	transport      a transport failure with no HTTP answer (connection
//	               refused, reset or closed, malformed response);
//	               "transport-reset" and "connection-reset" are accepted
//	               as the same condition
//	timeout        no answer within the per-attempt timeout, including a
//	               timeout after send (AMBIGUOUS)
//	http-429       rate limited (also "rate-limited")
//	http-500, http-502, http-503, http-504
//	               that HTTP status
//	http-5xx       any HTTP 5xx status
//	jsonrpc-error  a JSON-RPC error reply other than parse error, invalid
//	               request, method not found and invalid params (never in
//	               the default set)
//
// Other names match nothing. The effective set of a route is the policy's
// set (the default set when the policy names none), narrowed to the
// provider's declared set when the declaration names one: the provider can
// only narrow, the consumer may also widen the default (jsonrpc-error).
type RetryConditions uint16

// The conditions. RetryHTTP5xxOther is a 5xx status other than 500, 502,
// 503 and 504; only "http-5xx" names it.
const (
	RetryTransport RetryConditions = 1 << iota
	RetryTimeout
	RetryHTTP429
	RetryHTTP500
	RetryHTTP502
	RetryHTTP503
	RetryHTTP504
	RetryHTTP5xxOther
	RetryJSONRPCError

	// retryExplicit marks a set that was configured (possibly empty), so
	// that the zero value can mean the default set.
	retryExplicit RetryConditions = 1 << 15

	retryHTTP5xx = RetryHTTP500 | RetryHTTP502 | RetryHTTP503 | RetryHTTP504 | RetryHTTP5xxOther
	// DefaultRetryConditions: transport failures, timeouts, HTTP 429 and
	// HTTP 5xx, the transient failures.
	DefaultRetryConditions = RetryTransport | RetryTimeout | RetryHTTP429 | retryHTTP5xx
)

var retryNames = map[string]RetryConditions{
	"transport": RetryTransport, "transport-reset": RetryTransport, "connection-reset": RetryTransport,
	"timeout":  RetryTimeout,
	"http-429": RetryHTTP429, "rate-limited": RetryHTTP429,
	"http-500": RetryHTTP500, "http-502": RetryHTTP502, "http-503": RetryHTTP503, "http-504": RetryHTTP504,
	"http-5xx":      retryHTTP5xx,
	"jsonrpc-error": RetryJSONRPCError,
}

// parseRetryConditions parses condition names. An empty list gives the
// zero (default) set; unknown names match nothing, so a list of only
// unknown names allows no retry.
func parseRetryConditions(names []string) RetryConditions {
	if len(names) == 0 {
		return 0
	}
	c := retryExplicit
	for _, n := range names {
		c |= retryNames[vocabulary(n)]
	}
	return c
}

// effective is the set itself: the default set for the zero value.
func (c RetryConditions) effective() RetryConditions {
	if c == 0 {
		return DefaultRetryConditions | retryExplicit
	}
	return c
}

// Has reports whether c (the default set when zero) contains every
// condition of x. A zero x (no condition) is never contained.
func (c RetryConditions) Has(x RetryConditions) bool {
	x &^= retryExplicit
	return x != 0 && c.effective()&x == x
}

// None reports whether c allows no retry at all.
func (c RetryConditions) None() bool { return c.effective() == retryExplicit }

// retryConditions is the effective set of a route (see RetryConditions).
func retryConditions(p *mcpreadyv1.RetryRules, decl *mcpreadyv1.Declaration) RetryConditions {
	consumer := parseRetryConditions(p.GetRetryableConditions())
	provider := parseRetryConditions(decl.GetRetryableConditions())
	if provider == 0 {
		return consumer
	}
	return consumer.effective() & provider.effective()
}

// String lists the names of the conditions in c ("default" for the zero
// value, "none" for an empty configured set).
func (c RetryConditions) String() string {
	if c == 0 {
		return "default"
	}
	var out []string
	all5xx := c&retryHTTP5xx == retryHTTP5xx
	if all5xx {
		c &^= retryHTTP5xx
	}
	for _, n := range []struct {
		b    RetryConditions
		name string
	}{{RetryTransport, "transport"}, {RetryTimeout, "timeout"}, {RetryHTTP429, "http-429"}, {RetryHTTP500, "http-500"},
		{RetryHTTP502, "http-502"}, {RetryHTTP503, "http-503"}, {RetryHTTP504, "http-504"}, {RetryHTTP5xxOther, "http-5xx-other"}, {RetryJSONRPCError, "jsonrpc-error"}} {
		if c&n.b != 0 {
			out = append(out, n.name)
		}
	}
	if all5xx {
		out = append(out, "http-5xx")
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, ",")
}
