package front

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/protobuf/proto"

	"github.com/mcpready/mcpready/agent/internal/mcptest"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
)

// twin starts a second upstream serving the same tool definitions as the
// harness's under the same server name, whose echo answers "B:<text>" and
// counts its tools/call requests.
func twin(t *testing.T) (*mcptest.Upstream, *atomic.Int64) {
	t.Helper()
	up := mcptest.New(t, mcptest.Options{NoDefaultTools: true})
	calls := &atomic.Int64{}
	mcp.AddTool(up.Server, &mcp.Tool{Name: "echo", Description: "Echoes the given text back.", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(_ context.Context, _ *mcp.CallToolRequest, in mcptest.EchoInput) (*mcp.CallToolResult, mcptest.EchoOutput, error) {
			calls.Add(1)
			return nil, mcptest.EchoOutput{Echo: "B:" + in.Text}, nil
		})
	return up, calls
}

// addTwinEntry registers entry name: a copy of the harness's echo entry
// whose endpoint is up's.
func (h *harness) addTwinEntry(t *testing.T, name string, up *mcptest.Upstream) *mcpreadyv1.RegistryEntry {
	t.Helper()
	for n, e := range h.entries {
		if e.GetIdentity().GetToolName() == "echo" && n != name {
			b := proto.CloneOf(e)
			b.Identity.Endpoint = up.URL
			h.entries[name] = b
			return b
		}
	}
	t.Fatal("no echo entry")
	return nil
}

func echoEntry(t *testing.T, h *harness) string {
	t.Helper()
	for n, e := range h.entries {
		if e.GetIdentity().GetToolName() == "echo" {
			return n
		}
	}
	t.Fatal("no echo entry")
	return ""
}

// Two RegistryEntries name the same server with different endpoints; the
// policy admits only B. The call must reach B's endpoint, and its receipt
// must name it: the endpoint is the admitted route's, never one picked by
// server name (the agent config names A's).
func TestCallDialsAdmittedRouteEndpoint(t *testing.T) {
	h := newHarness(t)
	a := echoEntry(t, h)
	upB, callsB := twin(t)
	h.addTwinEntry(t, "zz-echo-b", upB)
	p := testPolicy()
	p.Inventory = []string{"zz-echo-b"}
	h.install(t, p)
	for _, path := range []string{"/mcp", "/mcp/servers/test"} {
		t.Run(path, func(t *testing.T) {
			cs := h.connect(t, path, devToken, nil, "2025-11-25")
			name := "echo"
			if path == "/mcp" {
				name = "test__echo"
			}
			before := callsB.Load()
			res := call(t, cs, name, map[string]any{"text": "hi"})
			if res.IsError {
				h.mu.Lock()
				t.Logf("%v", h.recs[len(h.recs)-1].GetCandidates())
				h.mu.Unlock()
				t.Fatalf("call: %+v", res.Content[0])
			}
			if got := callsB.Load() - before; got != 1 {
				t.Fatalf("B's endpoint got %d calls, want 1 (A is %s)", got, a)
			}
			if !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "B:hi") {
				t.Fatalf("answer %q is not B's", res.Content[0].(*mcp.TextContent).Text)
			}
			h.mu.Lock()
			rec := h.recs[len(h.recs)-1]
			h.mu.Unlock()
			if sel := rec.GetSelected(); sel.GetEntry() != "zz-echo-b" || sel.GetEndpoint() != upB.URL {
				t.Fatalf("receipt selected %v, want zz-echo-b at %s", sel, upB.URL)
			}
		})
	}
}

// A class whose first route (A) fails falls back to a route (B) that
// requires approval: the human is asked before B's first attempt, and a
// refusal stops the call before B is called.
func TestFallbackRouteAsksApproval(t *testing.T) {
	for _, approve := range []bool{false, true} {
		t.Run(map[bool]string{false: "declined", true: "approved"}[approve], func(t *testing.T) {
			h := newHarness(t)
			upB, callsB := twin(t)
			b := h.addTwinEntry(t, "zz-echo-b", upB)
			b.ApprovalRequired = true
			p := testPolicy()
			p.EquivalenceClasses[0].FallbackAllowed = true
			h.install(t, p)
			h.up.SetFault(mcptest.FaultServerError, "tools/call")
			var asked atomic.Int64
			cs := h.connect(t, "/mcp", devToken, &mcp.ClientOptions{ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
				asked.Add(1)
				return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"approve": approve}}, nil
			}}, "2025-11-25")
			res := call(t, cs, "echo_anything", map[string]any{"text": "hi"})
			if asked.Load() != 1 {
				t.Fatalf("asked %d times, want once (before B's first attempt)", asked.Load())
			}
			if !approve {
				wantToolError(t, res, "APPROVAL_DENIED", "")
				if callsB.Load() != 0 {
					t.Fatal("B was called without approval")
				}
				return
			}
			if res.IsError || callsB.Load() != 1 {
				t.Fatalf("approved fallback: %+v, B calls %d", res, callsB.Load())
			}
		})
	}
}
