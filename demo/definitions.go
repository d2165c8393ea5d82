package demo

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpready/mcpready/artifact"
)

// ToolDigests are the pinned digests of one tool definition as a client
// sees it in tools/list.
type ToolDigests struct {
	Input      string
	Output     string
	Definition string
}

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

// Digests computes the schema and definition digests of a listed tool: RFC
// 8785 canonical JSON, then SHA-256. The definition digest covers name,
// description, input schema, output schema and annotations.
func Digests(t *mcp.Tool) (ToolDigests, error) {
	var d ToolDigests
	var err error
	if d.Input, err = jsonDigest(t.InputSchema); err != nil {
		return d, fmt.Errorf("demo: input schema of %s: %w", t.Name, err)
	}
	if t.OutputSchema != nil {
		if d.Output, err = jsonDigest(t.OutputSchema); err != nil {
			return d, fmt.Errorf("demo: output schema of %s: %w", t.Name, err)
		}
	}
	def := map[string]any{"name": t.Name, "description": t.Description, "inputSchema": t.InputSchema}
	if t.OutputSchema != nil {
		def["outputSchema"] = t.OutputSchema
	}
	if t.Annotations != nil {
		def["annotations"] = t.Annotations
	}
	if d.Definition, err = jsonDigest(def); err != nil {
		return d, fmt.Errorf("demo: definition of %s: %w", t.Name, err)
	}
	return d, nil
}

func jsonDigest(v any) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	return artifact.CanonicalDigest(b)
}
