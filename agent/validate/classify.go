// Package validate checks what comes back from an upstream MCP server before
// anything reaches the AI agent: it classifies a failure by readiness layer
// (transport vs HTTP 401/402/403/429 vs JSON-RPC error vs isError vs
// ambiguous timeout), validates results against the pinned output JSON
// Schema (2020-12) and a size limit, and runs a small injection tripwire
// over the texts that reach a model (ContentTexts, ValueTexts): tool
// definitions at list time, results, and what upstreams ask clients for.
//
// It is pure: it never calls a server, never retries, and never logs result
// contents. Every failure is an *Outcome wrapping one of the sentinel
// errors below, carrying its OutcomeClass and ReadinessLayer.
package validate

import (
	"errors"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/readiness"
)

// Sentinel errors, one per failure kind; use errors.Is.
var (
	ErrTransport       = errors.New("transport failure")                                     // REACHABILITY
	ErrTimeout         = errors.New("timed out before the request was sent")                 // REACHABILITY
	ErrAmbiguous       = errors.New("timed out after the request was sent: outcome unknown") // INVOCATION
	ErrAccess          = errors.New("access not ready")                                      // ACCESS (401/403)
	ErrBilling         = errors.New("billing state: payment required")                       // ACCESS (402)
	ErrRateLimited     = errors.New("rate limited")                                          // INVOCATION (429: quota)
	ErrProtocol        = errors.New("protocol error")                                        // PROTOCOL (JSON-RPC error, bad HTTP)
	ErrInvalidParams   = errors.New("invocation rejected: invalid params")                   // INVOCATION (-32602)
	ErrToolError       = errors.New("tool execution failed (isError)")                       // INVOCATION
	ErrTooLarge        = errors.New("result exceeds the size limit")                         // RESULT_VALIDITY
	ErrOutputSchema    = errors.New("result does not match the pinned output schema")        // RESULT_VALIDITY
	ErrNoOutputSchema  = errors.New("no pinned output schema and policy requires one")       // RESULT_VALIDITY
	ErrInjection       = errors.New("injection tripwire")                                    // RESULT_VALIDITY (results) / REGISTRY (descriptions)
	ErrNetworkIdentity = errors.New("network identity: redirect to another origin refused")  // REACHABILITY (the endpoint is not the pinned origin)
)

// Outcome is what one upstream attempt, or a whole call, came to: the one
// failure/outcome type of the agent. The transport classifies into it
// (Classify, package upstream), result validation fails into it (Checker),
// the executor runs on it (package invoke calls it Outcome too) and the
// receipt and the AI agent's structured error are written from it. A
// failed Outcome is an error (*Outcome): errors.Is sees its sentinel.
type Outcome struct {
	Class mcpreadyv1.OutcomeClass
	Layer mcpreadyv1.ReadinessLayer
	// Sent: the request may have reached the upstream.
	Sent bool
	// RetryAfter from a 429/503 response (zero when absent).
	RetryAfter time.Duration
	// HTTPStatus of the response (0 for stdio or when none arrived);
	// JSONRPCError says the reply was a JSON-RPC error with JSONRPCCode.
	HTTPStatus   int
	JSONRPCError bool
	JSONRPCCode  int
	// IsError: the tool result had isError: true.
	IsError bool
	// Err says why it failed: for a classified failure one of the sentinels
	// below with the classification's detail, wrapped (nil for a success).
	Err error
	// From names who observed the failure ("upstream"), Detail what it saw;
	// both safe to show the AI agent and to record (never results,
	// arguments, tokens or the upstream's own error text).
	From, Detail string
	// UpstreamMessage is the upstream's own JSON-RPC error message, bounded,
	// kept only so that a relay can hand it back to the client whose
	// request it answers. It may echo that request's arguments: Error()
	// omits it, and it must never be recorded in a receipt or logged.
	UpstreamMessage string
	// ResourceMetadata is the RFC 9728 resource_metadata URL of a 401 challenge.
	ResourceMetadata string
	// Code is the readiness code of a failure the agent itself caused
	// (a refusal at one of its own caps), named in the structured tool
	// error; "" for failures the code of which the pipeline decides.
	Code readiness.Code
	// Result is opaque here: the caller's validated result.
	Result any
}

// Error is "[From: ]Err[ (Detail)]".
func (o *Outcome) Error() string {
	msg := "failed"
	if o.Err != nil {
		msg = o.Err.Error()
	}
	if o.From != "" {
		msg = o.From + ": " + msg
	}
	if o.Detail != "" {
		msg += " (" + o.Detail + ")"
	}
	return msg
}

// Unwrap returns Err.
func (o *Outcome) Unwrap() error { return o.Err }

// LayerOf returns the readiness layer of a classified error (UNSPECIFIED
// for anything else).
func LayerOf(err error) mcpreadyv1.ReadinessLayer {
	var o *Outcome
	if errors.As(err, &o) {
		return o.Layer
	}
	return mcpreadyv1.ReadinessLayer_READINESS_LAYER_UNSPECIFIED
}

// ClassOf returns the outcome class of a classified error (UNSPECIFIED for
// anything else, SUCCESS for nil).
func ClassOf(err error) mcpreadyv1.OutcomeClass {
	if err == nil {
		return mcpreadyv1.OutcomeClass_OUTCOME_CLASS_SUCCESS
	}
	var o *Outcome
	if errors.As(err, &o) {
		return o.Class
	}
	return mcpreadyv1.OutcomeClass_OUTCOME_CLASS_UNSPECIFIED
}

// Observation is what the transport saw for one upstream call.
type Observation struct {
	// Sent: the request was (or may have been) written to the upstream.
	Sent bool
	// TimedOut: a deadline passed before a response arrived.
	TimedOut bool
	// Err: a transport error (connection refused, reset, TLS, garbage
	// framing) when no HTTP status or JSON-RPC reply was obtained.
	Err error
	// HTTPStatus of the response; 0 for stdio or when none arrived.
	HTTPStatus int
	// ResourceMetadata: a 401 carried RFC 9728 protected-resource metadata
	// (WWW-Authenticate resource_metadata); recorded in the detail.
	ResourceMetadata bool
	// JSONRPCError: the reply was a JSON-RPC error object with JSONRPCCode.
	JSONRPCError bool
	JSONRPCCode  int
	// IsError: the tool result had isError: true.
	IsError bool
	// CrossOriginRedirect: the endpoint answered with a redirect to another
	// origin, which was not followed (HTTPStatus is the redirect's).
	CrossOriginRedirect bool
}

// Classify maps an observation to its Outcome (an *Outcome error), or nil
// for a success (a result that still needs Check). Order: timeouts, a
// redirect to another origin (a network-identity failure: the endpoint is
// not answering as the pinned origin), transport errors, HTTP status,
// JSON-RPC error, isError.
func Classify(o Observation) error {
	out := classify(o)
	if out == nil {
		return nil
	}
	out.Sent, out.HTTPStatus, out.JSONRPCError, out.JSONRPCCode, out.IsError = o.Sent, o.HTTPStatus, o.JSONRPCError, o.JSONRPCCode, o.IsError
	return out
}

func classify(o Observation) *Outcome {
	switch {
	case o.TimedOut && o.Sent:
		return fail(mcpreadyv1.OutcomeClass_OUTCOME_CLASS_AMBIGUOUS, mcpreadyv1.ReadinessLayer_READINESS_LAYER_INVOCATION, ErrAmbiguous, "")
	case o.TimedOut:
		return fail(mcpreadyv1.OutcomeClass_OUTCOME_CLASS_TIMEOUT, mcpreadyv1.ReadinessLayer_READINESS_LAYER_REACHABILITY, ErrTimeout, "")
	case o.CrossOriginRedirect:
		return fail(mcpreadyv1.OutcomeClass_OUTCOME_CLASS_TRANSPORT_FAILURE, mcpreadyv1.ReadinessLayer_READINESS_LAYER_REACHABILITY, ErrNetworkIdentity, fmt.Sprintf("HTTP %d", o.HTTPStatus))
	case o.Err != nil && o.HTTPStatus == 0 && !o.JSONRPCError:
		return fail(mcpreadyv1.OutcomeClass_OUTCOME_CLASS_TRANSPORT_FAILURE, mcpreadyv1.ReadinessLayer_READINESS_LAYER_REACHABILITY, ErrTransport, transportDetail(o))
	}
	switch s := o.HTTPStatus; {
	case s == 401:
		d := "HTTP 401"
		if o.ResourceMetadata {
			d = "HTTP 401 with protected-resource metadata (RFC 9728): authorization needed, endpoint is up"
		}
		return fail(mcpreadyv1.OutcomeClass_OUTCOME_CLASS_ACCESS_NOT_READY, mcpreadyv1.ReadinessLayer_READINESS_LAYER_ACCESS, ErrAccess, d)
	case s == 403:
		return fail(mcpreadyv1.OutcomeClass_OUTCOME_CLASS_ACCESS_NOT_READY, mcpreadyv1.ReadinessLayer_READINESS_LAYER_ACCESS, ErrAccess, "HTTP 403")
	case s == 402:
		return fail(mcpreadyv1.OutcomeClass_OUTCOME_CLASS_BILLING, mcpreadyv1.ReadinessLayer_READINESS_LAYER_ACCESS, ErrBilling, "HTTP 402")
	case s == 429:
		return fail(mcpreadyv1.OutcomeClass_OUTCOME_CLASS_RATE_LIMITED, mcpreadyv1.ReadinessLayer_READINESS_LAYER_INVOCATION, ErrRateLimited, "HTTP 429")
	case s >= 500:
		return fail(mcpreadyv1.OutcomeClass_OUTCOME_CLASS_TRANSPORT_FAILURE, mcpreadyv1.ReadinessLayer_READINESS_LAYER_REACHABILITY, ErrTransport, fmt.Sprintf("HTTP %d", s))
	case s >= 400 || (s != 0 && s < 200) || (s >= 300 && s < 400):
		return fail(mcpreadyv1.OutcomeClass_OUTCOME_CLASS_PROTOCOL_ERROR, mcpreadyv1.ReadinessLayer_READINESS_LAYER_PROTOCOL, ErrProtocol, fmt.Sprintf("HTTP %d", s))
	}
	if o.JSONRPCError {
		d := fmt.Sprintf("JSON-RPC error %d", o.JSONRPCCode)
		if o.HTTPStatus == 200 {
			d += " inside HTTP 200"
		}
		if o.JSONRPCCode == jsonrpc.CodeInvalidParams {
			return fail(mcpreadyv1.OutcomeClass_OUTCOME_CLASS_PROTOCOL_ERROR, mcpreadyv1.ReadinessLayer_READINESS_LAYER_INVOCATION, ErrInvalidParams, d)
		}
		return fail(mcpreadyv1.OutcomeClass_OUTCOME_CLASS_PROTOCOL_ERROR, mcpreadyv1.ReadinessLayer_READINESS_LAYER_PROTOCOL, ErrProtocol, d)
	}
	if o.Err != nil {
		return fail(mcpreadyv1.OutcomeClass_OUTCOME_CLASS_TRANSPORT_FAILURE, mcpreadyv1.ReadinessLayer_READINESS_LAYER_REACHABILITY, ErrTransport, transportDetail(o))
	}
	if o.IsError {
		return fail(mcpreadyv1.OutcomeClass_OUTCOME_CLASS_TOOL_ERROR, mcpreadyv1.ReadinessLayer_READINESS_LAYER_INVOCATION, ErrToolError, "")
	}
	return nil
}

func transportDetail(o Observation) string {
	if o.Sent {
		return "after the request was sent"
	}
	return "before the request was sent"
}

// fail is a classified failure: sentinel err, with detail when not "".
func fail(c mcpreadyv1.OutcomeClass, l mcpreadyv1.ReadinessLayer, err error, detail string) *Outcome {
	if detail != "" {
		err = fmt.Errorf("%w: %s", err, detail)
	}
	return &Outcome{Class: c, Layer: l, Err: err}
}
