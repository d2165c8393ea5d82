package front

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/mcpready/mcpready/agent/config"
)

// newEraHarness is the front harness with "era", a stateless (2026-07-28)
// go-sdk upstream: "caps" reports the client capabilities it was told,
// "needs_sampling" refuses (-32021) a client without sampling, "steps"
// reports progress three times, "routed" mirrors argument region into
// header Mcp-Param-Region (SEP-2243), and "block" waits until its call is
// cancelled, reporting that on cancelled ("block" also on "test", the
// session-era upstream).
func newEraHarness(t *testing.T) (*harness, chan struct{}) {
	t.Helper()
	h := newHarness(t)
	cancelled := make(chan struct{}, 4)
	srv := mcp.NewServer(&mcp.Implementation{Name: "era", Version: "1.0.0"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "caps", Description: "Reports the client capabilities."},
		func(_ context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			c := req.ClientCapabilities()
			got := "none"
			if c != nil {
				got = strings.Join(capKinds(c), ",")
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: got}}}, nil, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "needs_sampling", Description: "Needs sampling."},
		func(_ context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			if c := req.ClientCapabilities(); c != nil && c.Sampling != nil {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "sampled"}}}, nil, nil
			}
			data, _ := json.Marshal(mcp.MissingRequiredClientCapabilityData{RequiredCapabilities: &mcp.ClientCapabilities{Sampling: &mcp.SamplingCapabilities{}}})
			return nil, nil, &jsonrpc.Error{Code: mcp.CodeMissingRequiredClientCapabilities, Message: "secret-echo sampling required", Data: data}
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "steps", Description: "Reports progress three times."},
		func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			for i := range 3 {
				_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: req.Params.GetProgressToken(), Progress: float64(i + 1), Total: 3})
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil, nil
		})
	mcp.AddTool(srv, &mcp.Tool{Name: "routed", Description: "Routed by region.", InputSchema: json.RawMessage(
		`{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"},"n":{"type":"integer"}}}`)},
		func(context.Context, *mcp.CallToolRequest, map[string]any) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "routed"}}}, nil, nil
		})
	block := func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		<-ctx.Done()
		cancelled <- struct{}{}
		return nil, nil, ctx.Err()
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "block", Description: "Waits until cancelled."}, block)
	mcp.AddTool(h.up.Server, &mcp.Tool{Name: "block", Description: "Waits until cancelled."}, block)
	h.enrollQualified(t, config.Upstream{Name: "test", URL: h.up.URL})
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
		&mcp.StreamableHTTPOptions{Stateless: true, PropagateRequestCancellation: true}))
	t.Cleanup(func() { hs.CloseClientConnections(); hs.Close() })
	up := config.Upstream{Name: "era", URL: hs.URL}
	h.enrollQualified(t, up) // reached through its entries' endpoint
	p := testPolicy()
	p.Principals[0].Allow = append(p.Principals[0].Allow, "era/*")
	h.install(t, p)
	return h, cancelled
}

func capKinds(c *mcp.ClientCapabilities) []string {
	var out []string
	if c.Elicitation != nil {
		out = append(out, "elicitation")
	}
	if c.Sampling != nil {
		out = append(out, "sampling")
	}
	if c.RootsV2 != nil {
		out = append(out, "roots")
	}
	if len(out) == 0 {
		return []string{"none"}
	}
	return out
}

// post2026 sends one 2026-07-28 request on path with the SEP-2575 _meta
// and standard headers (plus extra), returning the HTTP status and the
// JSON-RPC message of the answer.
func post2026(t *testing.T, h *harness, path, method string, params map[string]any, caps map[string]any, extra http.Header) (int, map[string]any) {
	t.Helper()
	if params == nil {
		params = map[string]any{}
	}
	params["_meta"] = map[string]any{"io.modelcontextprotocol/protocolVersion": statelessProtocol,
		"io.modelcontextprotocol/clientCapabilities": caps, "io.modelcontextprotocol/clientInfo": map[string]any{"name": "t", "version": "1"}}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 7, "method": method, "params": params})
	req, _ := http.NewRequest(http.MethodPost, h.url+path, strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", statelessProtocol)
	req.Header.Set("Mcp-Method", method)
	if n, ok := params["name"].(string); ok {
		req.Header.Set("Mcp-Name", n)
	}
	req.Header.Set("Authorization", "Bearer "+devToken)
	for k, v := range extra {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var last map[string]any
	for _, line := range strings.Split(string(b), "\n") {
		if d, ok := strings.CutPrefix(line, "data: "); ok {
			line = d
		}
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["id"] != nil {
			last = m
		}
	}
	return resp.StatusCode, last
}

// A stateless caller's tools/list carries the SEP-2549 caching hints; the
// list is the principal's own, so its scope is private (failed before:
// cacheScope was "").
func TestStatelessListCachingHints(t *testing.T) {
	h, _ := newEraHarness(t)
	for _, path := range []string{"/mcp/servers/era", "/mcp"} {
		status, msg := post2026(t, h, path, "tools/list", nil, map[string]any{}, nil)
		res, _ := msg["result"].(map[string]any)
		if status != http.StatusOK || res["cacheScope"] != "private" || res["ttlMs"] != float64(0) {
			t.Fatalf("%s: HTTP %d, result %v; want cacheScope private, ttlMs 0", path, status, msg)
		}
	}
}

// SEP-2575: an unknown method is HTTP 404 with MethodNotFound for a
// stateless caller (failed before: HTTP 200).
func TestStatelessUnknownMethodIs404(t *testing.T) {
	h, _ := newEraHarness(t)
	status, msg := post2026(t, h, "/mcp/servers/era", "no/such", nil, map[string]any{}, nil)
	e, _ := msg["error"].(map[string]any)
	if status != http.StatusNotFound || e["code"] != float64(jsonrpc.CodeMethodNotFound) {
		t.Fatalf("HTTP %d %v, want 404 with -32601", status, msg)
	}
}

// The upstream sees the caller's own input capabilities, not the agent's:
// it may ask only for what the caller can answer, and an upstream that
// needs an undeclared capability refuses with -32021, which reaches the
// caller as that error (HTTP 400, the capability named, no upstream text).
// Failed before: the upstream saw none and ran needs_sampling's refusal
// into a tool error.
func TestStatelessCallerCapabilities(t *testing.T) {
	h, _ := newEraHarness(t)
	_, msg := post2026(t, h, "/mcp/servers/era", "tools/call", map[string]any{"name": "caps", "arguments": map[string]any{}},
		map[string]any{"sampling": map[string]any{}}, nil)
	if got := resultText(msg); got != "sampling" {
		t.Fatalf("upstream saw capabilities %q (%v), want sampling", got, msg)
	}
	status, msg := post2026(t, h, "/mcp/servers/era", "tools/call", map[string]any{"name": "needs_sampling", "arguments": map[string]any{}},
		map[string]any{}, nil)
	e, _ := msg["error"].(map[string]any)
	data, _ := e["data"].(map[string]any)
	req, _ := data["requiredCapabilities"].(map[string]any)
	if status != http.StatusBadRequest || e["code"] != float64(mcp.CodeMissingRequiredClientCapabilities) || req["sampling"] == nil {
		t.Fatalf("HTTP %d %v, want 400 with -32021 naming sampling", status, msg)
	}
	if strings.Contains(e["message"].(string), "secret-echo") || !strings.Contains(e["message"].(string), "receipt") {
		t.Fatalf("message %q: want the agent's own text naming the receipt", e["message"])
	}
	status, msg = post2026(t, h, "/mcp/servers/era", "tools/call", map[string]any{"name": "needs_sampling", "arguments": map[string]any{}},
		map[string]any{"sampling": map[string]any{}}, nil)
	if status != http.StatusOK || resultText(msg) != "sampled" {
		t.Fatalf("with sampling declared: HTTP %d %v", status, msg)
	}
}

func resultText(msg map[string]any) string {
	res, _ := msg["result"].(map[string]any)
	content, _ := res["content"].([]any)
	if len(content) != 1 {
		return ""
	}
	c, _ := content[0].(map[string]any)
	s, _ := c["text"].(string)
	return s
}

// Progress of an upstream call reaches a stateless caller that asked for
// it (failed before: none arrived).
func TestStatelessProgressRelayed(t *testing.T) {
	h, _ := newEraHarness(t)
	var mu sync.Mutex
	var got []float64
	c := mcp.NewClient(&mcp.Implementation{Name: "ai-agent", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			got = append(got, req.Params.Progress)
			mu.Unlock()
		}})
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: h.url + "/mcp/servers/era",
		HTTPClient: &http.Client{Transport: bearer{devToken}}, MaxRetries: -1}, &mcp.ClientSessionOptions{ProtocolVersion: statelessProtocol})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	p := &mcp.CallToolParams{Name: "steps", Arguments: map[string]any{}}
	p.SetProgressToken("tok-1")
	res, err := cs.CallTool(context.Background(), p)
	if err != nil || text(res) != "done" {
		t.Fatalf("call: %v %+v", err, res)
	}
	// The client dispatches notifications on its own goroutines.
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		mu.Lock()
		n := len(got)
		mu.Unlock()
		if n == 3 {
			break
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 3 {
		t.Fatalf("progress %v, want three notifications", got)
	}
	if n := h.front.caps.openCount(); n != 0 {
		t.Fatalf("%d dedicated sessions still held after the call", n)
	}
}

// SEP-2243: a stateless tools/call whose Mcp-Param-* header disagrees with
// the argument it mirrors is refused with HTTP 400 HeaderMismatch before
// anything runs (failed before: the call ran).
func TestStatelessParamHeadersChecked(t *testing.T) {
	h, _ := newEraHarness(t)
	call := func(region any, hdr string) (int, map[string]any) {
		args := map[string]any{"n": 1}
		if region != nil {
			args["region"] = region
		}
		var extra http.Header
		if hdr != "" {
			extra = http.Header{"Mcp-Param-Region": {hdr}}
		}
		return post2026(t, h, "/mcp/servers/era", "tools/call", map[string]any{"name": "routed", "arguments": args}, map[string]any{}, extra)
	}
	for _, c := range []struct {
		region any
		header string
		ok     bool
	}{
		{"eu", "eu", true},
		{"Hello", "=?base64?SGVsbG8=?=", true},
		{"SGVsbG8=", "SGVsbG8=", true}, // literal without the wrapper
		{nil, "", true},
		{"eu", "us", false},
		{"eu", "", false},                         // header missing
		{nil, "eu", false},                        // header without argument
		{"Hello", "=?base64?SGVsbG8?=", false},    // bad padding
		{"Hello", "=?base64?SGVs!!bG8=?=", false}, // not Base64
	} {
		status, msg := call(c.region, c.header)
		e, _ := msg["error"].(map[string]any)
		switch {
		case c.ok && (status != http.StatusOK || resultText(msg) != "routed"):
			t.Errorf("region %v header %q: HTTP %d %v, want the call to run", c.region, c.header, status, msg)
		case !c.ok && (status != http.StatusBadRequest || e["code"] != float64(codeHeaderMismatch)):
			t.Errorf("region %v header %q: HTTP %d %v, want 400 with -32020", c.region, c.header, status, msg)
		}
	}
}

func FuzzParamHeaders(f *testing.F) {
	f.Add(`{"region":"eu"}`, "eu", `{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"}}}`)
	f.Add(`{"a":{"b":3}}`, "=?base64?Mw==?=", `{"properties":{"a":{"properties":{"b":{"x-mcp-header":"B"}}}}}`)
	f.Fuzz(func(t *testing.T, args, header, schema string) {
		b := headerBindings(json.RawMessage(schema))
		h := http.Header{}
		for _, x := range b {
			h.Set("Mcp-Param-"+x.header, header)
		}
		if err := checkParamHeaders(h, b, json.RawMessage(args)); err != nil && !strings.Contains(err.Error(), ErrParamHeader.Error()) {
			t.Fatalf("untyped error %v", err)
		}
	})
}

// An abandoned or timed-out call is cancelled upstream, for callers and upstreams of
// both eras (a session-era upstream gets notifications/cancelled; a
// stateless one sees its request end).
func TestAbandonedCallCancelledUpstream(t *testing.T) {
	h, cancelled := newEraHarness(t)
	for _, c := range []struct{ server, version string }{{"era", statelessProtocol}, {"era", "2025-11-25"}, {"test", statelessProtocol}, {"test", "2025-11-25"}} {
		version := c.server + " " + c.version
		cs := h.connect(t, "/mcp/servers/"+c.server, devToken, nil, c.version)
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "block", Arguments: map[string]any{}})
		cancel()
		if err == nil {
			t.Fatalf("%s: the call returned although it blocks", version)
		}
		select {
		case <-cancelled:
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: the upstream call was never cancelled", version)
		}
	}
	// A call past the policy's deadline is cancelled upstream too.
	p := testPolicy()
	p.Principals[0].Allow = append(p.Principals[0].Allow, "era/*")
	p.Deadline = durationpb.New(300 * time.Millisecond)
	h.install(t, p)
	for _, server := range []string{"era", "test"} {
		cs := h.connect(t, "/mcp/servers/"+server, devToken, nil, "2025-11-25")
		if res := call(t, cs, "block", map[string]any{}); !res.IsError {
			t.Fatalf("%s: a call past its deadline answered %+v", server, res)
		}
		select {
		case <-cancelled:
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: the timed-out upstream call was never cancelled", server)
		}
	}
}

func (c *limiter) openCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}
