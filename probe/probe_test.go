package probe_test

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/santhosh-tekuri/jsonschema/v6"

	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/probe"
)

type lookupIn struct {
	Query string `json:"query" jsonschema:"what to look up"`
}

type lookupOut struct {
	Answer string `json:"answer"`
}

// server is a real go-sdk MCP server over Streamable HTTP.
func server(t *testing.T, opts *mcp.ServerOptions, extra ...func(*mcp.Server)) *httptest.Server {
	return serverWith(t, nil, opts, extra...)
}

// serverWith serves with handler options (Stateless: true serves
// server/discover, the 2026-07-28 era, as well as initialize).
func serverWith(t *testing.T, ho *mcp.StreamableHTTPOptions, opts *mcp.ServerOptions, extra ...func(*mcp.Server)) *httptest.Server {
	t.Helper()
	s := mcp.NewServer(&mcp.Implementation{Name: "com.example/docs", Version: "2.4.1"}, opts)
	mcp.AddTool(s, &mcp.Tool{Name: "lookup", Description: "look up a document"},
		func(ctx context.Context, req *mcp.CallToolRequest, in lookupIn) (*mcp.CallToolResult, lookupOut, error) {
			return nil, lookupOut{Answer: "doc for " + in.Query}, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "fails", Description: "always an execution error"},
		func(ctx context.Context, req *mcp.CallToolRequest, in lookupIn) (*mcp.CallToolResult, any, error) {
			return nil, nil, errors.New("backend exploded")
		})
	for _, f := range extra {
		f(s)
	}
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, ho))
	t.Cleanup(ts.Close)
	return ts
}

func run(t *testing.T, url string, o probe.Options) *probe.Report {
	t.Helper()
	if o.StepTimeout == 0 {
		o.StepTimeout = 5 * time.Second
	}
	r, err := probe.Run(context.Background(), url, o)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// want checks each named layer's status and reason.
func want(t *testing.T, r *probe.Report, checks ...string) {
	t.Helper()
	for _, c := range checks {
		parts := strings.SplitN(c, " ", 3)
		got := r.Layer(probe.Layer(parts[0]))
		if string(got.Status) != parts[1] || (len(parts) == 3 && got.Reason != parts[2]) {
			t.Errorf("%s: got %s %q, want %s", parts[0], got.Status, got.Reason, strings.Join(parts[1:], " "))
		}
	}
	if t.Failed() {
		b, _ := json.MarshalIndent(r, "", "  ")
		t.Logf("report: %s", b)
	}
}

func TestFunnelReadyBothEras(t *testing.T) {
	ts := serverWith(t, &mcp.StreamableHTTPOptions{Stateless: true}, nil)
	var asked string
	r := run(t, ts.URL, probe.Options{Server: "com.example/docs", ReadOnly: []string{"lookup"},
		Registered: func(_ context.Context, s string) (bool, error) { asked = s; return true, nil }})
	want(t, r, "registry ready present", "reachability ready", "protocol ready", "access ready no-auth-required",
		"listing ready", "invocation ready", "result ready")
	if asked != "com.example/docs" {
		t.Errorf("registry asked for %q", asked)
	}
	if len(r.Eras) != 2 || !r.Eras[0].OK || r.Eras[0].Negotiated != probe.VersionStateless || !r.Eras[1].OK || r.Eras[1].Negotiated != probe.VersionSession {
		t.Errorf("eras %+v", r.Eras)
	}
	if r.Tools != 2 || r.Pages != 1 || r.ProbedTool != "lookup" || r.Cold <= 0 || r.Warm <= 0 || !r.Ready() {
		t.Errorf("tools=%d pages=%d probed=%q cold=%v warm=%v ready=%v", r.Tools, r.Pages, r.ProbedTool, r.Cold, r.Warm, r.Ready())
	}
	if !strings.Contains(strings.Join(r.BlindSpots, ";"), "keyless") {
		t.Errorf("blind spots %v", r.BlindSpots)
	}
	var order []probe.Layer
	for _, l := range r.Layers {
		order = append(order, l.Layer)
	}
	if fmt.Sprint(order) != fmt.Sprint(probe.Layers()) {
		t.Errorf("layers %v, want %v", order, probe.Layers())
	}
}

func TestSessionEraOnly(t *testing.T) {
	ts := server(t, &mcp.ServerOptions{SupportedProtocolVersions: []string{probe.VersionSession}})
	r := run(t, ts.URL, probe.Options{})
	want(t, r, "registry skipped no-lookup", "protocol ready", "listing ready", "invocation skipped no-read-only-tool", "result skipped")
	if r.Eras[0].OK || r.Eras[0].Reason != "discover-unsupported" || !r.Eras[1].OK {
		t.Errorf("eras %+v", r.Eras)
	}
}

func TestNothingInvokedUnlessClassifiedReadOnly(t *testing.T) {
	var calls atomic.Int32
	ts := server(t, nil, func(s *mcp.Server) {
		s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
			return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
				if method == "tools/call" {
					calls.Add(1)
				}
				return next(ctx, method, req)
			}
		})
	})
	run(t, ts.URL, probe.Options{ReadOnly: []string{"not-listed"}})
	if n := calls.Load(); n != 0 {
		t.Fatalf("%d tools/call sent without a read-only classification", n)
	}
}

func TestResultLayer(t *testing.T) {
	ts := server(t, nil, func(s *mcp.Server) {
		mcp.AddTool(s, &mcp.Tool{Name: "liar", OutputSchema: map[string]any{"type": "object", "required": []any{"answer"},
			"properties": map[string]any{"answer": map[string]any{"type": "string"}}}},
			func(ctx context.Context, req *mcp.CallToolRequest, in lookupIn) (*mcp.CallToolResult, any, error) {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "x"}}, StructuredContent: map[string]any{"answer": 7}}, nil, nil
			})
	})
	want(t, run(t, ts.URL, probe.Options{ReadOnly: []string{"fails"}}), "invocation ready", "result not-ready is-error")
	want(t, run(t, ts.URL, probe.Options{ReadOnly: []string{"liar"}}), "invocation ready", "result not-ready output-schema")
}

func TestListingBounded(t *testing.T) {
	ts := server(t, &mcp.ServerOptions{PageSize: 1})
	r := run(t, ts.URL, probe.Options{MaxPages: 1, ReadOnly: []string{"lookup"}})
	want(t, r, "listing not-ready partial-page-limit", "invocation not-reached")
	if !r.Partial || r.Pages != 1 || r.Tools != 1 {
		t.Errorf("partial=%v pages=%d tools=%d", r.Partial, r.Pages, r.Tools)
	}
	r = run(t, ts.URL, probe.Options{})
	want(t, r, "listing ready")
	if r.Pages != 2 || r.Tools != 2 {
		t.Errorf("pages=%d tools=%d: every page must be read", r.Pages, r.Tools)
	}
}

// authServer serves RFC 9728 protected-resource metadata for resource and
// RFC 8414 metadata for its own issuer.
func authServer(t *testing.T, resource *string) *httptest.Server {
	t.Helper()
	var as *httptest.Server
	as = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/prm":
			json.NewEncoder(w).Encode(map[string]any{"resource": *resource, "authorization_servers": []string{as.URL}})
		case "/.well-known/oauth-authorization-server":
			json.NewEncoder(w).Encode(map[string]any{"issuer": as.URL, "authorization_endpoint": as.URL + "/authorize",
				"token_endpoint": as.URL + "/token", "code_challenge_methods_supported": []string{"S256"}, "response_types_supported": []string{"code"}})
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(as.Close)
	return as
}

func TestAccess(t *testing.T) {
	var resource string
	as := authServer(t, &resource)
	status := http.StatusUnauthorized
	challenge := ""
	ep := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if challenge != "" {
			w.Header().Set("WWW-Authenticate", challenge)
		}
		w.WriteHeader(status)
	}))
	defer ep.Close()
	resource = ep.URL

	challenge = `Bearer resource_metadata="` + as.URL + `/prm"`
	r := run(t, ep.URL, probe.Options{})
	want(t, r, "reachability ready", "access not-ready auth-required", "protocol not-reached", "listing not-reached")
	if len(r.Issuers) != 1 || r.Issuers[0] != as.URL || r.HTTPStatus != 401 {
		t.Errorf("issuers %v status %d", r.Issuers, r.HTTPStatus)
	}
	want(t, run(t, ep.URL, probe.Options{ExpectedIssuers: []string{"https://idp.example.org"}}), "access not-ready foreign-issuer")
	want(t, run(t, ep.URL, probe.Options{ExpectedIssuers: []string{as.URL}, Token: "t"}), "access not-ready token-refused")

	resource = "https://other.example/mcp" // metadata for another resource is not valid for this one
	want(t, run(t, ep.URL, probe.Options{}), "access not-ready auth-metadata-invalid")
	resource = ep.URL
	challenge = "" // and no metadata at the well-known locations
	want(t, run(t, ep.URL, probe.Options{}), "access not-ready auth-metadata-invalid")

	status = http.StatusPaymentRequired
	want(t, run(t, ep.URL, probe.Options{}), "reachability ready", "access not-ready billing", "protocol not-reached")
	status = http.StatusForbidden
	want(t, run(t, ep.URL, probe.Options{}), "access not-ready forbidden")
}

func TestRedirectToAnotherOriginRefused(t *testing.T) {
	var leaked atomic.Value
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		leaked.Store(r.Header.Get("Authorization") + "|reached")
	}))
	defer other.Close()
	ep := httptest.NewServer(http.RedirectHandler(other.URL+"/mcp", http.StatusTemporaryRedirect))
	defer ep.Close()
	r := run(t, ep.URL, probe.Options{Token: "secret-token"})
	want(t, r, "reachability not-ready redirect", "protocol not-reached", "result not-reached")
	if v := leaked.Load(); v != nil {
		t.Fatalf("the other origin was reached: %v", v)
	}
}

func TestMisbehavingEndpoints(t *testing.T) {
	hang := make(chan struct{})
	hanging := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-hang }))
	r := run(t, hanging.URL, probe.Options{StepTimeout: 300 * time.Millisecond})
	close(hang)
	hanging.Close()
	want(t, r, "reachability not-ready timeout", "protocol not-reached")

	garbage := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte("\x00\x01 not json"))
	}))
	defer garbage.Close()
	r = run(t, garbage.URL, probe.Options{})
	want(t, r, "reachability ready", "access ready", "protocol not-ready no-era", "listing not-reached")

	closed := httptest.NewServer(http.NotFoundHandler())
	url := closed.URL
	closed.Close()
	want(t, run(t, url, probe.Options{}), "reachability not-ready connect", "protocol not-reached")

	want(t, run(t, "http://no-such-host.invalid/mcp", probe.Options{StepTimeout: 3 * time.Second}), "reachability not-ready dns")

	if _, err := probe.Run(context.Background(), "ftp://x/", probe.Options{}); !errors.Is(err, probe.ErrURL) {
		t.Errorf("ftp URL: %v", err)
	}
	// A token never crosses the network in clear: refused before any
	// connection for plain http off loopback.
	if _, err := probe.Run(context.Background(), "http://no-such-host.invalid/mcp", probe.Options{Token: "s3cret"}); !errors.Is(err, probe.ErrURL) || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("token over plain http to a remote host: %v, want ErrURL", err)
	}
}

func TestTLSIdentity(t *testing.T) {
	ts := httptest.NewTLSServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server {
		return mcp.NewServer(&mcp.Implementation{Name: "s", Version: "1"}, nil)
	}, nil))
	defer ts.Close()
	pool := x509.NewCertPool()
	pool.AddCert(ts.Certificate())
	cfg := ts.Client().Transport.(*http.Transport).TLSClientConfig.Clone()
	cfg.RootCAs = pool

	want(t, run(t, ts.URL, probe.Options{TLS: cfg}), "reachability ready", "protocol ready")
	// The test certificate is for 127.0.0.1 and example.com, not localhost.
	local := strings.Replace(ts.URL, "127.0.0.1", "localhost", 1)
	want(t, run(t, local, probe.Options{TLS: cfg}), "reachability not-ready tls-identity")
	want(t, run(t, ts.URL, probe.Options{}), "reachability not-ready tls-untrusted")
}

func TestExampleArguments(t *testing.T) {
	got := probe.ExampleArguments(map[string]any{"type": "object", "required": []any{"q", "n", "tags", "mode"},
		"properties": map[string]any{"q": map[string]any{"type": "string", "minLength": 6.0}, "n": map[string]any{"type": "integer", "minimum": 3.0},
			"tags": map[string]any{"type": "array", "minItems": 2.0, "items": map[string]any{"type": "string"}},
			"mode": map[string]any{"enum": []any{"fast", "slow"}}, "optional": map[string]any{"type": "string"}}})
	b, _ := json.Marshal(got)
	if string(b) != `{"mode":"fast","n":3,"q":"aaaaaa","tags":["aaaa","aaaa"]}` {
		t.Fatalf("got %s", b)
	}
	for schema, want := range map[string]string{
		`{"type":"object"}`: `{}`,
		`{"type":"object","required":["ok","c","d"],"properties":{"ok":{"type":"boolean"},"c":{"const":7},"d":{"type":"string","default":"x"}}}`: `{"c":7,"d":"x","ok":false}`,
		`{"type":"object","required":["n"],"properties":{"n":{"type":"number","exclusiveMinimum":2}}}`:                                           `{"n":3}`,
		`{"type":"string"}`: `{}`,
	} {
		var m map[string]any
		if err := json.Unmarshal([]byte(schema), &m); err != nil {
			t.Fatal(err)
		}
		if b, _ := json.Marshal(probe.ExampleArguments(m)); string(b) != want {
			t.Errorf("%s: got %s, want %s", schema, b, want)
		}
	}
}

// rawServer is a hand-written session-era MCP server over plain JSON
// responses: answer gives each request's result, or a JSON-RPC error code
// (non-zero) with its message.
func rawServer(t *testing.T, answer func(method string, params json.RawMessage) (any, int)) *httptest.Server {
	t.Helper()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		}
		if r.Method != http.MethodPost || json.NewDecoder(r.Body).Decode(&req) != nil {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		if req.ID == nil {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		out := map[string]any{"jsonrpc": "2.0", "id": req.ID}
		if req.Method == "initialize" {
			out["result"] = map[string]any{"protocolVersion": probe.VersionSession, "capabilities": map[string]any{"tools": map[string]any{}},
				"serverInfo": map[string]any{"name": "raw", "version": "1"}}
		} else if res, code := answer(req.Method, req.Params); code != 0 {
			out["error"] = map[string]any{"code": code, "message": "no"}
		} else {
			out["result"] = res
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(out)
	}))
	t.Cleanup(ts.Close)
	return ts
}

var rawTool = map[string]any{"name": "t", "inputSchema": map[string]any{"type": "object"}}

// TestCursorLoop: every tools/list page points to the same next cursor; the
// listing stops, partial, instead of looping.
func TestCursorLoop(t *testing.T) {
	var lists atomic.Int32
	ts := rawServer(t, func(method string, _ json.RawMessage) (any, int) {
		if method != "tools/list" {
			return nil, -32601
		}
		lists.Add(1)
		return map[string]any{"tools": []any{rawTool}, "nextCursor": "again"}, 0
	})
	r := run(t, ts.URL, probe.Options{})
	want(t, r, "protocol ready", "listing not-ready partial-cursor-loop", "invocation not-reached")
	if n := lists.Load(); n != 2 || !r.Partial {
		t.Errorf("%d tools/list requests (want 2: the repeat is seen on the second), partial=%v", n, r.Partial)
	}
}

// TestPageFailedAndArgumentsRejected: a failing second page leaves the
// listing partial; a read-only tool that rejects schema-valid arguments
// with -32602 is invocation-not-ready, and the layer above is not reached.
func TestPageFailedAndArgumentsRejected(t *testing.T) {
	failPage := rawServer(t, func(method string, params json.RawMessage) (any, int) {
		if method == "tools/list" && strings.Contains(string(params), "page2") {
			return nil, -32603
		}
		return map[string]any{"tools": []any{rawTool}, "nextCursor": "page2"}, 0
	})
	r := run(t, failPage.URL, probe.Options{})
	want(t, r, "listing not-ready partial-page-failed", "invocation not-reached")
	if !r.Partial || r.Pages != 1 || r.Tools != 1 {
		t.Errorf("partial=%v pages=%d tools=%d", r.Partial, r.Pages, r.Tools)
	}

	rejecting := rawServer(t, func(method string, _ json.RawMessage) (any, int) {
		switch method {
		case "tools/list":
			return map[string]any{"tools": []any{rawTool}}, 0
		case "tools/call":
			return nil, -32602
		}
		return nil, -32601
	})
	want(t, run(t, rejecting.URL, probe.Options{ReadOnly: []string{"t"}}),
		"invocation not-ready arguments-rejected", "result not-reached")
	failing := rawServer(t, func(method string, _ json.RawMessage) (any, int) {
		if method == "tools/list" {
			return map[string]any{"tools": []any{rawTool}}, 0
		}
		return nil, -32603
	})
	want(t, run(t, failing.URL, probe.Options{ReadOnly: []string{"t"}}), "invocation not-ready call-failed")
}

func TestEvidence(t *testing.T) {
	ts := serverWith(t, &mcp.StreamableHTTPOptions{Stateless: true}, nil)
	r := run(t, ts.URL, probe.Options{Server: "com.example/docs", ReadOnly: []string{"lookup"}})
	if _, err := probe.Evidence(r, probe.EvidenceOptions{}); !errors.Is(err, probe.ErrNoObserver) {
		t.Fatalf("no observer: %v", err)
	}
	obj, err := probe.Evidence(r, probe.EvidenceOptions{Observer: "org/prober", Region: "eu-west-1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := obj.Validate(); err != nil || obj.Metadata.Name != "probe/com.example/docs" {
		t.Fatalf("%q: %v", obj.Metadata.Name, err)
	}
	ev := obj.Spec.(*mcpreadyv1.Evidence)
	if ev.GetMethod() != mcpreadyv1.EvidenceMethod_EVIDENCE_METHOD_SYNTHETIC || ev.GetAuthClass() != "keyless" || ev.GetPath() != "server/discover (2026-07-28)" ||
		ev.GetSubject().GetServerVersion() != "2.4.1" || ev.GetSubject().GetToolName() != "lookup" || ev.GetObserver().GetId() != "org/prober" ||
		!ev.GetExpiresAt().AsTime().After(ev.GetObservedAt().AsTime()) {
		t.Fatalf("evidence %v", ev)
	}
	rates := map[mcpreadyv1.ReadinessLayer]string{}
	for _, lr := range ev.GetRates() {
		rates[lr.GetLayer()] = fmt.Sprintf("%d/%d-%d", lr.GetSuccesses(), lr.GetDenominator(), lr.GetExcluded())
	}
	want := map[mcpreadyv1.ReadinessLayer]string{
		mcpreadyv1.ReadinessLayer_READINESS_LAYER_REGISTRY: "0/0-1", mcpreadyv1.ReadinessLayer_READINESS_LAYER_REACHABILITY: "1/1-0",
		mcpreadyv1.ReadinessLayer_READINESS_LAYER_PROTOCOL: "1/1-0", mcpreadyv1.ReadinessLayer_READINESS_LAYER_ACCESS: "1/1-0",
		mcpreadyv1.ReadinessLayer_READINESS_LAYER_INVOCATION: "1/1-0", mcpreadyv1.ReadinessLayer_READINESS_LAYER_RESULT_VALIDITY: "1/1-0",
	}
	if fmt.Sprint(rates) != fmt.Sprint(want) {
		t.Errorf("rates %v, want %v", rates, want)
	}

	// Access not ready: that layer fails with its code, the layers above are
	// excluded, never counted as successes.
	deny := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusPaymentRequired) }))
	defer deny.Close()
	obj, err = probe.Evidence(run(t, deny.URL, probe.Options{}), probe.EvidenceOptions{Observer: "org/prober"})
	if err != nil || obj.Validate() != nil {
		t.Fatalf("%v %v", err, obj.Validate())
	}
	ev = obj.Spec.(*mcpreadyv1.Evidence)
	got := map[mcpreadyv1.ReadinessLayer]string{}
	for _, lr := range ev.GetRates() {
		got[lr.GetLayer()] = fmt.Sprintf("%d/%d-%d", lr.GetSuccesses(), lr.GetDenominator(), lr.GetExcluded())
	}
	if got[mcpreadyv1.ReadinessLayer_READINESS_LAYER_ACCESS] != "0/1-0" || got[mcpreadyv1.ReadinessLayer_READINESS_LAYER_PROTOCOL] != "0/0-1" ||
		got[mcpreadyv1.ReadinessLayer_READINESS_LAYER_INVOCATION] != "0/0-1" || len(ev.GetErrors()) != 1 || ev.GetErrors()[0].GetCode() != "access:billing" {
		t.Errorf("rates %v errors %v", got, ev.GetErrors())
	}
}

func TestEmptyListingIsReady(t *testing.T) {
	s := mcp.NewServer(&mcp.Implementation{Name: "empty", Version: "1"}, nil)
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	defer ts.Close()
	r := run(t, ts.URL, probe.Options{ReadOnly: []string{"x"}})
	want(t, r, "listing ready empty", "invocation skipped no-read-only-tool", "result skipped")
	if !r.Ready() || r.Warm <= 0 {
		t.Errorf("ready=%v warm=%v", r.Ready(), r.Warm)
	}
}

// FuzzExampleArguments: any JSON object an endpoint lists as a tool's input
// schema yields arguments that marshal as a JSON object, without a panic
// (the schema comes from the endpoint, so it is untrusted input).
func FuzzExampleArguments(f *testing.F) {
	f.Add([]byte(`{"type":"object","required":["q"],"properties":{"q":{"type":"string","minLength":3}}}`))
	f.Add([]byte(`{"type":"object","required":["a"],"properties":{"a":{"type":"array","minItems":1e9,"items":{"$ref":"#"}}}}`))
	f.Add([]byte(`{"required":[1,null],"properties":{"x":{"enum":[]}}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var schema map[string]any
		if json.Unmarshal(b, &schema) != nil {
			return
		}
		out, err := json.Marshal(probe.ExampleArguments(schema))
		if err != nil || len(out) == 0 || out[0] != '{' {
			t.Fatalf("arguments %s: %v", out, err)
		}
	})
}

// TestExampleArgumentsBounded: an endpoint's schema asking for a billion
// items, a gigabyte string or nested arrays that multiply gets bounded
// arguments (before, the probe tried to build them and ran out of memory).
func TestExampleArgumentsBounded(t *testing.T) {
	var schema map[string]any
	if err := json.Unmarshal([]byte(`{"type":"object","required":["a","s","n"],"properties":{
		"a":{"type":"array","minItems":1e9,"items":{"type":"string"}},
		"s":{"type":"string","minLength":1e12},
		"n":{"type":"array","minItems":1000,"items":{"type":"array","minItems":1000,"items":{"type":"array","minItems":1000,"items":{"type":"string","minLength":1000}}}}}}`), &schema); err != nil {
		t.Fatal(err)
	}
	got := probe.ExampleArguments(schema)
	b, _ := json.Marshal(got)
	if len(got["a"].([]any)) != probe.MaxExampleItems || len(got["s"].(string)) != probe.MaxExampleLength || len(b) > probe.MaxExampleValues*(probe.MaxExampleLength+8) {
		t.Fatalf("%d items, %d bytes of string, %d bytes in all", len(got["a"].([]any)), len(got["s"].(string)), len(b))
	}
}

// TestMalformedAuthMetadata: a 401 whose challenge is garbage, whose
// protected-resource metadata is not JSON, or whose authorization server
// serves garbage metadata gives a specific access reason, never a crash.
func TestMalformedAuthMetadata(t *testing.T) {
	var ep *httptest.Server
	garbageAS := false
	meta := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.URL.Path == "/garbage" || (garbageAS && strings.HasPrefix(r.URL.Path, "/.well-known/")):
			w.Write([]byte("{\x00 not json"))
		case r.URL.Path == "/prm":
			json.NewEncoder(w).Encode(map[string]any{"resource": ep.URL, "authorization_servers": []string{"http://" + r.Host}})
		default:
			http.NotFound(w, r)
		}
	}))
	defer meta.Close()
	challenge := ""
	ep = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("WWW-Authenticate", challenge)
		w.WriteHeader(http.StatusUnauthorized)
	}))
	defer ep.Close()
	for _, c := range []struct {
		challenge string
		garbageAS bool
		reason    string
	}{
		{`Bearer resource_metadata="` + meta.URL + `/garbage"`, false, "auth-metadata-invalid"},
		{`,,,="\x01`, false, "auth-metadata-invalid"},
		{`Bearer resource_metadata="` + meta.URL + `/prm"`, true, "auth-server-metadata-invalid"},
	} {
		challenge, garbageAS = c.challenge, c.garbageAS
		want(t, run(t, ep.URL, probe.Options{}), "reachability ready", "access not-ready "+c.reason, "protocol not-reached")
	}
}

// TestExampleArgumentsHonourUpperBounds: the canary's arguments must be
// valid against the tool's schema, upper bounds included, or a strict
// server rejects the call and the probe reports a ready tool as not ready
// (arguments-rejected). Each example is checked by a JSON Schema validator.
func TestExampleArgumentsHonourUpperBounds(t *testing.T) {
	for _, schema := range []string{
		`{"type":"object","required":["code"],"properties":{"code":{"type":"string","maxLength":2}}}`,
		`{"type":"object","required":["code"],"properties":{"code":{"type":"string","minLength":1,"maxLength":3}}}`,
		`{"type":"object","required":["n"],"properties":{"n":{"type":"integer","maximum":0}}}`,
		`{"type":"object","required":["n"],"properties":{"n":{"type":"integer","minimum":-10,"maximum":-5}}}`,
		`{"type":"object","required":["n"],"properties":{"n":{"type":"integer","exclusiveMaximum":1}}}`,
		`{"type":"object","required":["n"],"properties":{"n":{"type":"integer","minimum":1.5}}}`,
		`{"type":"object","required":["n"],"properties":{"n":{"type":"integer","exclusiveMinimum":1.5,"maximum":2}}}`,
		`{"type":"object","required":["x"],"properties":{"x":{"type":"number","exclusiveMinimum":0,"exclusiveMaximum":0.5}}}`,
		`{"type":"object","required":["x"],"properties":{"x":{"type":"number","maximum":-2.5}}}`,
		`{"type":"object","required":["tags"],"properties":{"tags":{"type":"array","minItems":1,"items":{"type":"string","maxLength":1}}}}`,
	} {
		var m map[string]any
		if err := json.Unmarshal([]byte(schema), &m); err != nil {
			t.Fatal(err)
		}
		doc, err := jsonschema.UnmarshalJSON(strings.NewReader(schema))
		if err != nil {
			t.Fatal(err)
		}
		c := jsonschema.NewCompiler()
		if err := c.AddResource("schema.json", doc); err != nil {
			t.Fatal(err)
		}
		sch, err := c.Compile("schema.json")
		if err != nil {
			t.Fatal(err)
		}
		got := probe.ExampleArguments(m)
		b, _ := json.Marshal(got)
		v, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		if err := sch.Validate(v); err != nil {
			t.Errorf("%s: example %s is not valid: %v", schema, b, err)
		}
	}
}

// ReadToken gives the token without surrounding white space; an empty or
// oversized file is an error (a probe meant to present a token must not run
// keyless), and no error quotes the file's content.
func TestReadToken(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if tok, err := probe.ReadToken(write("ok", " s3cret\n")); err != nil || tok != "s3cret" {
		t.Fatalf("%q %v", tok, err)
	}
	if _, err := probe.ReadToken(write("empty", " \n")); !errors.Is(err, probe.ErrNoToken) {
		t.Fatalf("empty file: %v, want ErrNoToken", err)
	}
	big := "s3cret" + strings.Repeat("x", 64<<10)
	if _, err := probe.ReadToken(write("big", big)); err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("oversized file: %v", err)
	}
	if _, err := probe.ReadToken(filepath.Join(dir, "missing")); err == nil {
		t.Fatal("a missing file read")
	}
}

// A Credential's transport carries only the requests for the endpoint's
// origin: the authorization server's metadata, at another origin, is
// fetched without it. Its auth class is the report's.
func TestCredential(t *testing.T) {
	var resource string
	as := authServer(t, &resource)
	ep := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("WWW-Authenticate", `Bearer resource_metadata="`+as.URL+`/prm"`)
		w.WriteHeader(http.StatusUnauthorized)
	}))
	defer ep.Close()
	resource = ep.URL
	var mu sync.Mutex
	var hosts []string
	cred := &probe.Credential{AuthClass: "oauth:client_credentials", Transport: func(base http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			mu.Lock()
			hosts = append(hosts, r.URL.Host)
			mu.Unlock()
			r = r.Clone(r.Context())
			r.Header.Set("Authorization", "Bearer from-the-credential")
			return base.RoundTrip(r)
		})
	}}
	r := run(t, ep.URL, probe.Options{Credential: cred})
	want(t, r, "access not-ready token-refused")
	if r.AuthClass != "oauth:client_credentials" || !r.BearerPresented {
		t.Errorf("auth class %q, bearer presented %v", r.AuthClass, r.BearerPresented)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(hosts) == 0 || slices.ContainsFunc(hosts, func(h string) bool { return h != strings.TrimPrefix(ep.URL, "http://") }) {
		t.Errorf("the credential carried requests for %v, want the endpoint's origin only", hosts)
	}
	if r := run(t, ep.URL, probe.Options{}); r.AuthClass != "keyless" {
		t.Errorf("keyless run: auth class %q", r.AuthClass)
	}

	for name, o := range map[string]probe.Options{
		"both":         {Token: "t", Credential: cred},
		"no transport": {Credential: &probe.Credential{AuthClass: "oauth:client_credentials"}},
		"keyless":      {Credential: &probe.Credential{AuthClass: "keyless", Transport: cred.Transport}},
		"stdio":        {Credential: &probe.Credential{AuthClass: "stdio", Transport: cred.Transport}},
		"unknown":      {Credential: &probe.Credential{AuthClass: "oauth:password", Transport: cred.Transport}},
	} {
		if _, err := probe.Run(context.Background(), ep.URL, o); !errors.Is(err, probe.ErrCredential) {
			t.Errorf("%s: %v, want ErrCredential", name, err)
		}
	}
	if _, err := probe.Run(context.Background(), "http://no-such-host.invalid/mcp", probe.Options{Credential: cred}); !errors.Is(err, probe.ErrURL) {
		t.Errorf("credential over plain http to a remote host: %v, want ErrURL", err)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
