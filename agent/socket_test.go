package agent

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpready/mcpready/agent/config"
	"github.com/mcpready/mcpready/agent/internal/cptest"
	"github.com/mcpready/mcpready/agent/internal/mcptest"
)

// TestSocketPrincipals: over the agent's Unix-domain socket a local
// process acts as the principal its uid maps to, without any token; over
// TCP without a token it is refused, since no default principal is set
// (before: there was no socket, and only a default principal let a
// tokenless local process in).
func TestSocketPrincipals(t *testing.T) {
	env := cptest.Start(t)
	up := mcptest.New(t, mcptest.Options{})
	publish(t, env, up)
	dir := t.TempDir()
	uid := uint32(os.Getuid())
	cfg, err := config.New(config.File{SocketPrincipals: []config.SocketPrincipal{{Identity: config.Identity{Name: "me", PrincipalClass: "default"}, UID: &uid}}})
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "agent.sock")
	a, stop := start(t, Options{ControlPlane: env.Addr, Root: env.RootPub, NodeID: "host-1", Listen: "127.0.0.1:0",
		DataDir: filepath.Join(dir, "data"), Config: cfg, Socket: sock})
	defer stop()
	waitConfigured(t, a)

	c := mcp.NewClient(&mcp.Implementation{Name: "ai"}, nil)
	if _, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: "http://" + a.Addr() + "/mcp/servers/test", MaxRetries: -1}, nil); err == nil || !strings.Contains(err.Error(), "Unauthorized") {
		t.Fatalf("tokenless TCP client: %v, want 401", err)
	}
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: "http://agent/mcp/servers/test", HTTPClient: hc, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi"}})
	if err != nil || res.IsError {
		t.Fatalf("call over the socket: %v %+v", err, res)
	}
}
