package upstream

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpready/mcpready/agent/config"
	"github.com/mcpready/mcpready/agent/internal/mcptest"
)

// TestFastPathRelays runs tools/call over the fast path against go-sdk
// servers answering with SSE and with application/json, with a log
// notification and an elicitation on the response stream.
func TestFastPathRelays(t *testing.T) {
	for _, jsonResponse := range []bool{false, true} {
		t.Run(map[bool]string{false: "sse", true: "json"}[jsonResponse], func(t *testing.T) {
			srv := mcp.NewServer(&mcp.Implementation{Name: "up"}, nil)
			mcp.AddTool(srv, &mcp.Tool{Name: "ask"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, struct{ Word string }, error) {
				_ = req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Data: "asking"})
				res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "word?", RequestedSchema: map[string]any{"type": "object",
					"properties": map[string]any{"word": map[string]any{"type": "string"}}}})
				if err != nil {
					return nil, struct{ Word string }{}, err
				}
				w, _ := res.Content["word"].(string)
				return nil, struct{ Word string }{w}, nil
			})
			hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
				&mcp.StreamableHTTPOptions{JSONResponse: jsonResponse}))
			t.Cleanup(hs.Close)
			p := NewPool(Options{Resolve: func(Target) (config.Upstream, bool) { return config.Upstream{Name: "u", URL: hs.URL}, true }})
			t.Cleanup(p.Close)
			var mu sync.Mutex
			var notes []string
			relay := &Relay{
				Capabilities: &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{}},
				Request: func(_ context.Context, method string, params mcp.Params) (mcp.Result, error) {
					if _, ok := params.(*mcp.ElicitParams); !ok || method != "elicitation/create" {
						t.Errorf("relayed %s %T", method, params)
					}
					return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"word": "banana"}}, nil
				},
				Notify: func(_ context.Context, method string, params mcp.Params) {
					mu.Lock()
					defer mu.Unlock()
					if lm, ok := params.(*mcp.LoggingMessageParams); ok {
						notes = append(notes, method+" "+lm.Data.(string))
					}
				},
			}
			ctx := context.Background()
			s, err := p.Open(ctx, Target{Server: "u"}, relay)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if err := s.Client().SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "debug"}); err != nil {
				t.Fatal(err)
			}
			params := &mcp.CallToolParams{Name: "ask", Arguments: map[string]any{}}
			if !s.fastOK() {
				t.Fatal("fast path not taken")
			}
			res, err := s.CallTool(ctx, params)
			if err != nil || res.IsError {
				t.Fatalf("call: %v %+v", err, res)
			}
			if w := res.StructuredContent.(map[string]any)["Word"]; w != "banana" {
				t.Fatalf("structured content %v", res.StructuredContent)
			}
			mu.Lock()
			defer mu.Unlock()
			if !jsonResponse && (len(notes) != 1 || notes[0] != "notifications/message asking") {
				t.Fatalf("notifications relayed: %q", notes)
			}
		})
	}
}

// A result far larger than the SSE reader's buffer crosses the fast path whole.
func TestFastPathLargeResult(t *testing.T) {
	up := mcptest.New(t, mcptest.Options{})
	p := NewPool(Options{Resolve: func(Target) (config.Upstream, bool) { return config.Upstream{Name: "test", URL: up.URL}, true }})
	defer p.Close()
	s, err := p.Shared(context.Background(), Target{Server: "test"})
	if err != nil {
		t.Fatal(err)
	}
	params := &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": strings.Repeat("large ", 20000)}}
	if !s.fastOK() {
		t.Fatal("call does not take the fast path")
	}
	res, err := s.CallTool(context.Background(), params)
	if err != nil || res.IsError {
		t.Fatalf("%v %+v", err, res)
	}
	if got := res.Content[0].(*mcp.TextContent).Text; !strings.Contains(got, strings.Repeat("large ", 20000)) {
		t.Fatalf("result of %d bytes does not carry the 120000-byte text", len(got))
	}
}

// The answer does not wait for the upstream to end its response stream
// (which it does once its handler returns): a fast call returns as soon as
// its response event is read, and the connection still goes back to the
// pool once the stream ends, for the next call. Before, the call waited
// for the end of the stream (up to drainWait, then closed the connection).
func TestFastCallDoesNotWaitForTheEndOfTheStream(t *testing.T) {
	up := mcptest.New(t, mcptest.Options{})
	hold := make(chan struct{})
	var conns atomic.Int32
	// lastCall is the connection that served the latest tools/call, and
	// lastClosed is set when that very connection closes: other
	// connections (the session's own) may open and close meanwhile.
	var lastCall atomic.Pointer[net.Conn]
	var lastClosed atomic.Bool
	hs := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if bytes.Contains(body, []byte(`"tools/call"`)) {
			c := r.Context().Value(connKeyForTest{}).(net.Conn)
			lastCall.Store(&c)
			lastClosed.Store(false)
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		proxy := httputil.NewSingleHostReverseProxy(mustURL(t, up.URL))
		proxy.FlushInterval = -1
		proxy.ServeHTTP(w, r)
		if bytes.Contains(body, []byte(`"tools/call"`)) {
			select { // the response event is out; the stream stays open
			case <-hold:
			case <-r.Context().Done(): // the agent closed the connection
			}
		}
	}))
	hs.Config.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		return context.WithValue(ctx, connKeyForTest{}, c)
	}
	hs.Config.ConnState = func(c net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew:
			conns.Add(1)
		case http.StateClosed:
			if p := lastCall.Load(); p != nil && *p == c {
				lastClosed.Store(true)
			}
		}
	}
	hs.Start()
	t.Cleanup(hs.Close)
	t.Cleanup(func() { close(hold) }) // before hs.Close: no handler still holds its stream
	dt := newDirectTransport()
	p := NewPool(Options{Transport: dt, Resolve: func(Target) (config.Upstream, bool) { return config.Upstream{Name: "test", URL: hs.URL + "/mcp"}, true }})
	t.Cleanup(p.Close)
	s, err := p.Shared(context.Background(), Target{Server: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if !s.fastOK() {
		t.Fatal("call does not take the fast path")
	}
	idle := func() int {
		dt.mu.Lock()
		defer dt.mu.Unlock()
		n := 0
		for _, l := range dt.idle {
			n += len(l)
		}
		return n
	}
	for i := range 3 {
		before := conns.Load()
		idleBefore := idle()
		res, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi"}})
		if err != nil || res.IsError {
			t.Fatalf("call %d: %v %+v", i, err, res)
		}
		select {
		case hold <- struct{}{}: // the upstream was still holding the stream open: release it
		case <-time.After(5 * time.Second):
			t.Fatalf("call %d: the upstream's handler never reached the end of its stream", i)
		}
		deadline := time.Now().Add(5 * time.Second)
		for idle() < idleBefore && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		if idle() < idleBefore {
			t.Fatalf("call %d: the connection did not go back to the pool once the stream ended", i)
		}
		if i > 0 && conns.Load() != before {
			t.Fatalf("call %d dialled a new connection (%d → %d)", i, before, conns.Load())
		}
	}

	// An upstream that never ends its stream (slow loris): the answer still
	// comes at once, and the background read gives up after drainWait and
	// closes the connection instead of pooling it or waiting for good.
	res, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi"}})
	if err != nil || res.IsError {
		t.Fatalf("call on a stream left open: %v %+v", err, res)
	}
	// The upstream never closes an idle connection, so the one that served
	// the call closing within the wait means the agent closed it rather
	// than pooled it. (Counting the pool's idle connections instead failed
	// under -race: another connection of the session could be pooled
	// meanwhile.)
	deadline := time.Now().Add(5 * time.Second)
	for !lastClosed.Load() && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if !lastClosed.Load() {
		t.Fatal("stream left open: the connection that served the call was not closed")
	}
}

// connKeyForTest keys the server connection in a request's context.
type connKeyForTest struct{}

func mustURL(t *testing.T, s string) *url.URL {
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}
