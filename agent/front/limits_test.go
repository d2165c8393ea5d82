package front

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/mcpready/mcpready/readiness"
)

// A session belongs to the principal that opened it: another principal
// presenting its id is refused (HTTP 403, counted) and cannot close it.
// Failed before: the other principal's DELETE closed the session.
func TestForeignSessionRefused(t *testing.T) {
	h := newHarness(t)
	for _, path := range []string{"/mcp/servers/test", "/mcp"} {
		dev := h.connect(t, path, devToken, nil, "2025-11-25")
		for _, method := range []string{http.MethodDelete, http.MethodPost, http.MethodGet} {
			status, b := sessionPost(t, method, h.url+path, dev.ID(), guestToken, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
			if status != http.StatusForbidden || !strings.Contains(string(b), "another principal") {
				t.Fatalf("%s %s with another principal's session: HTTP %d %s", path, method, status, b)
			}
		}
		if names := toolNames(t, dev); len(names) == 0 {
			t.Fatalf("%s: the owner's session no longer works", path)
		}
	}
	if n := testutil.ToFloat64(h.front.metrics.sessionsForeign); n != 6 {
		t.Fatalf("foreign-session refusals counted %v, want 6", n)
	}
}

// The front's HTTP server cuts off slow-loris clients: headers trickled
// past ReadHeaderTimeout, a body trickled past BodyTimeout (HTTP 408), and
// a keep-alive connection idle past IdleTimeout.
func TestSlowClientsCutOff(t *testing.T) {
	h := newHarness(t)
	f := New(Options{Config: h.front.opts.Config, ReadHeaderTimeout: 200 * time.Millisecond, IdleTimeout: 300 * time.Millisecond,
		BodyTimeout: 300 * time.Millisecond})
	t.Cleanup(f.Close)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := f.HTTPServer(f)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(func() { srv.Close() })
	closedWithin := func(c net.Conn, d time.Duration) bool {
		_ = c.SetReadDeadline(time.Now().Add(d))
		_, err := io.Copy(io.Discard, c)
		return err == nil // EOF: the server closed it; a timeout is our deadline
	}
	dial := func() net.Conn {
		c, err := net.Dial("tcp", lis.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}

	c := dial()
	_, _ = io.WriteString(c, "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")
	if !closedWithin(c, 3*time.Second) {
		t.Fatal("a client trickling headers kept its connection")
	}

	c = dial()
	_, _ = io.WriteString(c, "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer "+devToken+
		"\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"jsonrpc\":")
	_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil || resp.StatusCode != http.StatusRequestTimeout {
		t.Fatalf("a client trickling its body: %v %v, want HTTP 408", err, resp)
	}
	if n := testutil.ToFloat64(f.metrics.slowBodies); n != 1 {
		t.Fatalf("slow bodies counted %v, want 1", n)
	}

	c = dial()
	_, _ = io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
	br := bufio.NewReader(c)
	_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
	if resp, err := http.ReadResponse(br, nil); err != nil {
		t.Fatal(err)
	} else {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	start := time.Now()
	_, err = br.ReadByte()
	if err == nil || time.Since(start) > 2*time.Second {
		t.Fatalf("an idle keep-alive connection stayed open (%v after %s)", err, time.Since(start))
	}
}

// A principal may hold only so many upstream calls open across input
// rounds, and so many rounds waiting for its answers; past either cap the
// call is refused with a clear, counted error (failed before: no cap per
// principal).
func TestHeldAndPendingCapsPerPrincipal(t *testing.T) {
	h := newMRTRHarness(t)
	f := h.front
	f.pending.held = newLimiter("calls held open for input", errTooManyHeld, -1, 1, 0, 0, f.metrics.heldRefused, nil)
	f.pending.rounds = newLimiter("calls waiting for input", errTooManyRounds, -1, 2, 0, 0, f.metrics.roundsRefused, nil)
	var asked []string
	opts := answering(true, &asked)
	opts.MultiRoundTrip = &mcp.MultiRoundTripOptions{Disabled: true}
	cs := h.connect(t, "/mcp/servers/old", devToken, opts, "2026-07-28")
	if first := call(t, cs, "ask", map[string]any{}); !first.NeedsInput() {
		t.Fatalf("first held call: %+v", first)
	}
	second := call(t, cs, "ask", map[string]any{})
	if te := wantToolError(t, second, "REFUSED", readiness.CodeAgentCapacity); !te.Retryable || !strings.Contains(te.Reason, "held open for input") {
		t.Fatalf("second held call: %+v", te)
	}
	if n := testutil.ToFloat64(f.metrics.heldRefused.WithLabelValues("principal")); n != 1 {
		t.Fatalf("held-call refusals counted %v, want 1", n)
	}
	st := h.connect(t, "/mcp/servers/st", devToken, opts, "2026-07-28")
	if r := call(t, st, "confirm", map[string]any{"text": "a"}); !r.NeedsInput() {
		t.Fatalf("pending round: %+v", r)
	}
	te := wantToolError(t, call(t, st, "confirm", map[string]any{"text": "b"}), "REFUSED", readiness.CodeInputUnavailable)
	if !strings.Contains(te.Reason, "waiting for input") {
		t.Fatalf("third pending round: %+v", te)
	}
	if n := testutil.ToFloat64(f.metrics.roundsRefused.WithLabelValues("principal")); n != 1 {
		t.Fatalf("pending-round refusals counted %v, want 1", n)
	}
	// Shutdown ends the held call and the pending rounds, and refuses new ones.
	f.Close()
	for deadline := time.Now().Add(5 * time.Second); f.pending.held.openCount() != 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if n, r := f.pending.held.openCount(), f.pending.rounds.openCount(); n != 0 || r != 0 {
		t.Fatalf("after Close: %d held calls, %d pending rounds", n, r)
	}
}

// A front session idle past SessionIdleTimeout is closed, and with it its
// dedicated upstream session (its cap slot is given back).
func TestIdleSessionExpires(t *testing.T) {
	h := newHarness(t)
	h.front.opts.SessionIdleTimeout = 300 * time.Millisecond // before the view exists
	cs := h.connect(t, "/mcp/servers/test", devToken, nil, "2025-11-25")
	call(t, cs, "echo", map[string]any{"text": "x"})
	if n := h.front.caps.openCount(); n != 1 {
		t.Fatalf("%d dedicated sessions open, want 1", n)
	}
	for deadline := time.Now().Add(5 * time.Second); h.front.caps.openCount() != 0 && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	if n := h.front.caps.openCount(); n != 0 {
		t.Fatalf("%d dedicated sessions still open after the idle timeout", n)
	}
	if _, err := cs.ListTools(context.Background(), nil); err == nil {
		t.Fatal("the expired session still answers")
	}
}
