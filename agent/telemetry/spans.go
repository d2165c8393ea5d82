package telemetry

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/mcpready/mcpready/agent/validate"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/readiness"
)

// Attribute keys of the semantic conventions for MCP, and mcpready's own
// (span events).
const (
	keyMethod      = "mcp.method.name"
	keyProtocol    = "mcp.protocol.version"
	keySession     = "mcp.session.id"
	keyResource    = "mcp.resource.uri"
	keyRequestID   = "jsonrpc.request.id"
	keyTool        = "gen_ai.tool.name"
	keyPrompt      = "gen_ai.prompt.name"
	keyOperation   = "gen_ai.operation.name"
	keyErrorType   = "error.type"
	keyStatusCode  = "rpc.response.status_code"
	keyTransport   = "network.transport"
	keyAddress     = "server.address"
	keyPort        = "server.port"
	keyHTTPStatus  = "http.response.status_code"
	keyReceipt     = "mcpready.receipt.id"
	keyOutcome     = "mcpready.outcome"
	keyAttempt     = "mcpready.attempt"
	keyPolicy      = "mcpready.policy.version"
	keyCandidates  = "mcpready.decision.candidates"
	keySelected    = "mcpready.decision.selected"
	keyApproval    = "mcpready.approval"
	keyAction      = "mcpready.action"
	keyValidation  = "mcpready.validation.schema"
	keyFailedLayer = "mcpready.failed_layer"

	toolsCall = "tools/call"
	// errorTool is error.type of a tools/call answered with isError.
	errorTool = "tool_error"
	// statelessProtocol is the first protocol version without sessions:
	// mcp.session.id is never recorded for it or later ones.
	statelessProtocol = "2026-07-28"
)

// Incoming is what the MCP front knows of a request it received, beyond
// what the pipeline knows.
type Incoming struct {
	// Header holds the request's HTTP headers (trace context); nil for none.
	Header http.Header
	// Session is the MCP session id ("" for none); never recorded for
	// protocol 2026-07-28 or later.
	Session string
	// RequestID is the JSON-RPC id as it was sent (JSON text: 7 or "a");
	// "" when not known.
	RequestID string
	// Requested is the protocol version an initialize asks for, the
	// span's mcp.protocol.version while Request.Protocol is not known
	// ("" for none).
	Requested string
	// Transport is network.transport: "" is "tcp" (Streamable HTTP),
	// "pipe" for stdio.
	Transport string
}

// Request is one request an AI agent sent the agent (a SERVER span).
type Request struct {
	// Method is mcp.method.name (e.g. "tools/call").
	Method string
	// Target is the tool (tools/call) or prompt (prompts/get) name: the
	// span name's target and gen_ai.tool.name / gen_ai.prompt.name.
	Target string
	// Resource is mcp.resource.uri ("" for none).
	Resource string
	// Protocol is mcp.protocol.version ("" when not known).
	Protocol string
	// Meta is the request's params._meta: trace context is taken from it
	// (before the HTTP headers).
	Meta map[string]any
	Incoming
}

// Attempt is one request the agent sent upstream (a CLIENT span).
type Attempt struct {
	// Method, Target and Protocol as in Request.
	Method, Target, Protocol string
	// Endpoint is the upstream URL (server.address, server.port).
	Endpoint string
	// Number is the attempt's number within the call (1-based).
	Number int
}

// Span is a started span; its zero value (telemetry off) does nothing.
type Span struct {
	t      *Telemetry
	span   trace.Span
	start  time.Time
	client bool
	method string
	target string
	proto  string
	trans  string
}

// spanName is "{mcp.method.name} {target}", or the method alone.
func spanName(method, target string) string {
	if target == "" {
		return method
	}
	return method + " " + target
}

// base returns the attributes shared by both span kinds and the metrics.
func base(attrs []attribute.KeyValue, method, target, protocol string) []attribute.KeyValue {
	attrs = append(attrs, attribute.String(keyMethod, method))
	if protocol != "" {
		attrs = append(attrs, attribute.String(keyProtocol, protocol))
	}
	switch {
	case method == toolsCall && target != "":
		attrs = append(attrs, attribute.String(keyTool, target), attribute.String(keyOperation, "execute_tool"))
	case method == "prompts/get" && target != "":
		attrs = append(attrs, attribute.String(keyPrompt, target))
	}
	return attrs
}

// Server starts the SERVER span of r, a child of the trace context r
// carries (params._meta first, then the HTTP headers).
func (t *Telemetry) Server(ctx context.Context, r Request) (context.Context, Span) {
	if t == nil {
		return ctx, Span{}
	}
	ctx = t.extract(ctx, r.Meta, r.Header)
	transport := r.Transport
	if transport == "" {
		transport = "tcp"
	}
	protocol := r.Protocol
	if protocol == "" {
		protocol = r.Requested
	}
	attrs := base(make([]attribute.KeyValue, 0, 10), r.Method, r.Target, protocol)
	attrs = append(attrs, attribute.String(keyTransport, transport))
	if r.Session != "" && (protocol == "" || protocol < statelessProtocol) {
		attrs = append(attrs, attribute.String(keySession, r.Session))
	}
	if id := requestID(r.RequestID); id != "" {
		attrs = append(attrs, attribute.String(keyRequestID, id))
	}
	if r.Resource != "" {
		attrs = append(attrs, attribute.String(keyResource, r.Resource))
	}
	ctx, s := t.tracer.Start(ctx, spanName(r.Method, r.Target), trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
	return ctx, Span{t: t, span: s, start: time.Now(), method: r.Method, target: r.Target, proto: protocol, trans: transport}
}

// requestID is the JSON-RPC id's string form: a string id unquoted.
func requestID(raw string) string {
	if len(raw) >= 2 && raw[0] == '"' {
		if s, err := strconv.Unquote(raw); err == nil {
			return s
		}
	}
	return raw
}

// Client starts the CLIENT span of attempt a, a child of the span in ctx.
// Send what it returns: Inject and HTTPTransport propagate its context.
func (t *Telemetry) Client(ctx context.Context, a Attempt) (context.Context, Span) {
	if t == nil {
		return ctx, Span{}
	}
	attrs := peer(base(make([]attribute.KeyValue, 0, 10), a.Method, a.Target, a.Protocol), a.Endpoint)
	if a.Number > 0 {
		attrs = append(attrs, attribute.Int(keyAttempt, a.Number))
	}
	ctx, s := t.tracer.Start(ctx, spanName(a.Method, a.Target), trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	return context.WithValue(ctx, clientKey{}, s), Span{t: t, span: s, start: time.Now(), client: true, method: a.Method, target: a.Target, proto: a.Protocol}
}

// peer appends network.transport, server.address and server.port of an
// upstream endpoint (a URL, or "stdio:<program>" for a pipe).
func peer(attrs []attribute.KeyValue, endpoint string) []attribute.KeyValue {
	if u, err := url.Parse(endpoint); err == nil && u.Host != "" {
		attrs = append(attrs, attribute.String(keyTransport, "tcp"), attribute.String(keyAddress, u.Hostname()))
		port := u.Port()
		if port == "" {
			port = map[string]string{"https": "443", "http": "80"}[u.Scheme]
		}
		if p, err := strconv.Atoi(port); err == nil {
			attrs = append(attrs, attribute.Int(keyPort, p))
		}
	} else if endpoint != "" {
		attrs = append(attrs, attribute.String(keyTransport, "pipe")) // a command: stdio
	}
	return attrs
}

// clientKey holds, in the context Client returns, its CLIENT span.
type clientKey struct{}

// Upstream records on the CLIENT span in ctx (none: nothing) the upstream
// session the attempt went to, once it is known: its endpoint
// (server.address, server.port, network.transport), the protocol version
// it negotiated (mcp.protocol.version) and its session id
// (mcp.session.id; never for 2026-07-28 or later). A SERVER span in ctx
// is left alone.
func Upstream(ctx context.Context, endpoint, session, protocol string) {
	s, ok := ctx.Value(clientKey{}).(trace.Span)
	if !ok || s != trace.SpanFromContext(ctx) || !s.IsRecording() {
		return
	}
	attrs := peer(make([]attribute.KeyValue, 0, 5), endpoint)
	if protocol != "" {
		attrs = append(attrs, attribute.String(keyProtocol, protocol))
	}
	if session != "" && protocol != "" && protocol < statelessProtocol {
		attrs = append(attrs, attribute.String(keySession, session))
	}
	s.SetAttributes(attrs...)
}

// Negotiated returns s recording protocol as its mcp.protocol.version
// (an initialize's, once negotiated); "" leaves s as it is.
func (s Span) Negotiated(protocol string) Span {
	if s.t == nil || protocol == "" {
		return s
	}
	s.span.SetAttributes(attribute.String(keyProtocol, protocol))
	s.proto = protocol
	return s
}

// EndAttempt ends a CLIENT span with the attempt's outcome: error.type
// (tool_error for isError, else the JSON-RPC code or the outcome class),
// rpc.response.status_code for a JSON-RPC error, the HTTP status, and the
// mcp.client.operation.duration sample. The outcome's error text is never
// recorded.
func (s Span) EndAttempt(o validate.Outcome) {
	if s.t == nil {
		return
	}
	var attrs []attribute.KeyValue
	errType := ""
	switch {
	case o.IsError:
		errType = errorTool
	case o.JSONRPCError:
		errType = strconv.Itoa(o.JSONRPCCode)
		attrs = append(attrs, attribute.String(keyStatusCode, errType))
	case o.Class != mcpreadyv1.OutcomeClass_OUTCOME_CLASS_SUCCESS && o.Class != mcpreadyv1.OutcomeClass_OUTCOME_CLASS_UNSPECIFIED:
		errType = strings.ToLower(readiness.OutcomeName(o.Class))
	}
	if o.HTTPStatus != 0 {
		attrs = append(attrs, attribute.Int(keyHTTPStatus, o.HTTPStatus))
	}
	attrs = append(attrs, attribute.String(keyOutcome, readiness.OutcomeName(o.Class)))
	s.finish(attrs, errType)
}

// End ends a SERVER span with the request's receipt (nil when none was
// built): the receipt id, the decision, approval, each executor action
// (retry, fallback, ...) and the validation as span events carrying the
// receipt id, error.type (tool_error when the answer isError; the
// JSON-RPC code as rpc.response.status_code when the request was answered
// with a JSON-RPC error, rpcCode non-zero), and the
// mcp.server.operation.duration sample.
func (s Span) End(rec *mcpreadyv1.Receipt, isError bool, rpcCode int) {
	if s.t == nil {
		return
	}
	errType := ""
	var attrs []attribute.KeyValue
	switch {
	case rpcCode != 0:
		errType = strconv.Itoa(rpcCode)
		attrs = append(attrs, attribute.String(keyStatusCode, errType))
	case isError:
		errType = errorTool
	}
	if rec != nil {
		events(s.span, rec)
		attrs = append(attrs, attribute.String(keyReceipt, rec.GetReceiptId()), attribute.String(keyOutcome, readiness.OutcomeName(rec.GetOutcome())))
	}
	s.finish(attrs, errType)
}

func (s Span) finish(attrs []attribute.KeyValue, errType string) {
	if errType != "" {
		attrs = append(attrs, attribute.String(keyErrorType, errType))
		s.span.SetStatus(codes.Error, errType)
	}
	s.span.SetAttributes(attrs...)
	s.span.End()
	m := base(make([]attribute.KeyValue, 0, 6), s.method, s.target, s.proto)
	if errType != "" {
		m = append(m, attribute.String(keyErrorType, errType))
	}
	hist := s.t.serverDur
	if s.client {
		hist = s.t.clientDur
	} else {
		m = append(m, attribute.String(keyTransport, s.trans))
	}
	hist.Record(context.Background(), time.Since(s.start).Seconds(), metric.WithAttributes(m...))
}

// events adds the receipt's decision, approval, actions and validation to
// span as events, each carrying the receipt id.
func events(span trace.Span, rec *mcpreadyv1.Receipt) {
	id := attribute.String(keyReceipt, rec.GetReceiptId())
	at := func(ts interface{ AsTime() time.Time }, ok bool) trace.EventOption {
		if !ok {
			return trace.WithTimestamp(time.Now())
		}
		return trace.WithTimestamp(ts.AsTime())
	}
	decision := []attribute.KeyValue{id, attribute.Int(keyCandidates, len(rec.GetCandidates())), attribute.String(keyOutcome, readiness.OutcomeName(rec.GetOutcome()))}
	if v := rec.GetPolicyVersion(); v != "" {
		decision = append(decision, attribute.String(keyPolicy, v))
	}
	if e := rec.GetSelected().GetEntry(); e != "" {
		decision = append(decision, attribute.String(keySelected, e))
	}
	span.AddEvent("mcpready.decision", trace.WithAttributes(decision...), at(rec.GetStartedAt(), rec.GetStartedAt() != nil))
	if a := rec.GetApproval(); a != mcpreadyv1.ApprovalState_APPROVAL_STATE_UNSPECIFIED && a != mcpreadyv1.ApprovalState_APPROVAL_STATE_NOT_REQUIRED {
		span.AddEvent("mcpready.approval", trace.WithAttributes(id, attribute.String(keyApproval, strings.TrimPrefix(a.String(), "APPROVAL_STATE_"))))
	}
	for _, a := range rec.GetActions() {
		span.AddEvent("mcpready."+strings.ToLower(strings.TrimPrefix(a.GetKind().String(), "ACTION_KIND_")),
			trace.WithAttributes(id, attribute.String(keyAction, readiness.ActionString(a))))
	}
	if v := rec.GetSchemaValidation(); v != "" || rec.GetFailedLayer() != mcpreadyv1.ReadinessLayer_READINESS_LAYER_UNSPECIFIED {
		attrs := []attribute.KeyValue{id, attribute.Bool("mcpready.is_error", rec.GetIsError())}
		if v != "" {
			attrs = append(attrs, attribute.String(keyValidation, v))
		}
		if l := rec.GetFailedLayer(); l != mcpreadyv1.ReadinessLayer_READINESS_LAYER_UNSPECIFIED {
			attrs = append(attrs, attribute.String(keyFailedLayer, strings.TrimPrefix(l.String(), "READINESS_LAYER_")))
		}
		span.AddEvent("mcpready.validation", trace.WithAttributes(attrs...))
	}
}
