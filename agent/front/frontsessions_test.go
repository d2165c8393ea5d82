package front

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/mcpready/mcpready/agent/internal/mcptest"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/readiness"
)

// initSession POSTs an initialize without a session to url as token and
// returns the HTTP status, the session id the front gave (if any) and the
// body.
func initSession(t *testing.T, url, token string) (int, string, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(initBody))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Mcp-Session-Id"), string(b)
}

// Stateful front sessions are capped overall and per principal. Before,
// a client could initialize without end: each session kept about 10 KB of
// heap and two goroutines for the 30-minute idle timeout (2,000 sessions
// a second on a laptop), so one local client could exhaust the agent's
// memory. Past a cap an initialize is refused (HTTP 503, a JSON-RPC error
// naming the cap, counted); a closed session frees its slot, and a request
// that leaves no session holds none.
func TestFrontSessionsCapped(t *testing.T) {
	h := newHarness(t)
	f := h.front
	f.frontSessions = newLimiter("front sessions", errTooManyFrontSessions, 5, 3, 0, 0, f.metrics.frontSessionsRefused, f.metrics.frontSessionsOpen)
	url := h.url + "/mcp"
	var dev []string
	for i := range 3 {
		status, sid, body := initSession(t, url, devToken)
		if status != http.StatusOK || sid == "" {
			t.Fatalf("dev session %d: HTTP %d %q %s", i+1, status, sid, body)
		}
		dev = append(dev, sid)
	}
	status, sid, body := initSession(t, url, devToken)
	if status != http.StatusServiceUnavailable || sid != "" || !strings.Contains(body, "principal dev-client holds its limit of 3 front sessions") {
		t.Fatalf("dev session 4: HTTP %d %q %s", status, sid, body)
	}
	for i := range 2 {
		if status, sid, body := initSession(t, url, guestToken); status != http.StatusOK || sid == "" {
			t.Fatalf("guest session %d: HTTP %d %s", i+1, status, body)
		}
	}
	if status, _, body := initSession(t, url, guestToken); status != http.StatusServiceUnavailable || !strings.Contains(body, "this agent holds its limit of 5 front sessions") {
		t.Fatalf("guest session 3: HTTP %d %s", status, body)
	}
	if p, tot := testutil.ToFloat64(f.metrics.frontSessionsRefused.WithLabelValues("principal")), testutil.ToFloat64(f.metrics.frontSessionsRefused.WithLabelValues("total")); p != 1 || tot != 1 {
		t.Fatalf("refusals counted: principal %v, total %v", p, tot)
	}
	// A closed session frees its slot.
	if status, _ := sessionPost(t, http.MethodDelete, url, dev[0], devToken, ""); status != http.StatusNoContent {
		t.Fatalf("DELETE: HTTP %d", status)
	}
	waitFor(t, func() bool { return testutil.ToFloat64(f.metrics.frontSessionsOpen) == 4 })
	// Requests that leave no session (not an initialize; one the client
	// could not finish) hold no slot.
	for range 10 {
		if status, _ := sessionPost(t, http.MethodPost, url, "", devToken, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`); status == http.StatusServiceUnavailable {
			t.Fatalf("a sessionless request was refused at the cap with a slot free")
		}
	}
	if status, sid, body := initSession(t, url, devToken); status != http.StatusOK || sid == "" {
		t.Fatalf("dev session after a DELETE: HTTP %d %s", status, body)
	}
	if n := testutil.ToFloat64(f.metrics.frontSessionsOpen); n != 5 {
		t.Fatalf("front sessions open %v, want 5", n)
	}
}

// waitFor waits up to 5 s for cond.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// At its session cap a principal's least recently used idle session gives
// way to its new one (its client's next request gets 404, on which MCP
// clients initialize again), so short-lived clients that never close
// their sessions are not locked out for the idle timeout. A session with a
// request in progress (an open GET stream) is never closed, nor is another
// principal's.
func TestIdleFrontSessionGivesWay(t *testing.T) {
	h := newHarness(t)
	f := h.front
	f.frontSessions = newLimiter("front sessions", errTooManyFrontSessions, 10, 2, 0, 0, f.metrics.frontSessionsRefused, f.metrics.frontSessionsOpen)
	f.evictIdleAfter = 0
	url := h.url + "/mcp"
	open := func(token string) string {
		t.Helper()
		status, sid, body := initSession(t, url, token)
		if status != http.StatusOK || sid == "" {
			t.Fatalf("initialize: HTTP %d %s", status, body)
		}
		return sid
	}
	list := func(sid, token string) int {
		status, _ := sessionPost(t, http.MethodPost, url, sid, token, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
		return status
	}
	guest := open(guestToken)
	a, b := open(devToken), open(devToken)
	if list(b, devToken) != http.StatusOK { // b used after a: a is the least recently used
		t.Fatal("session b")
	}
	c := open(devToken)
	if st := list(a, devToken); st != http.StatusNotFound {
		t.Fatalf("the least recently used session after it gave way: HTTP %d, want 404", st)
	}
	if list(b, devToken) != http.StatusOK || list(c, devToken) != http.StatusOK {
		t.Fatal("a session used more recently was closed")
	}
	if n := testutil.ToFloat64(f.metrics.frontSessionsEvicted); n != 1 {
		t.Fatalf("evictions counted %v, want 1", n)
	}
	// b and c each hold an open GET stream: neither gives way.
	for _, sid := range []string{b, c} {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Mcp-Session-Id", sid)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		req.Header.Set("Authorization", "Bearer "+devToken)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() {
			if resp, err := http.DefaultClient.Do(req.WithContext(ctx)); err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}()
	}
	waitFor(t, func() bool {
		n := 0
		for _, s := range f.liveSessions() {
			if s.busy.Load() > 0 {
				n++
			}
		}
		return n == 2
	})
	if status, _, body := initSession(t, url, devToken); status != http.StatusServiceUnavailable {
		t.Fatalf("initialize with every session busy: HTTP %d %s", status, body)
	}
	if list(guest, guestToken) != http.StatusOK {
		t.Fatal("another principal's idle session was closed")
	}
}

// Tool calls in progress are capped per principal and overall. Before, a
// client could start calls without bound against a slow upstream: each
// held a goroutine and, on the fast path, a connection of its own to the
// upstream, until the agent ran out of file descriptors. Past a cap a call
// is refused before any upstream (agent_capacity, with a receipt,
// counted); another principal's calls are not affected, and a finished
// call frees its slot.
func TestCallsInProgressCapped(t *testing.T) {
	h := newHarness(t)
	f := h.front
	f.calls = newLimiter("tool calls in progress", errTooManyCalls, 3, 2, 0, 0, f.metrics.callsRefused, f.metrics.callsInProgress)
	dev := h.connect(t, "/mcp/servers/test", devToken, nil, "2025-11-25")
	call(t, dev, "echo", map[string]any{"text": "warm"})
	h.up.SetFault(mcptest.FaultHang, "tools/call")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	hang := func(cs *mcp.ClientSession) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "slow"}})
		}()
	}
	before := h.up.Hits()
	hang(dev)
	hang(dev)
	// Both calls hold their slots and both have reached the upstream (a
	// call takes its slot before it is sent: counting hits before the
	// second arrives would blame the refused call for it).
	waitFor(t, func() bool {
		return testutil.ToFloat64(f.metrics.callsInProgress) == 2 && h.up.Hits() >= before+2
	})
	hits := h.up.Hits()
	te := wantToolError(t, call(t, dev, "echo", map[string]any{"text": "x"}), "REFUSED", readiness.CodeAgentCapacity)
	if !strings.Contains(te.Reason, "principal dev-client holds its limit of 2 tool calls in progress") || !te.Retryable || h.up.Hits() != hits {
		t.Fatalf("third call of dev: %+v, upstream hits %d -> %d", te, hits, h.up.Hits())
	}
	// Another principal still has room, up to the overall cap.
	p := testPolicy()
	p.Principals = append(p.Principals, &mcpreadyv1.PrincipalRule{PrincipalClass: "guest", Allow: []string{"test/echo"}})
	h.install(t, p)
	guest := h.connect(t, "/mcp/servers/test", guestToken, nil, "2025-11-25")
	hang(guest)
	waitFor(t, func() bool { return testutil.ToFloat64(f.metrics.callsInProgress) == 3 })
	te = wantToolError(t, call(t, guest, "echo", map[string]any{"text": "x"}), "REFUSED", readiness.CodeAgentCapacity)
	if !strings.Contains(te.Reason, "this agent holds its limit of 3 tool calls in progress") {
		t.Fatalf("a call past the overall cap: %+v", te)
	}
	if p, tot := testutil.ToFloat64(f.metrics.callsRefused.WithLabelValues("principal")), testutil.ToFloat64(f.metrics.callsRefused.WithLabelValues("total")); p != 1 || tot != 1 {
		t.Fatalf("refusals counted: principal %v, total %v", p, tot)
	}
	cancel()
	wg.Wait()
	waitFor(t, func() bool { return testutil.ToFloat64(f.metrics.callsInProgress) == 0 })
	h.up.SetFault(mcptest.FaultNone, "")
	if res := call(t, dev, "echo", map[string]any{"text": "again"}); res.IsError {
		t.Fatalf("a call after the others ended: %+v", res)
	}
}
