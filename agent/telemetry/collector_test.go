package telemetry_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpready/mcpready/agent/circuit"
	"github.com/mcpready/mcpready/agent/config"
	"github.com/mcpready/mcpready/agent/decide"
	"github.com/mcpready/mcpready/agent/front"
	"github.com/mcpready/mcpready/agent/internal/mcptest"
	"github.com/mcpready/mcpready/agent/telemetry"
	"github.com/mcpready/mcpready/agent/validate"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/internal/enrolltest"
	"github.com/mcpready/mcpready/internal/otelcoltest"
)

const token = "tok-dev"

// seen is what the upstream received of the trace context.
type seen struct {
	mu           sync.Mutex
	meta, header []string
	// methodMeta is the params._meta traceparent of each non-tool request, by method.
	methodMeta map[string][]string
}

func (s *seen) method(method string, meta mcp.Meta) {
	s.mu.Lock()
	defer s.mu.Unlock()
	tp, _ := meta["traceparent"].(string)
	s.methodMeta[method] = append(s.methodMeta[method], tp)
}

// stack is an agent front with telemetry, in front of a go-sdk upstream.
type stack struct {
	url, upstream string
	seen          *seen
	mu            sync.Mutex
	recs          []*mcpreadyv1.Receipt
}

func newStack(t testing.TB, tel *telemetry.Telemetry) *stack {
	t.Helper()
	st := &stack{seen: &seen{methodMeta: map[string][]string{}}}
	up := mcptest.New(t, mcptest.Options{ServerOptions: &mcp.ServerOptions{
		CompletionHandler: func(_ context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
			st.seen.method("completion/complete", req.Params.Meta)
			return &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: []string{"a"}}}, nil
		}}})
	mcptest.AddFailTool(up.Server)
	mcp.AddTool(up.Server, &mcp.Tool{Name: "trace", Description: "Reports nothing.", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, req *mcp.CallToolRequest, in mcptest.EchoInput) (*mcp.CallToolResult, any, error) {
			st.seen.mu.Lock()
			tp, _ := req.Params.Meta["traceparent"].(string)
			st.seen.meta = append(st.seen.meta, tp)
			if req.Extra != nil {
				st.seen.header = append(st.seen.header, req.Extra.Header.Get("traceparent"))
			}
			st.seen.mu.Unlock()
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil, nil
		})
	up.Server.AddResource(&mcp.Resource{URI: "test://doc", Name: "doc", MIMEType: "text/plain"},
		func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			st.seen.method("resources/read", req.Params.Meta)
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: "test://doc", Text: "hello doc"}}}, nil
		})
	up.Server.AddPrompt(&mcp.Prompt{Name: "greet", Description: "Greets."},
		func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			st.seen.method("prompts/get", req.Params.Meta)
			return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: "hi"}}}}, nil
		})
	st.upstream = up.URL
	ucfg := config.Upstream{Name: "test", URL: up.URL}
	entries := map[string]*mcpreadyv1.RegistryEntry{}
	for _, o := range enrolltest.Qualified(t, ucfg) {
		entries[o.Metadata.Name] = o.Spec.(*mcpreadyv1.RegistryEntry)
	}
	cfg, err := config.New(config.File{
		Principals: []config.Principal{{Identity: config.Identity{Name: "dev-client", PrincipalClass: "dev"}, TokenSHA256: config.TokenDigest(token)}},
		Upstreams:  []config.Upstream{ucfg},
	})
	if err != nil {
		t.Fatal(err)
	}
	f := front.New(front.Options{Config: cfg, NodeID: "node-1", Telemetry: tel,
		Receipts: func(r *mcpreadyv1.Receipt) { st.mu.Lock(); st.recs = append(st.recs, r); st.mu.Unlock() }})
	t.Cleanup(f.Close)
	pol := &mcpreadyv1.Policy{Inventory: []string{"*"}, ProtocolVersions: mcp.SupportedProtocolVersions(),
		Evidence: &mcpreadyv1.EvidenceRules{OnUnknown: mcpreadyv1.UnknownEvidenceAction_UNKNOWN_EVIDENCE_ACTION_ALLOW},
		Principals: []*mcpreadyv1.PrincipalRule{{PrincipalClass: "dev", Allow: []string{"test/*"},
			Methods: []*mcpreadyv1.MethodRule{{Server: "test", Allow: []string{"*"}, Resources: []string{"test://*"}, Prompts: []string{"*"}}}}}}
	snap, err := decide.NewSnapshot(decide.Inputs{PolicyName: "default", PolicyVersion: "7", Policy: pol, Entries: entries})
	if err != nil {
		t.Fatal(err)
	}
	f.SetState(&front.State{Decide: snap, Entries: entries, Checker: validate.NewChecker(validate.RulesFromPolicy(nil)), Circuits: circuit.NewSet(circuit.Config{})})
	hs := httptest.NewServer(f)
	t.Cleanup(hs.Close)
	st.url = hs.URL
	return st
}

// bearer authenticates as the test principal and, when traceparent is
// set, sends it as a header on every request.
type bearer struct {
	traceparent string
	// requestID, when set, is sent as the header the front uses
	// internally to carry JSON-RPC ids (a client trying to forge its trace).
	requestID string
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+token)
	if b.traceparent != "" {
		r.Header.Set("traceparent", b.traceparent)
	}
	if b.requestID != "" {
		r.Header.Set("Mcpready-Trace-Jsonrpc-Id", b.requestID)
	}
	return http.DefaultTransport.RoundTrip(r)
}

func (st *stack) connect(t testing.TB, version string) *mcp.ClientSession {
	return st.connectWith(t, version, bearer{})
}

func (st *stack) connectWith(t testing.TB, version string, rt bearer) *mcp.ClientSession {
	return st.connectTo(t, "/mcp/servers/test", version, rt)
}

// connectTo opens a session on the front's view at path.
func (st *stack) connectTo(t testing.TB, path, version string, rt bearer) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "ai-agent", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: st.url + path,
		HTTPClient: &http.Client{Transport: rt}, MaxRetries: -1}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func byName(spans []otelcoltest.Span, name, kind string) []otelcoltest.Span {
	var out []otelcoltest.Span
	for _, s := range spans {
		if s.Name == name && s.Kind == kind {
			out = append(out, s)
		}
	}
	return out
}

func wantAttrs(t *testing.T, s otelcoltest.Span, want map[string]any) {
	t.Helper()
	for k, v := range want {
		if got, ok := s.Attrs[k]; !ok || fmt.Sprint(got) != fmt.Sprint(v) {
			t.Errorf("%s %s: %s = %v (present %v), want %v", s.Kind, s.Name, k, got, ok, v)
		}
	}
}

// TestSpansReachCollector sends tool calls from a go-sdk client through an
// agent front with telemetry to a go-sdk upstream and asserts, per span,
// what the collector's OTLP receiver decoded (over gRPC and over HTTP):
// SERVER and CLIENT spans named per the MCP conventions with their
// attributes, the incoming trace context continued, the CLIENT span's
// context propagated to the upstream in params._meta and the traceparent
// header, the decision and validation events carrying the receipt id,
// the receipt carrying the trace id, tool_error for isError, no session id
// for 2026-07-28, no argument text anywhere, and both duration histograms.
func TestSpansReachCollector(t *testing.T) {
	for _, proto := range []string{telemetry.ProtocolGRPC, telemetry.ProtocolHTTP} {
		t.Run(proto, func(t *testing.T) {
			col := otelcoltest.Start(t)
			endpoint := col.GRPC
			if proto == telemetry.ProtocolHTTP {
				endpoint = col.HTTP
			}
			tel, err := telemetry.New(context.Background(), telemetry.Options{Endpoint: endpoint, Protocol: proto, ServiceName: "agent-under-test"})
			if err != nil || tel == nil {
				t.Fatalf("telemetry: %v %v", tel, err)
			}
			st := newStack(t, tel)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()

			const parentTrace, parentSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
			cs := st.connect(t, "2025-11-25")
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "trace", Arguments: map[string]any{"text": "secret-argument"},
				Meta: mcp.Meta{"traceparent": "00-" + parentTrace + "-" + parentSpan + "-01", "baggage": "tenant=blue"}})
			if err != nil || res.IsError {
				t.Fatalf("call: %v %v", err, res)
			}
			if res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "fail", Arguments: map[string]any{"text": "secret-argument"}}); err != nil || !res.IsError {
				t.Fatalf("fail call: %v %v", err, res)
			}
			if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "test://doc"}); err != nil {
				t.Fatal(err)
			}
			stateless := st.connect(t, "2026-07-28")
			if _, err := stateless.CallTool(ctx, &mcp.CallToolParams{Name: "trace", Arguments: map[string]any{"text": "x"}}); err != nil {
				t.Fatal(err)
			}
			// Trace context in the HTTP headers only (no _meta).
			const headerTrace = "0af7651916cd43dd8448eb211c80319c"
			viaHeader := st.connectWith(t, "2025-11-25", bearer{traceparent: "00-" + headerTrace + "-b7ad6b7169203331-01"})
			if _, err := viaHeader.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "x"}}); err != nil {
				t.Fatal(err)
			}
			if err := tel.Shutdown(ctx); err != nil {
				t.Fatal(err)
			}
			spans := col.WaitSpans(t, 10)

			servers := byName(spans, "tools/call trace", "Server")
			clients := byName(spans, "tools/call trace", "Client")
			if len(servers) != 2 || len(clients) != 2 {
				t.Fatalf("spans: %+v", spans)
			}
			srv, cli := servers[0], clients[0]
			if srv.Attrs["mcp.protocol.version"] != "2025-11-25" {
				srv, cli = servers[1], clients[1]
			}
			if srv.TraceID != parentTrace || srv.Parent != parentSpan || srv.Service != "agent-under-test" {
				t.Errorf("server span does not continue the caller's trace: %+v", srv)
			}
			wantAttrs(t, srv, map[string]any{"mcp.method.name": "tools/call", "gen_ai.tool.name": "trace", "gen_ai.operation.name": "execute_tool",
				"mcp.protocol.version": "2025-11-25", "network.transport": "tcp", "mcpready.outcome": "SUCCESS"})
			if srv.Attrs["jsonrpc.request.id"] == nil {
				t.Errorf("2025-11-25 server span without jsonrpc.request.id: %v", srv.Attrs)
			}
			if srv.Attrs["mcp.session.id"] == "" || srv.Attrs["mcp.session.id"] == nil {
				t.Errorf("2025-11-25 server span without mcp.session.id: %v", srv.Attrs)
			}
			u, _ := url.Parse(st.upstream)
			port, _ := strconv.Atoi(u.Port())
			if cli.Parent != srv.SpanID || cli.TraceID != parentTrace {
				t.Errorf("client span is not the server span's child: %+v", cli)
			}
			wantAttrs(t, cli, map[string]any{"mcp.method.name": "tools/call", "gen_ai.tool.name": "trace", "gen_ai.operation.name": "execute_tool",
				"server.address": "127.0.0.1", "server.port": port, "network.transport": "tcp", "mcpready.attempt": 1})
			st.mu.Lock()
			var rec *mcpreadyv1.Receipt
			for _, r := range st.recs {
				if r.GetTraceId() == parentTrace {
					rec = r
				}
			}
			for _, r := range st.recs {
				if r.GetTraceId() == "" {
					t.Errorf("receipt %s carries no trace id", r.GetReceiptId())
				}
			}
			st.mu.Unlock()
			if rec == nil || srv.Attrs["mcpready.receipt.id"] != rec.GetReceiptId() {
				t.Fatalf("no receipt carries the trace id %s (server span receipt %v)", parentTrace, srv.Attrs["mcpready.receipt.id"])
			}
			events := map[string]map[string]any{}
			for _, e := range srv.Events {
				events[e.Name] = e.Attrs
			}
			if d := events["mcpready.decision"]; d == nil || d["mcpready.receipt.id"] != rec.GetReceiptId() || d["mcpready.policy.version"] != "7" ||
				d["mcpready.decision.selected"] != "test/trace" {
				t.Errorf("decision event: %v", srv.Events)
			}
			if v := events["mcpready.validation"]; v == nil || v["mcpready.receipt.id"] != rec.GetReceiptId() || v["mcpready.validation.schema"] != "passed" {
				t.Errorf("validation event: %v", srv.Events)
			}
			// The upstream got the CLIENT span's context, in _meta and in the header.
			st.seen.mu.Lock()
			want := "00-" + parentTrace + "-" + cli.SpanID + "-01"
			if len(st.seen.meta) == 0 || st.seen.meta[0] != want || len(st.seen.header) == 0 || st.seen.header[0] != want {
				t.Errorf("upstream saw _meta %q header %q, want %q", st.seen.meta, st.seen.header, want)
			}
			st.seen.mu.Unlock()

			fail := byName(spans, "tools/call fail", "Server")
			if len(fail) != 1 || fail[0].Attrs["error.type"] != "tool_error" || fail[0].Status != "Error" {
				t.Errorf("isError server span: %+v", fail)
			}
			if c := byName(spans, "tools/call fail", "Client"); len(c) != 1 || c[0].Attrs["error.type"] != "tool_error" {
				t.Errorf("isError client span: %+v", c)
			}
			other := servers[0]
			if other.SpanID == srv.SpanID {
				other = servers[1]
			}
			if _, ok := other.Attrs["mcp.session.id"]; ok || other.Attrs["mcp.protocol.version"] != "2026-07-28" {
				t.Errorf("2026-07-28 server span: %v", other.Attrs)
			}
			if other.Attrs["jsonrpc.request.id"] == nil {
				t.Errorf("stateless server span without jsonrpc.request.id: %v", other.Attrs)
			}
			if h := byName(spans, "tools/call echo", "Server"); len(h) != 1 || h[0].TraceID != headerTrace || h[0].Parent != "b7ad6b7169203331" {
				t.Errorf("trace context from the traceparent header not continued: %+v", h)
			}
			rs, rc := byName(spans, "resources/read", "Server"), byName(spans, "resources/read", "Client")
			if len(rs) != 1 || len(rc) != 1 || rs[0].Attrs["mcp.resource.uri"] != "test://doc" || rc[0].Parent != rs[0].SpanID {
				t.Errorf("resources/read spans: %+v %+v", rs, rc)
			}
			for _, s := range spans {
				for k, v := range s.Attrs {
					if strings.Contains(fmt.Sprint(v), "secret-argument") {
						t.Errorf("%s %s: attribute %s carries the arguments", s.Kind, s.Name, k)
					}
				}
			}
			for _, m := range []string{"mcp.server.operation.duration s", "mcp.client.operation.duration s"} {
				if col.HistogramPoints(m) == 0 {
					t.Errorf("no %s histogram received", m)
				}
			}
		})
	}
}

// TestSessionRequestsTraced asserts, on what the collector received, the
// spans of the requests other than tools/call: initialize, tools/list
// (and ping) on the transparent and aggregate views get SERVER spans with the
// conventions' attributes (the JSON-RPC id and session id for a
// 2025-11-25 session too, whose requests the go-sdk dispatches under the
// session's context); resources, prompts and completion get CLIENT spans
// naming the upstream (server.address, server.port, its session id for a
// 2025-11-25 upstream session, never for 2026-07-28) whose trace context
// the upstream received in params._meta; and their SERVER spans carry the
// receipt id, in an attribute and in the decision event. A client that
// sends the front's internal request-id header forges no span's id.
func TestSessionRequestsTraced(t *testing.T) {
	col := otelcoltest.Start(t)
	tel, err := telemetry.New(context.Background(), telemetry.Options{Endpoint: col.HTTP, Protocol: telemetry.ProtocolHTTP})
	if err != nil || tel == nil {
		t.Fatalf("telemetry: %v %v", tel, err)
	}
	st := newStack(t, tel)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	transparent := st.connect(t, "2025-11-25")
	aggregate := st.connectTo(t, "/mcp", "2025-11-25", bearer{})
	stateless := st.connect(t, "2026-07-28")
	forger := st.connectWith(t, "2025-11-25", bearer{requestID: `"forged"`})
	for _, cs := range []*mcp.ClientSession{transparent, aggregate, stateless, forger} {
		if _, err := cs.ListTools(ctx, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := transparent.Ping(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := transparent.ReadResource(ctx, &mcp.ReadResourceParams{URI: "test://doc"}); err != nil {
		t.Fatal(err)
	}
	if _, err := transparent.GetPrompt(ctx, &mcp.GetPromptParams{Name: "greet"}); err != nil {
		t.Fatal(err)
	}
	if _, err := transparent.Complete(ctx, &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/prompt", Name: "greet"},
		Argument: mcp.CompleteParamsArgument{Name: "who", Value: "a"}}); err != nil {
		t.Fatal(err)
	}
	if err := tel.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	spans := col.WaitSpans(t, 12)
	for _, s := range spans {
		if s.Attrs["jsonrpc.request.id"] == "forged" {
			t.Errorf("%s %s carries the request id the client forged in a header", s.Kind, s.Name)
		}
	}

	session := func(cs *mcp.ClientSession) []otelcoltest.Span {
		var out []otelcoltest.Span
		for _, s := range spans {
			if s.Kind == "Server" && s.Attrs["mcp.session.id"] == cs.ID() {
				out = append(out, s)
			}
		}
		return out
	}
	for name, cs := range map[string]*mcp.ClientSession{"transparent": transparent, "aggregate": aggregate} {
		got := map[string]otelcoltest.Span{}
		for _, s := range session(cs) {
			got[s.Name] = s
		}
		methods := []string{"initialize", "tools/list"}
		if name == "transparent" {
			methods = append(methods, "ping")
		}
		for _, m := range methods {
			s, ok := got[m]
			if !ok {
				t.Errorf("%s view: no SERVER span %q for session %s among %v", name, m, cs.ID(), spans)
				continue
			}
			wantAttrs(t, s, map[string]any{"mcp.method.name": m, "mcp.protocol.version": "2025-11-25", "network.transport": "tcp"})
			if s.Attrs["jsonrpc.request.id"] == nil {
				t.Errorf("%s view: %s SERVER span without jsonrpc.request.id: %v", name, m, s.Attrs)
			}
		}
	}
	// Each request of the session carries its own JSON-RPC id, not the
	// id of the initialize whose context the go-sdk runs the session under.
	ids := map[string]string{}
	for _, s := range session(transparent) {
		id := fmt.Sprint(s.Attrs["jsonrpc.request.id"])
		if other, dup := ids[id]; dup {
			t.Errorf("%s and %s SERVER spans of one session both carry jsonrpc.request.id %s", other, s.Name, id)
		}
		ids[id] = s.Name
	}
	if len(ids) < 6 {
		t.Errorf("transparent session: %d distinct request ids %v, want one per request (6)", len(ids), ids)
	}
	var statelessList []otelcoltest.Span
	for _, s := range byName(spans, "tools/list", "Server") {
		if s.Attrs["mcp.protocol.version"] == "2026-07-28" {
			statelessList = append(statelessList, s)
		}
	}
	if len(statelessList) != 1 || statelessList[0].Attrs["jsonrpc.request.id"] == nil {
		t.Errorf("2026-07-28 tools/list SERVER spans: %+v", statelessList)
	} else if _, ok := statelessList[0].Attrs["mcp.session.id"]; ok {
		t.Errorf("2026-07-28 tools/list SERVER span with mcp.session.id: %v", statelessList[0].Attrs)
	}

	u, _ := url.Parse(st.upstream)
	port, _ := strconv.Atoi(u.Port())
	receipts := map[string]bool{}
	st.mu.Lock()
	for _, r := range st.recs {
		receipts[r.GetReceiptId()] = true
	}
	st.mu.Unlock()
	for _, c := range []struct{ name, method string }{
		{"resources/read", "resources/read"}, {"prompts/get greet", "prompts/get"}, {"completion/complete", "completion/complete"},
	} {
		srv, cli := byName(spans, c.name, "Server"), byName(spans, c.name, "Client")
		if len(srv) != 1 || len(cli) != 1 {
			t.Errorf("%s: %d SERVER and %d CLIENT spans, want one each", c.name, len(srv), len(cli))
			continue
		}
		s, cl := srv[0], cli[0]
		if s.Attrs["jsonrpc.request.id"] == nil || s.Attrs["mcp.session.id"] != transparent.ID() {
			t.Errorf("%s SERVER span: %v", c.name, s.Attrs)
		}
		wantAttrs(t, cl, map[string]any{"mcp.method.name": c.method, "server.address": "127.0.0.1", "server.port": port, "network.transport": "tcp"})
		switch pv := fmt.Sprint(cl.Attrs["mcp.protocol.version"]); {
		case pv >= "2026-07-28":
			if _, ok := cl.Attrs["mcp.session.id"]; ok {
				t.Errorf("%s CLIENT span of a %s upstream session with mcp.session.id", c.name, pv)
			}
		case pv == "2025-11-25":
			if id, _ := cl.Attrs["mcp.session.id"].(string); id == "" {
				t.Errorf("%s CLIENT span of a 2025-11-25 upstream session without mcp.session.id: %v", c.name, cl.Attrs)
			}
		default:
			t.Errorf("%s CLIENT span protocol %q", c.name, pv)
		}
		st.seen.mu.Lock()
		want := "00-" + cl.TraceID + "-" + cl.SpanID + "-01"
		if got := st.seen.methodMeta[c.method]; len(got) != 1 || got[0] != want {
			t.Errorf("%s: upstream saw _meta traceparent %q, want %q", c.name, got, want)
		}
		st.seen.mu.Unlock()
		id, _ := s.Attrs["mcpready.receipt.id"].(string)
		if !receipts[id] {
			t.Errorf("%s SERVER span receipt id %q is no emitted receipt's", c.name, id)
		}
		var decision map[string]any
		for _, e := range s.Events {
			if e.Name == "mcpready.decision" {
				decision = e.Attrs
			}
		}
		if decision == nil || decision["mcpready.receipt.id"] != id {
			t.Errorf("%s SERVER span events %v: no decision event with receipt %s", c.name, s.Events, id)
		}
	}
}
