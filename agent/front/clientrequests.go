package front

// Requests an upstream sends towards the client (sampling, elicitation,
// roots) under Policy.clientRequests: checked on each path such a request
// takes (a dedicated session's relay, the input rounds of a call) before
// the client sees it.

import (
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpready/mcpready/agent/decide"
)

// clientMethod is the MCP method of an input request (or relayed request
// params); "" for none the agent relays.
func clientMethod(p any) string {
	switch p.(type) {
	case *mcp.ElicitParams:
		return decide.ClientElicitation
	case *mcp.CreateMessageParams, *mcp.CreateMessageWithToolsParams:
		return decide.ClientSampling
	case *mcp.ListRootsParams:
		return decide.ClientRoots
	}
	return ""
}

// clientRequestAllowed reports whether the current policy lets server send
// method towards the client of a caller of principal class (none while no
// policy is installed).
func (f *Front) clientRequestAllowed(server, class, method string) bool {
	st := f.state.Load()
	return st != nil && st.Decide != nil && st.Decide.ClientRequest(server, class, method)
}

// refusedClientRequest is the method of the first of reqs the policy does
// not let server send to a client of principal class, "" when it lets all.
func (f *Front) refusedClientRequest(server, class string, reqs mcp.InputRequestMap) string {
	for _, ir := range reqs {
		if m := clientMethod(ir); m != "" && !f.clientRequestAllowed(server, class, m) {
			return m
		}
	}
	return ""
}

// clientRequestRefused logs (never quoting the request) and counts a
// refusal.
func (f *Front) clientRequestRefused(server, class, method string) {
	f.metrics.clientRequestsRefused.WithLabelValues(server, method).Inc()
	f.opts.Logger.Warn("upstream request towards the client refused: not granted by the policy's clientRequests",
		"server", server, "method", method, "principal_class", class)
}
