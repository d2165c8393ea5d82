package front

import (
	"context"
	"slices"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpready/mcpready/agent/config"
	"github.com/mcpready/mcpready/agent/internal/mcptest"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/readiness"
)

// The aggregate view names an exact tool <server>__<tool>: server "p" with
// tool "q__echo" and server "p__q" with tool "echo" are both p__q__echo.
// Before, the list showed that name twice and a call ran on whichever pair
// a map's order found first. Now such a name is not listed and a call to
// it is refused; each tool stays reachable on its own server's view.
func TestAmbiguousAggregateName(t *testing.T) {
	h := newHarness(t)
	add := func(server, tool string) {
		up := mcptest.New(t, mcptest.Options{Name: server, NoDefaultTools: true})
		mcp.AddTool(up.Server, &mcp.Tool{Name: tool, Description: "Says who it is.", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
			func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: server}}}, nil, nil
			})
		h.enrollQualified(t, config.Upstream{Name: server, URL: up.URL})
	}
	add("p", "q__echo")
	add("p__q", "echo")
	p := testPolicy()
	p.Principals[0].Allow = append(p.Principals[0].Allow, "p/*", "p__q/*")
	p.Principals[0].Methods = append(p.Principals[0].Methods, &mcpreadyv1.MethodRule{Server: "p", Allow: []string{"*"}},
		&mcpreadyv1.MethodRule{Server: "p__q", Allow: []string{"*"}})
	h.install(t, p)
	cs := h.connect(t, "/mcp", devToken, nil, "2025-11-25")
	if names := toolNames(t, cs); slices.Contains(names, "p__q__echo") || !slices.Contains(names, "test__echo") {
		t.Errorf("aggregate list %q", names)
	}
	for range 5 {
		wantToolError(t, call(t, cs, "p__q__echo", map[string]any{}), "REFUSED", readiness.CodeAmbiguousTool)
	}
	for server, tool := range map[string]string{"p": "q__echo", "p__q": "echo"} {
		own := h.connect(t, "/mcp/servers/"+server, devToken, nil, "2025-11-25")
		if res := call(t, own, tool, map[string]any{}); res.IsError || text(res) != server {
			t.Errorf("%s/%s on its own view: %+v", server, tool, res)
		}
	}
}
