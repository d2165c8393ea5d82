package demo

import (
	"context"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpready/mcpready/agent/pin"
	"github.com/mcpready/mcpready/agent/upstream"
)

// ListedServer is what a client sees of one server: its identity, the
// protocol version negotiated and its tools.
type ListedServer struct {
	Name            string
	Version         string
	ProtocolVersion string
	Tools           []*mcp.Tool
}

// ListTools connects to a Streamable HTTP MCP endpoint with the go-sdk
// client and returns what it lists.
func ListTools(ctx context.Context, url string) (*ListedServer, error) {
	c := mcp.NewClient(&mcp.Implementation{Name: "mcpready-demo", Version: ServerVersion}, nil)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, DisableStandaloneSSE: true, MaxRetries: -1}, nil)
	if err != nil {
		return nil, fmt.Errorf("demo: connect %s: %w", url, err)
	}
	defer cs.Close()
	out := &ListedServer{}
	if ir := cs.InitializeResult(); ir != nil {
		out.ProtocolVersion = ir.ProtocolVersion
		if ir.ServerInfo != nil {
			out.Name, out.Version = ir.ServerInfo.Name, ir.ServerInfo.Version
		}
	}
	for t, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return nil, fmt.Errorf("demo: list tools of %s: %w", url, err)
		}
		out.Tools = append(out.Tools, t)
	}
	return out, nil
}

// Digests computes the pinned digests of a listed tool with package pin,
// exactly as the host agent does when it compares live definitions.
func Digests(t *mcp.Tool) (pin.Digests, error) {
	pt, err := upstream.PinTool(t)
	if err != nil {
		return pin.Digests{}, err
	}
	return pin.Compute(pt)
}
