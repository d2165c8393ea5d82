package upstream

import (
	"bufio"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpready/mcpready/agent/config"
	"github.com/mcpready/mcpready/agent/internal/mcptest"
)

func TestReadEvent(t *testing.T) {
	tests := []struct {
		name, in string
		want     []string
	}{
		{"one", "event: message\ndata: {\"a\":1}\n\n", []string{`{"a":1}`}},
		{"crlf and id", "id: 7\r\ndata: x\r\n\r\n", []string{"x"}},
		{"multi-line data", "data: a\ndata: b\n\n", []string{"a\nb"}},
		{"comment and leading blanks", "\n\n: ping\ndata: y\n\n", []string{"y"}},
		{"two events", "data: 1\n\ndata: 2\n\n", []string{"1", "2"}},
		{"last event without blank line", "data: z", []string{"z"}},
		{"no space after colon", "data:w\n\n", []string{"w"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := bufio.NewReader(strings.NewReader(tt.in))
			var got []string
			for {
				d, err := readEvent(r)
				if d != nil {
					got = append(got, string(d))
				}
				if err != nil {
					break
				}
			}
			if strings.Join(got, "|") != strings.Join(tt.want, "|") {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
		})
	}
	// Lines longer than the reader's buffer are gathered.
	long := strings.Repeat("x", 100)
	r := bufio.NewReaderSize(strings.NewReader("data: "+long+"\ndata: "+long+"\n\n"), 16)
	if d, err := readEvent(r); err != nil || string(d) != long+"\n"+long {
		t.Fatalf("long lines: %q %v", d, err)
	}
	// An event over maxEventSize is refused.
	r = bufio.NewReaderSize(strings.NewReader("data: "+strings.Repeat("x", maxEventSize+1)+"\n\n"), 16)
	if _, err := readEvent(r); !errors.Is(err, errMalformed) {
		t.Fatalf("overlong event: %v", err)
	}
}

func FuzzReadEvent(f *testing.F) {
	f.Add("event: message\ndata: {}\n\n")
	f.Add("data: a\r\ndata: b\r\n\r\n: c\n")
	f.Fuzz(func(t *testing.T, in string) {
		r := bufio.NewReaderSize(strings.NewReader(in), 16)
		for range len(in) + 2 {
			if _, err := readEvent(r); err != nil {
				return
			}
		}
		t.Fatal("readEvent did not reach the end of its input")
	})
}

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
			p := NewPool(Options{Resolve: func(string) (config.Upstream, bool) { return config.Upstream{Name: "u", URL: hs.URL}, true }})
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
			s, err := p.Open(ctx, "u", relay)
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
	p := NewPool(Options{Resolve: func(string) (config.Upstream, bool) { return config.Upstream{Name: "test", URL: up.URL}, true }})
	defer p.Close()
	s, err := p.Shared(context.Background(), "test")
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
