// Package telemetry emits OpenTelemetry traces and metrics for the agent's
// MCP traffic, following the semantic conventions for MCP (development
// status, open-telemetry/semantic-conventions-genai model/mcp): a SERVER
// span for each request an AI agent sends the agent, a CLIENT span for each
// attempt the agent sends upstream, both named "{mcp.method.name}
// {target}", the histograms mcp.server.operation.duration and
// mcp.client.operation.duration (seconds), the decision, approval, retries,
// fallbacks and validation as span events carrying the receipt id, and
// W3C trace context (traceparent, tracestate, baggage) taken from and
// propagated in params._meta and HTTP headers.
//
// Export is over OTLP (gRPC or HTTP), configured the standard way
// (OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_PROTOCOL and the other
// OTEL_* variables the exporters read) or by Options. Telemetry is off by
// default: a nil *Telemetry, whose methods do nothing and allocate
// nothing.
//
// It must not record tool arguments, results, tokens or upstream error
// text (the conventions' opt-in attributes are never set), and must not
// decide, route or change a request beyond its trace context.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Protocols of Options.Protocol (the OTEL_EXPORTER_OTLP_PROTOCOL values
// the Go exporters support).
const (
	ProtocolGRPC = "grpc"
	ProtocolHTTP = "http/protobuf"
)

// ErrConfig: the options or OTEL_* variables name an unusable setting.
var ErrConfig = errors.New("invalid telemetry configuration")

// Options configures telemetry. Zero values defer to the OTEL_* variables.
type Options struct {
	// Endpoint is the OTLP endpoint URL (e.g. http://collector:4317);
	// "" takes OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or
	// OTEL_EXPORTER_OTLP_ENDPOINT. With none of them telemetry is off.
	Endpoint string
	// Protocol is ProtocolGRPC or ProtocolHTTP; "" takes
	// OTEL_EXPORTER_OTLP_PROTOCOL, else ProtocolHTTP (the OTLP default).
	Protocol string
	// ServiceName is the resource's service.name; "" takes
	// OTEL_SERVICE_NAME, else "mcpready-agent".
	ServiceName string
	// ServiceVersion is the resource's service.version ("" for none).
	ServiceVersion string
	// Sampler; nil is the SDK's (parent-based always-on, or
	// OTEL_TRACES_SAMPLER).
	Sampler sdktrace.Sampler
}

// Enabled reports whether o (with the environment) turns telemetry on:
// an endpoint is named and OTEL_SDK_DISABLED is not "true".
func (o Options) Enabled() bool {
	if strings.EqualFold(os.Getenv("OTEL_SDK_DISABLED"), "true") {
		return false
	}
	return o.endpoint() != ""
}

func (o Options) endpoint() string {
	for _, v := range []string{o.Endpoint, os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"), os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT")} {
		if v != "" {
			return v
		}
	}
	return ""
}

// Telemetry emits spans and metrics. A nil *Telemetry is off. It is safe
// for concurrent use.
type Telemetry struct {
	tp        *sdktrace.TracerProvider
	mp        *sdkmetric.MeterProvider
	tracer    trace.Tracer
	prop      propagation.TextMapPropagator
	serverDur metric.Float64Histogram
	clientDur metric.Float64Histogram
}

// durationBuckets are the conventions' advised boundaries, in seconds.
var durationBuckets = []float64{0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300}

// New starts the exporters o names; it returns nil (off) when o is not
// Enabled, or an error wrapping ErrConfig.
func New(ctx context.Context, o Options) (*Telemetry, error) {
	if !o.Enabled() {
		return nil, nil
	}
	proto := o.Protocol
	if proto == "" {
		proto = os.Getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	if proto == "" {
		proto = ProtocolHTTP
	}
	var (
		spans   sdktrace.SpanExporter
		metrics sdkmetric.Exporter
		err     error
	)
	switch proto {
	case ProtocolGRPC:
		var to []otlptracegrpc.Option
		var mo []otlpmetricgrpc.Option
		if o.Endpoint != "" {
			to, mo = append(to, otlptracegrpc.WithEndpointURL(o.Endpoint)), append(mo, otlpmetricgrpc.WithEndpointURL(o.Endpoint))
		}
		if spans, err = otlptracegrpc.New(ctx, to...); err == nil {
			metrics, err = otlpmetricgrpc.New(ctx, mo...)
		}
	case ProtocolHTTP:
		var to []otlptracehttp.Option
		var mo []otlpmetrichttp.Option
		if o.Endpoint != "" { // a base URL, as OTEL_EXPORTER_OTLP_ENDPOINT is
			base := strings.TrimSuffix(o.Endpoint, "/")
			to, mo = append(to, otlptracehttp.WithEndpointURL(base+"/v1/traces")), append(mo, otlpmetrichttp.WithEndpointURL(base+"/v1/metrics"))
		}
		if spans, err = otlptracehttp.New(ctx, to...); err == nil {
			metrics, err = otlpmetrichttp.New(ctx, mo...)
		}
	default:
		return nil, fmt.Errorf("%w: OTLP protocol %q (want %s or %s)", ErrConfig, proto, ProtocolGRPC, ProtocolHTTP)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	name := o.ServiceName
	if name == "" {
		name = os.Getenv("OTEL_SERVICE_NAME")
	}
	if name == "" {
		name = "mcpready-agent"
	}
	attrs := []attribute.KeyValue{attribute.String("service.name", name)}
	if o.ServiceVersion != "" {
		attrs = append(attrs, attribute.String("service.version", o.ServiceVersion))
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(attrs...))
	if err != nil {
		return nil, fmt.Errorf("%w: resource: %w", ErrConfig, err)
	}
	topts := []sdktrace.TracerProviderOption{sdktrace.WithBatcher(spans), sdktrace.WithResource(res)}
	if o.Sampler != nil {
		topts = append(topts, sdktrace.WithSampler(o.Sampler))
	}
	t := &Telemetry{
		tp:   sdktrace.NewTracerProvider(topts...),
		mp:   sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewPeriodicReader(metrics)), sdkmetric.WithResource(res)),
		prop: propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}),
	}
	const scope = "github.com/mcpready/mcpready/agent/telemetry"
	t.tracer = t.tp.Tracer(scope)
	meter := t.mp.Meter(scope)
	if t.serverDur, err = meter.Float64Histogram("mcp.server.operation.duration", metric.WithUnit("s"),
		metric.WithDescription("Duration of an MCP request as the agent served it to the AI agent"), metric.WithExplicitBucketBoundaries(durationBuckets...)); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	if t.clientDur, err = meter.Float64Histogram("mcp.client.operation.duration", metric.WithUnit("s"),
		metric.WithDescription("Duration of one MCP request the agent sent upstream"), metric.WithExplicitBucketBoundaries(durationBuckets...)); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	return t, nil
}

// Shutdown flushes and stops the exporters. Nil is a no-op.
func (t *Telemetry) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	return errors.Join(t.tp.Shutdown(ctx), t.mp.Shutdown(ctx))
}

// HTTPTransport wraps base so that every upstream HTTP request carries the
// trace context of its request context in traceparent, tracestate and
// baggage headers. Off (nil t) it returns base.
func (t *Telemetry) HTTPTransport(base http.RoundTripper) http.RoundTripper {
	if t == nil {
		return base
	}
	return &roundTripper{t: t, base: base}
}

type roundTripper struct {
	t    *Telemetry
	base http.RoundTripper
}

func (rt *roundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	if !trace.SpanContextFromContext(req.Context()).IsValid() {
		return rt.base.RoundTrip(req)
	}
	r := req.Clone(req.Context()) // a RoundTripper must not change its request
	rt.t.prop.Inject(req.Context(), propagation.HeaderCarrier(r.Header))
	return rt.base.RoundTrip(r)
}

// TraceID is the hex trace id of the span in ctx, "" when there is none
// (telemetry off, or not sampled and not propagated).
func TraceID(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.HasTraceID() {
		return ""
	}
	return sc.TraceID().String()
}

// metaCarrier reads and writes trace context in params._meta.
type metaCarrier map[string]any

func (m metaCarrier) Get(key string) string {
	s, _ := m[key].(string)
	return s
}

func (m metaCarrier) Set(key, value string) { m[key] = value }

func (m metaCarrier) Keys() []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// Inject returns meta (the params._meta sent upstream) with the trace
// context of the span in ctx in its traceparent, tracestate and baggage
// keys: a copy, meta itself is never changed. Without a span in ctx it
// returns meta as it is.
func (t *Telemetry) Inject(ctx context.Context, meta map[string]any) map[string]any {
	if t == nil || !trace.SpanContextFromContext(ctx).IsValid() {
		return meta
	}
	out := make(map[string]any, len(meta)+3)
	for k, v := range meta {
		if k != "traceparent" && k != "tracestate" && k != "baggage" {
			out[k] = v
		}
	}
	t.prop.Inject(ctx, metaCarrier(out))
	return out
}

// extract returns ctx with the remote trace context of the request: from
// params._meta when it carries a traceparent, else from the HTTP headers.
func (t *Telemetry) extract(ctx context.Context, meta map[string]any, h http.Header) context.Context {
	if _, ok := meta["traceparent"].(string); ok {
		return t.prop.Extract(ctx, metaCarrier(meta))
	}
	if h != nil {
		return t.prop.Extract(ctx, propagation.HeaderCarrier(h))
	}
	return ctx
}

type requestIDKey struct{}

// WithRequestID returns ctx carrying the JSON-RPC id of the request being
// served (JSON text), for RequestID. Off (nil t) it returns ctx.
func (t *Telemetry) WithRequestID(ctx context.Context, id []byte) context.Context {
	if t == nil || len(id) == 0 {
		return ctx
	}
	return context.WithValue(ctx, requestIDKey{}, string(id))
}

// RequestID is the JSON-RPC id WithRequestID put in ctx ("" for none).
func RequestID(ctx context.Context) string {
	s, _ := ctx.Value(requestIDKey{}).(string)
	return s
}

// Carry returns to with the span and baggage of from, for a context built
// to drop from's other values (an upstream request's); to itself when from
// holds no valid span (telemetry off).
func Carry(from, to context.Context) context.Context {
	span := trace.SpanFromContext(from)
	if !span.SpanContext().IsValid() {
		return to
	}
	return baggage.ContextWithBaggage(trace.ContextWithSpan(to, span), baggage.FromContext(from))
}
