package front

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpready/mcpready/readiness"
)

// Each initialize of a transparent view opens a dedicated upstream session;
// past the per-principal cap the next is refused, and closing a client
// session frees its slot.
func TestDedicatedSessionCap(t *testing.T) {
	h, _ := pagedHarness(t, Options{MaxUpstreamSessionsPerPrincipal: 2, MaxUpstreamSessions: 3})
	open := func() (*mcp.ClientSession, error) {
		c := mcp.NewClient(&mcp.Implementation{Name: "ai-agent", Version: "1"}, nil)
		cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: h.url + "/mcp/servers/pg",
			HTTPClient: &http.Client{Transport: bearer{devToken}}, MaxRetries: -1}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		if err == nil {
			t.Cleanup(func() { cs.Close() })
		}
		return cs, err
	}
	a, err := open()
	if err != nil {
		t.Fatal(err)
	}
	_, err = open()
	if err != nil {
		t.Fatal(err)
	}
	if c, err := open(); err == nil {
		c.Close()
		t.Fatal("third dedicated session admitted past the per-principal cap of 2")
	} else if !strings.Contains(err.Error(), "upstream sessions") {
		t.Fatalf("refusal does not say why: %v", err)
	}
	a.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, err := open()
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("closing a session did not free its slot: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A stateless call that asks for progress runs on an upstream session of
// its own, counted against the same caps: with the principal's one slot
// held by a session client, it is refused before anything is sent, and
// its structured tool error names agent_capacity.
func TestStatelessProgressCallAtCap(t *testing.T) {
	h, _ := pagedHarness(t, Options{MaxUpstreamSessionsPerPrincipal: 1, MaxUpstreamSessions: 4})
	h.connect(t, "/mcp/servers/pg", devToken, nil, "2025-11-25") // holds the slot
	st := h.connect(t, "/mcp/servers/pg", devToken, nil, "2026-07-28")
	if res := call(t, st, "alpha", map[string]any{}); res.IsError {
		t.Fatalf("a call without progress needs no session of its own: %+v", res.Content[0])
	}
	res, err := st.CallTool(context.Background(), &mcp.CallToolParams{Name: "alpha", Arguments: map[string]any{}, Meta: mcp.Meta{"progressToken": "p1"}})
	if err != nil {
		t.Fatal(err)
	}
	if te := wantToolError(t, res, "REFUSED", readiness.CodeAgentCapacity); !strings.Contains(te.Reason, "upstream sessions") {
		t.Fatalf("refusal does not say why: %+v", te)
	}
}
