package upstream

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpready/mcpready/agent/config"
	"github.com/mcpready/mcpready/agent/internal/mcptest"
)

// addConfirm adds "confirm": it asks for input (SEP-2322) until the retry
// carries an accepted answer and its own request state.
func addConfirm(s *mcp.Server) {
	mcp.AddTool(s, &mcp.Tool{Name: "confirm"}, func(_ context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		if r, ok := req.Params.InputResponses["q"].(*mcp.ElicitResult); ok && r.Action == "accept" && req.Params.RequestState == "st-1" {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "confirmed"}}}, nil, nil
		}
		return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"q": &mcp.ElicitParams{Message: "sure?",
			RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"ok": map[string]any{"type": "boolean"}}}}},
			RequestState: "st-1"}, nil, nil
	})
}

// TestInputRequiredReturnedToCaller: on a 2026-07-28 (stateless) upstream,
// neither the shared session nor a
// dedicated one (even one advertising elicitation) fulfils an input request
// itself; the caller gets it and repeats the call.
func TestInputRequiredReturnedToCaller(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "t", Version: "1"}, nil)
	addConfirm(srv)
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
		&mcp.StreamableHTTPOptions{Stateless: true}))
	t.Cleanup(hs.Close)
	p := NewPool(Options{Resolve: func(Target) (config.Upstream, bool) { return config.Upstream{Name: "t", URL: hs.URL}, true }})
	t.Cleanup(p.Close)
	ctx := context.Background()
	shared, err := p.Shared(ctx, Target{Server: "t"})
	if err != nil {
		t.Fatal(err)
	}
	dedicated, err := p.Open(ctx, Target{Server: "t"}, &Relay{Capabilities: &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{}}})
	if err != nil {
		t.Fatal(err)
	}
	defer dedicated.Close()
	for name, s := range map[string]*Session{"shared": shared, "dedicated": dedicated} {
		t.Run(name, func(t *testing.T) {
			if s.ProtocolVersion() < "2026-07-28" {
				t.Fatalf("negotiated %s with a stateless upstream", s.ProtocolVersion())
			}
			res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "confirm", Arguments: map[string]any{}})
			if err != nil {
				t.Fatal(err)
			}
			if !res.NeedsInput() || res.RequestState != "st-1" || res.InputRequests["q"] == nil {
				t.Fatalf("want the input request returned, got %+v", res)
			}
			res, err = s.CallTool(ctx, &mcp.CallToolParams{Name: "confirm", Arguments: map[string]any{},
				InputResponses: mcp.InputResponseMap{"q": &mcp.ElicitResult{Action: "accept", Content: map[string]any{"ok": true}}},
				RequestState:   res.RequestState})
			if err != nil || res.NeedsInput() || res.Content[0].(*mcp.TextContent).Text != "confirmed" {
				t.Fatalf("retry: %v %+v", err, res)
			}
		})
	}
}

// TestLease: a leased session's server-to-client requests go to the lease
// holder's function, and a released session is reused by the next lease.
func TestLease(t *testing.T) {
	up := mcptest.New(t, mcptest.Options{NoDefaultTools: true})
	mcp.AddTool(up.Server, &mcp.Tool{Name: "ask"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "word?", RequestedSchema: map[string]any{"type": "object"}})
		if err != nil {
			return nil, nil, err
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: res.Action}}}, nil, nil
	})
	p := newPool(t, up)
	ctx := context.Background()
	caps := &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{}}
	var first *Session
	for _, action := range []string{"accept", "decline"} {
		l, err := p.Lease(ctx, Target{Server: "t"}, caps, func(_ context.Context, method string, params mcp.Params) (mcp.Result, error) {
			if method != "elicitation/create" || params.(*mcp.ElicitParams).Message != "word?" {
				t.Errorf("relayed %s %+v", method, params)
			}
			return &mcp.ElicitResult{Action: action}, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		res, err := l.CallTool(ctx, &mcp.CallToolParams{Name: "ask", Arguments: map[string]any{}})
		if err != nil || res.Content[0].(*mcp.TextContent).Text != action {
			t.Fatalf("%s: %v %+v", action, err, res)
		}
		if first == nil {
			first = l.Session
		} else if l.Session != first {
			t.Fatal("the released session was not reused")
		}
		l.Release()
		l.Release() // idempotent
	}
}
