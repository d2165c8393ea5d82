package front

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpready/mcpready/agent/telemetry"
)

// incoming is what the front knows of req for its trace: the HTTP
// headers (trace context), the session and the JSON-RPC id when the
// request's context carries it (the fast path and stateless requests;
// the go-sdk does not expose it to a stateful session's handlers).
func incoming(ctx context.Context, req mcp.Request) telemetry.Incoming {
	in := telemetry.Incoming{RequestID: telemetry.RequestID(ctx)}
	if ex := req.GetExtra(); ex != nil {
		in.Header = ex.Header
	}
	if ss := req.GetSession(); ss != nil {
		in.Session = ss.ID()
	}
	return in
}
