package telemetry_test

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/mcpready/mcpready/agent/telemetry"
	"github.com/mcpready/mcpready/agent/validate"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/internal/otelcoltest"
	"github.com/mcpready/mcpready/readiness"
)

// Off, every hook is free: no allocation, nothing changed.
func TestOffAllocatesNothing(t *testing.T) {
	var tel *telemetry.Telemetry
	ctx := context.Background()
	meta := map[string]any{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
	h := http.Header{"Traceparent": {"x"}}
	rec := &mcpreadyv1.Receipt{ReceiptId: "r"}
	base := http.DefaultTransport
	allocs := testing.AllocsPerRun(1000, func() {
		c, sp := tel.Server(ctx, telemetry.Request{Method: "tools/call", Target: "t", Meta: meta, Incoming: telemetry.Incoming{Header: h, Session: "s"}})
		c, cs := tel.Client(c, telemetry.Attempt{Method: "tools/call", Target: "t", Endpoint: "http://127.0.0.1:1/mcp", Number: 1})
		if m := tel.Inject(c, meta); len(m) != 1 {
			t.Fatal("off Inject changed _meta")
		}
		cs.EndAttempt(validate.Outcome{IsError: true})
		sp.End(rec, true, 0)
		telemetry.Upstream(c, "http://127.0.0.1:1/mcp", "s", "2025-11-25")
		_ = sp.Negotiated("2025-11-25")
		_ = tel.WithRequestID(c, []byte("7"))
		_ = telemetry.TraceID(c)
		_ = telemetry.Carry(c, ctx)
		if tel.HTTPTransport(base) != base {
			t.Fatal("off HTTPTransport wrapped the transport")
		}
	})
	if allocs != 0 {
		t.Fatalf("telemetry off allocates %v per request", allocs)
	}
}

func TestOptions(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	t.Setenv("OTEL_SDK_DISABLED", "")
	if tel, err := telemetry.New(context.Background(), telemetry.Options{}); tel != nil || err != nil {
		t.Fatalf("no endpoint: %v %v, want off", tel, err)
	}
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
	if !(telemetry.Options{}).Enabled() {
		t.Fatal("OTEL_EXPORTER_OTLP_ENDPOINT does not enable telemetry")
	}
	t.Setenv("OTEL_SDK_DISABLED", "true")
	if (telemetry.Options{Endpoint: "http://127.0.0.1:4318"}).Enabled() {
		t.Fatal("OTEL_SDK_DISABLED=true does not disable telemetry")
	}
	t.Setenv("OTEL_SDK_DISABLED", "")
	if _, err := telemetry.New(context.Background(), telemetry.Options{Protocol: "http/json"}); !errors.Is(err, telemetry.ErrConfig) {
		t.Fatalf("http/json: %v, want ErrConfig", err)
	}
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "thrift")
	if _, err := telemetry.New(context.Background(), telemetry.Options{}); !errors.Is(err, telemetry.ErrConfig) {
		t.Fatalf("OTEL_EXPORTER_OTLP_PROTOCOL=thrift: %v, want ErrConfig", err)
	}
}

// The executor's actions and the approval of a receipt become span events
// carrying the receipt id, as the collector receives them.
func TestReceiptEvents(t *testing.T) {
	col := otelcoltest.Start(t)
	tel, err := telemetry.New(context.Background(), telemetry.Options{Endpoint: col.GRPC, Protocol: telemetry.ProtocolGRPC})
	if err != nil {
		t.Fatal(err)
	}
	rec := &mcpreadyv1.Receipt{ReceiptId: "rcpt-1", StartedAt: timestamppb.Now(), PolicyVersion: "3",
		Candidates: []*mcpreadyv1.Candidate{{Entry: "a"}, {Entry: "b"}}, Selected: &mcpreadyv1.Selection{Entry: "b"},
		Approval: mcpreadyv1.ApprovalState_APPROVAL_STATE_APPROVED, Outcome: mcpreadyv1.OutcomeClass_OUTCOME_CLASS_SUCCESS, SchemaValidation: "passed",
		Actions: []*mcpreadyv1.Action{readiness.NewAction(readiness.ActionRetry, "a"), readiness.NewAction(readiness.ActionFallback, "b")}}
	ctx, sp := tel.Server(context.Background(), telemetry.Request{Method: "tools/call", Target: "lookup", Protocol: "2025-11-25",
		Incoming: telemetry.Incoming{RequestID: `"req-9"`, Session: "sess-1"}})
	_, cs := tel.Client(ctx, telemetry.Attempt{Method: "tools/call", Target: "lookup", Endpoint: "https://mcp.example.com/mcp", Number: 2})
	cs.EndAttempt(validate.Outcome{Class: mcpreadyv1.OutcomeClass_OUTCOME_CLASS_TOOL_ERROR, JSONRPCError: true, JSONRPCCode: -32001, HTTPStatus: 200})
	sp.End(rec, false, 0)
	if err := tel.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	spans := col.WaitSpans(t, 2)
	srv, cli := byName(spans, "tools/call lookup", "Server"), byName(spans, "tools/call lookup", "Client")
	if len(srv) != 1 || len(cli) != 1 {
		t.Fatalf("%+v", spans)
	}
	wantAttrs(t, srv[0], map[string]any{"jsonrpc.request.id": "req-9", "mcp.session.id": "sess-1", "mcpready.receipt.id": "rcpt-1"})
	wantAttrs(t, cli[0], map[string]any{"server.address": "mcp.example.com", "server.port": 443, "error.type": "-32001",
		"rpc.response.status_code": "-32001", "http.response.status_code": 200, "mcpready.attempt": 2})
	got := map[string]string{}
	for _, e := range srv[0].Events {
		if e.Attrs["mcpready.receipt.id"] != "rcpt-1" {
			t.Errorf("event %s without the receipt id: %v", e.Name, e.Attrs)
		}
		a, _ := e.Attrs["mcpready.action"].(string)
		got[e.Name] = a
	}
	for name, action := range map[string]string{"mcpready.decision": "", "mcpready.approval": "", "mcpready.retry": "retry:a",
		"mcpready.fallback": "fallback:b", "mcpready.validation": ""} {
		if a, ok := got[name]; !ok || a != action {
			t.Errorf("event %s: %q present %v (events %v)", name, a, ok, got)
		}
	}
}

// TestUpstreamPeer: Upstream names the upstream session on the CLIENT
// span in ctx (endpoint, negotiated protocol, session id), never records
// a session id for 2026-07-28, and leaves a SERVER span in ctx alone.
func TestUpstreamPeer(t *testing.T) {
	col := otelcoltest.Start(t)
	tel, err := telemetry.New(context.Background(), telemetry.Options{Endpoint: col.HTTP, Protocol: telemetry.ProtocolHTTP})
	if err != nil {
		t.Fatal(err)
	}
	ctx, sp := tel.Server(context.Background(), telemetry.Request{Method: "resources/read", Protocol: "2025-11-25"})
	telemetry.Upstream(ctx, "https://server.example:8443/mcp", "up-sess", "2025-11-25") // a SERVER span: untouched
	for _, c := range []struct{ target, protocol string }{{"old", "2025-11-25"}, {"new", "2026-07-28"}} {
		cctx, cs := tel.Client(ctx, telemetry.Attempt{Method: "prompts/get", Target: c.target, Protocol: "2025-11-25", Number: 1})
		telemetry.Upstream(cctx, "stdio:server", "up-sess", c.protocol)
		cs.EndAttempt(validate.Outcome{Class: mcpreadyv1.OutcomeClass_OUTCOME_CLASS_SUCCESS})
	}
	sp = sp.Negotiated("2025-06-18")
	sp.End(nil, false, 0)
	if err := tel.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	spans := col.WaitSpans(t, 3)
	srv := byName(spans, "resources/read", "Server")
	if len(srv) != 1 {
		t.Fatalf("%+v", spans)
	}
	for _, k := range []string{"server.address", "server.port"} {
		if _, ok := srv[0].Attrs[k]; ok {
			t.Errorf("SERVER span got the upstream's %s: %v", k, srv[0].Attrs)
		}
	}
	wantAttrs(t, srv[0], map[string]any{"mcp.protocol.version": "2025-06-18"})
	old, nw := byName(spans, "prompts/get old", "Client"), byName(spans, "prompts/get new", "Client")
	if len(old) != 1 || len(nw) != 1 {
		t.Fatalf("%+v", spans)
	}
	wantAttrs(t, old[0], map[string]any{"mcp.session.id": "up-sess", "mcp.protocol.version": "2025-11-25", "network.transport": "pipe"})
	wantAttrs(t, nw[0], map[string]any{"mcp.protocol.version": "2026-07-28", "network.transport": "pipe"})
	if _, ok := nw[0].Attrs["mcp.session.id"]; ok {
		t.Errorf("2026-07-28 CLIENT span with mcp.session.id: %v", nw[0].Attrs)
	}
}

// FuzzServer: whatever trace context an AI agent sends in _meta or in
// headers, starting and ending a span neither panics nor propagates it
// malformed.
func FuzzServer(f *testing.F) {
	col := otelcoltest.Start(f)
	tel, err := telemetry.New(context.Background(), telemetry.Options{Endpoint: col.GRPC, Protocol: telemetry.ProtocolGRPC})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	f.Add("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", "k=v", `"id"`)
	f.Add("00-00000000000000000000000000000000-0000000000000000-00", "%%%", "7")
	f.Add("ff-zz", "", "")
	f.Fuzz(func(t *testing.T, tp, bag, id string) {
		ctx, sp := tel.Server(context.Background(), telemetry.Request{Method: "tools/call", Target: "t",
			Meta: map[string]any{"traceparent": tp, "baggage": bag}, Incoming: telemetry.Incoming{RequestID: id, Header: http.Header{"Traceparent": {tp}}}})
		out := tel.Inject(ctx, map[string]any{"traceparent": tp})
		if s, _ := out["traceparent"].(string); len(s) != 55 {
			t.Fatalf("propagated traceparent %q", s)
		}
		sp.End(nil, false, 0)
	})
}
