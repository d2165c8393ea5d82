package upstream

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpready/mcpready/agent/config"
)

// TestResumeLostResponseStream: a go-sdk server (with an event store)
// closes a call's response stream before the result; the agent reconnects
// with GET and Last-Event-ID after the stream's retry time and gets the
// result, and the call is sent once. Failed before: the call ended with
// "connection lost after the request was sent".
func TestResumeLostResponseStream(t *testing.T) {
	const retry = 150 * time.Millisecond
	srv := mcp.NewServer(&mcp.Implementation{Name: "up"}, nil)
	closed := make(chan time.Time, 1)
	mcp.AddTool(srv, &mcp.Tool{Name: "slow"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, struct{}, error) {
		req.Extra.CloseSSEStream(mcp.CloseSSEStreamArgs{RetryAfter: retry})
		closed <- time.Now()
		time.Sleep(20 * time.Millisecond)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, struct{}{}, nil
	})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
		&mcp.StreamableHTTPOptions{EventStore: mcp.NewMemoryEventStore(nil)})
	var mu sync.Mutex
	var calls int
	var resumedAt time.Time
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			b, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(strings.NewReader(string(b)))
			if strings.Contains(string(b), `"tools/call"`) {
				mu.Lock()
				calls++
				mu.Unlock()
			}
		}
		if r.Method == http.MethodGet && r.Header.Get("Last-Event-ID") != "" {
			mu.Lock()
			resumedAt = time.Now()
			mu.Unlock()
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	p := NewPool(Options{Resolve: func(Target) (config.Upstream, bool) { return config.Upstream{Name: "u", URL: hs.URL}, true }})
	t.Cleanup(p.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := p.Shared(ctx, Target{Server: "u"})
	if err != nil {
		t.Fatal(err)
	}
	if !s.fastOK() {
		t.Skip("not on the fast path")
	}
	res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "slow", Arguments: map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	if tc, ok := res.Content[0].(*mcp.TextContent); !ok || tc.Text != "done" {
		t.Fatalf("result = %+v", res.Content)
	}
	mu.Lock()
	defer mu.Unlock()
	if calls != 1 {
		t.Fatalf("tools/call sent %d times, want 1", calls)
	}
	if at := <-closed; resumedAt.IsZero() || resumedAt.Sub(at) < retry-10*time.Millisecond {
		t.Fatalf("resumed %v after the close, want after the retry time %v", resumedAt.Sub(at), retry)
	}
}
