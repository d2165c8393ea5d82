package front

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpready/mcpready/agent/config"
	"github.com/mcpready/mcpready/agent/receipt"
	"github.com/mcpready/mcpready/internal/jsonwire"
)

func TestParseFastCall(t *testing.T) {
	tests := []struct {
		name, body string
		ok         bool
	}{
		{"plain", `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}`, true},
		{"string id, no arguments", `{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"echo"}}`, true},
		{"workflow meta", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"e","_meta":{"mcpready.dev/workflow":"w"}}}`, true},
		{"progress token", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"e","_meta":{"progressToken":1}}}`, false},
		{"protocol meta", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"e","_meta":{"io.modelcontextprotocol/protocolVersion":"x"}}}`, false},
		{"other method", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, false},
		{"notification", `{"jsonrpc":"2.0","method":"tools/call","params":{"name":"e"}}`, false},
		{"null id", `{"jsonrpc":"2.0","id":null,"method":"tools/call","params":{"name":"e"}}`, false},
		{"batch", `[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"e"}}]`, false},
		{"array arguments", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"e","arguments":[1]}}`, false},
		{"no name", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}}`, false},
		{"request state", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"e","requestState":"s"}}`, false},
		{"wrong version", `{"jsonrpc":"1.0","id":1,"method":"tools/call","params":{"name":"e"}}`, false},
		{"garbage", `{"jsonrpc":`, false},
		// Keys match exactly, as the go-sdk reads them: encoding/json took
		// "Method" for the method, so the fast path ran a tools/call the
		// go-sdk would have read as a tools/list, and "NAME" for the name.
		{"method key in another case", `{"jsonrpc":"2.0","id":1,"method":"tools/list","Method":"tools/call","params":{"name":"e"}}`, false},
		{"name key in another case", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"NAME":"e"}}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, ok := decodeFastCall([]byte(tt.body)); ok != tt.ok {
				t.Fatalf("parseFastCall = %v, want %v", ok, tt.ok)
			}
		})
	}
}

// decodeFastCall runs body through precheck and parseFastCall, as
// ServeHTTP does.
func decodeFastCall(body []byte) (fastCall, bool) {
	r := httptest.NewRequest(http.MethodPost, "/mcp", bytes.NewReader(body))
	env, _, ok := precheck(httptest.NewRecorder(), r, 0, nil)
	if !ok || env == nil {
		return fastCall{}, false
	}
	return parseFastCall(env)
}

func FuzzParseFastCall(f *testing.F) {
	f.Add([]byte(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}`))
	f.Add([]byte(`{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"e","_meta":{"progressToken":1}}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, ok := decodeFastCall(b)
		if ok && (c.params.Name == "" || len(c.id) == 0) {
			t.Fatalf("accepted a call without name or id: %q", b)
		}
	})
}

// TestFastCallAnswersLikeTheSDK sends the same raw tools/call on a session
// the fast path serves and on one it leaves to the go-sdk (a log level is
// set), and wants the same answer from both: the same status and the same
// response message, which the go-sdk sends as one event of a stream and
// the fast path as an application/json body, byte for byte as the go-sdk
// writes it in its JSON-response mode.
func TestFastCallAnswersLikeTheSDK(t *testing.T) {
	h := newHarness(t)
	fast := h.connect(t, "/mcp/servers/test", devToken, nil, "2025-11-25")
	sdk := h.connect(t, "/mcp/servers/test", devToken, nil, "2025-11-25")
	if err := sdk.SetLoggingLevel(context.Background(), &mcp.SetLoggingLevelParams{Level: "error"}); err != nil {
		t.Fatal(err)
	}
	v := waitFast(t, h, fast)
	post := func(cs *mcp.ClientSession, body string) (status int, contentType, answer string, viaFast bool) {
		req, _ := http.NewRequest(http.MethodPost, h.url+"/mcp/servers/test", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+devToken)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", cs.ID())
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		s, _ := v.fastSession(req, h.front.opts.Now())
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("Content-Type"), string(b), s != nil
	}
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":41,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`,
		`{"jsonrpc":"2.0","id":"x-1","method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"},"_meta":{"k":"v"}}}`,
		`{"jsonrpc":"2.0","id":"y-2","method":"tools/call","params":{"name":"echo","arguments":{"text":"<b> & \u00e9 \u2028 \"q\""}}}`,
		`{"jsonrpc":"2.0","id":-7,"method":"tools/call","params":{"name":"echo","arguments":{"text":""}}}`,
	} {
		fs, fct, fb, viaFast := post(fast, body)
		ss, sct, sb, viaFastToo := post(sdk, body)
		if !viaFast || viaFastToo {
			t.Fatalf("fast path taken: %v and %v, want true and false", viaFast, viaFastToo)
		}
		event, ok := strings.CutPrefix(sb, "event: message\ndata: ")
		event, ended := strings.CutSuffix(event, "\n\n")
		if !ok || !ended || strings.Contains(event, "\n") || sct != "text/event-stream" {
			t.Fatalf("the go-sdk answered %s %q, not one event", sct, sb)
		}
		if fs != ss || fct != "application/json" || fb != event {
			t.Fatalf("fast path answered %d %s %q\n        the go-sdk  %d %s %q", fs, fct, fb, ss, sct, sb)
		}
	}
	// A client that can elicit is always served by the go-sdk.
	el := h.connect(t, "/mcp/servers/test", devToken, &mcp.ClientOptions{ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		return &mcp.ElicitResult{Action: "decline"}, nil
	}}, "2025-11-25")
	if _, _, b, viaFast := post(el, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`); viaFast || !bytes.Contains([]byte(b), []byte(`"echo":"hi"`)) {
		t.Fatalf("eliciting client: fast=%v %q", viaFast, b)
	}
}

// Fast answers are encoded in reused buffers: each answer carries its own
// message only, after a longer one and after one too large to keep.
func TestFastAnswerBuffersReused(t *testing.T) {
	h := newHarness(t)
	cs := h.connect(t, "/mcp/servers/test", devToken, nil, "2025-11-25")
	waitFast(t, h, cs)
	for i, text := range []string{strings.Repeat("long ", 400), "short", strings.Repeat("x", maxPooledAnswer), "s", ""} {
		args, _ := json.Marshal(map[string]string{"text": text})
		r := fastRequest(cs)
		r.Header.Set("Authorization", "Bearer "+devToken)
		r.Body = io.NopCloser(strings.NewReader(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":%s}}`, i, args)))
		r.ContentLength = -1
		w := httptest.NewRecorder()
		h.front.ServeHTTP(w, r)
		body := w.Body.String()
		if ct := w.Header().Get("Content-Type"); ct != "application/json" || !json.Valid([]byte(body)) {
			t.Fatalf("answer %d is not one JSON message: %s %.200q", i, ct, body)
		}
		var msg struct {
			ID     int                `json:"id"`
			Result mcp.CallToolResult `json:"result"`
		}
		if err := json.Unmarshal([]byte(body), &msg); err != nil {
			t.Fatalf("answer %d: %v: %.200q", i, err, body)
		}
		if got, _ := msg.Result.StructuredContent.(map[string]any)["echo"].(string); msg.ID != i || got != text {
			t.Fatalf("answer %d: id %d, echo of %d bytes, want %d", i, msg.ID, len(got), len(text))
		}
	}
}

// A fast call is authenticated once, by ServeHTTP: an unknown token is
// answered 401 before anything is called or receipted, and the identity
// ServeHTTP found is the call's (caller does not authenticate again).
func TestFastCallAuthenticatedOnce(t *testing.T) {
	h := newHarness(t)
	cs := h.connect(t, "/mcp/servers/test", devToken, nil, "2025-11-25")
	call(t, cs, "echo", map[string]any{"text": "warm"})
	before := len(h.receiptsFor("echo"))
	for _, auth := range []string{"Bearer tok-unknown", "", "Basic " + devToken} {
		r := fastRequest(cs)
		r.Body = io.NopCloser(strings.NewReader(`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}}`))
		if auth != "" {
			r.Header.Set("Authorization", auth)
		}
		w := httptest.NewRecorder()
		h.front.ServeHTTP(w, r)
		if w.Code != http.StatusUnauthorized {
			t.Fatalf("Authorization %q: HTTP %d, want 401", auth, w.Code)
		}
	}
	if got := len(h.receiptsFor("echo")); got != before {
		t.Fatalf("%d receipts after refused requests, want %d", got, before)
	}
	v := waitFast(t, h, cs)
	s, ss := v.fastSession(fastRequest(cs), h.front.opts.Now())
	req := &mcp.CallToolRequest{Session: ss, Params: &mcp.CallToolParamsRaw{Name: "echo"}, Extra: &mcp.RequestExtra{Header: http.Header{}}}
	if _, err := v.caller(req, s, nil); err == nil {
		t.Fatal("a request without a token was authenticated")
	}
	known := config.Identity{Name: "dev-client", PrincipalClass: "dev"}
	if c, err := v.caller(req, s, &known); err != nil || c.id.Name != known.Name || c.id.PrincipalClass != known.PrincipalClass {
		t.Fatalf("caller with the request's identity: %+v, %v", c.id, err)
	}
}

// fastCaller returns one tools/call of echo (with text) on an established
// 2025-11-25 session of the transparent view, answered by the front's fast
// path against the harness's loopback go-sdk upstream.
func fastCaller(tb testing.TB, text string) func() {
	h := newHarness(tb)
	cs := h.connect(tb, "/mcp/servers/test", devToken, nil, "2025-11-25")
	for range 20 {
		call(tb, cs, "echo", map[string]any{"text": "warm"})
	}
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"` + text + `"}}}`
	hdr := http.Header{"Content-Type": {"application/json"}, "Accept": {"application/json, text/event-stream"},
		"Mcp-Session-Id": {cs.ID()}, "Mcp-Protocol-Version": {"2025-11-25"}, "Authorization": {"Bearer " + devToken}}
	return func() {
		r := httptest.NewRequest(http.MethodPost, "/mcp/servers/test", strings.NewReader(body))
		r.Header = hdr
		w := httptest.NewRecorder()
		h.front.ServeHTTP(w, r)
		if a := w.Body.String(); !strings.Contains(a, `"result"`) || !strings.Contains(a, text) {
			tb.Fatalf("answer %s", a)
		}
	}
}

// BenchmarkFastCall is one tools/call answered by the front's fast path
// (fastCaller): allocations per call are the figure to watch (latency on
// a shared machine is noise).
func BenchmarkFastCall(b *testing.B) {
	call := fastCaller(b, "benchmark")
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		call()
	}
}

// With AnswerBeforeReceipt, the fast path sends a read-only call's answer
// before completing its receipt: the answer arrives while the receipt's
// hand-over is held up (the harness's receipt sink is locked), and the
// receipt, with its result digest, follows. A state-changing call's
// receipt is still complete before its answer.
func TestAnswerBeforeReceipt(t *testing.T) {
	h := newHarness(t)
	h.front.opts.AnswerBeforeReceipt = true
	p := testPolicy()
	p.Principals[0].Deny = nil // "write" is state-changing
	h.install(t, p)
	cs := h.connect(t, "/mcp/servers/test", devToken, nil, "2025-11-25")
	waitFast(t, h, cs)
	call(t, cs, "echo", map[string]any{"text": "warm"})
	// The warm-up's receipt is completed after its answer: wait for it, or
	// its handler would hold the connection the next call needs while the
	// sink is locked below.
	for deadline := time.Now().Add(5 * time.Second); len(h.receiptsFor("echo")) == 0 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	before := len(h.receiptsFor("echo"))
	if before != 1 {
		t.Fatalf("%d receipts of the warm-up call", before)
	}

	h.mu.Lock() // the receipt sink blocks
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "first"}})
	cancel()
	h.mu.Unlock()
	if err != nil || res.IsError {
		t.Fatalf("read-only call answered only after its receipt: %v %+v", err, res)
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(h.receiptsFor("echo")) == before && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	recs := h.receiptsFor("echo")
	if len(recs) != before+1 || recs[before].GetResultDigest() == "" || recs[before].GetArgumentsDigest() != receipt.ArgumentsDigest([]byte(`{"text":"first"}`)) ||
		recs[before].GetEndedAt() == nil {
		t.Fatalf("receipt after the answer: %d receipts, %+v", len(recs)-before, recs[len(recs)-1])
	}

	// A state-changing call: its answer waits for its receipt.
	h.mu.Lock()
	var returned atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		call(t, cs, "write", map[string]any{"text": "x"})
		returned.Store(true)
	}()
	time.Sleep(200 * time.Millisecond) // time to answer, were it not held
	early := returned.Load()
	h.mu.Unlock()
	<-done
	if early || len(h.receiptsFor("write")) != 1 {
		t.Fatalf("state-changing call answered before its receipt (%v), %d receipts", early, len(h.receiptsFor("write")))
	}
}

// waitFast waits until cs's session on the view of server "test" is served
// by the fast path, and returns that view. Right after Connect the go-sdk
// may not have handled the session's notifications/initialized yet (seen 4
// times in 300), and until it has the go-sdk serves the session's calls;
// a call made first narrows that window but does not close it.
func waitFast(t *testing.T, h *harness, cs *mcp.ClientSession) *view {
	t.Helper()
	v := h.front.view("test")
	waitFor(t, func() bool { s, _ := v.fastSession(fastRequest(cs), h.front.opts.Now()); return s != nil })
	return v
}

// fastRequest is a tools/call POST on cs's session as the fast path sees it.
func fastRequest(cs *mcp.ClientSession) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/mcp/servers/test", strings.NewReader(`{}`))
	r.Header = http.Header{"Content-Type": {"application/json"}, "Accept": {"application/json, text/event-stream"},
		"Mcp-Session-Id": {cs.ID()}, "Mcp-Protocol-Version": {"2025-11-25"}}
	return r
}

// parseFastCall decodes a call's parameters sharing the body's bytes, as
// precheck's envelope does: the name and the decoder's own are its
// allocations, a copy of the arguments would be a third.
func TestParseFastCallAllocations(t *testing.T) {
	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`)
	var env envelope
	if err := jsonwire.UnmarshalShared(body, &env); err != nil {
		t.Fatal(err)
	}
	c, ok := parseFastCall(&env)
	if !ok || c.params.Name != "echo" || string(c.params.Arguments) != `{"text":"hi"}` || string(c.id) != "1" {
		t.Fatalf("parseFastCall = %+v, %v", c, ok)
	}
	if n := testing.AllocsPerRun(100, func() { c, ok = parseFastCall(&env) }); n > 2 {
		t.Errorf("parseFastCall: %v allocations, want at most 2", n)
	}
}

// maxFastCallAllocs bounds the allocations of BenchmarkFastCall's call,
// the in-process upstream included (306 or 307 on average): the fast path
// keeps a call's parsed request, the request callTool takes and its Later
// work in one allocation, where they took four, and the upstream side's
// own cuts (agent/upstream's allocation tests) show here too.
const maxFastCallAllocs = 309

func TestFastCallAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts vary under the race detector")
	}
	n := testing.AllocsPerRun(200, fastCaller(t, "x"))
	if n > maxFastCallAllocs {
		t.Errorf("%v allocations per fast call, want at most %d", n, maxFastCallAllocs)
	}
}
