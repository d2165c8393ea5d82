package front

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
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
