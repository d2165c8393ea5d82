package front

// Requests an upstream sends towards the client (sampling, elicitation,
// roots) under Policy.clientRequests: checked on each path such a request
// takes (a dedicated session's relay, the input rounds of a call) before
// the client sees it.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpready/mcpready/agent/pipeline"
	"github.com/mcpready/mcpready/readiness"
)

// clientMethod is the MCP method of an input request (or relayed request
// params); "" for none the agent relays.
func clientMethod(p any) string {
	switch p.(type) {
	case *mcp.ElicitParams:
		return readiness.ClientElicitation
	case *mcp.CreateMessageParams, *mcp.CreateMessageWithToolsParams:
		return readiness.ClientSampling
	case *mcp.ListRootsParams:
		return readiness.ClientRoots
	}
	return ""
}

// refusedClientRequest is the method of the first of reqs the current
// policy does not let server send to a client of principal class (every
// one while no policy is installed), "" when it lets all.
func (f *Front) refusedClientRequest(server, class string, reqs mcp.InputRequestMap) string {
	st := f.state.Load()
	for _, ir := range reqs {
		if m := clientMethod(ir); m != "" && (st == nil || st.Decide == nil || !st.Decide.ClientRequest(server, class, m)) {
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

// askClient puts one request of server towards the client of c (over ss)
// through the pipeline, with a receipt of its own: refused when its text
// trips the injection tripwire or the policy does not grant it (a
// JSON-RPC error for the upstream), else asked of the client, whose answer
// (or error) goes back as it is.
func (v *view) askClient(ctx context.Context, ss *mcp.ServerSession, server string, c pipeline.Caller, params mcp.Params) (mcp.Result, error) {
	method := clientMethod(params)
	r := pipeline.ClientRequest{Method: method, Server: server, Caller: c}
	r.Params, _ = json.Marshal(params)
	if hit, bad := v.refuseInput(params); bad {
		r.Tripped = hit.Rule
	}
	res, err := v.f.pipe.ClientRequest(ctx, v.f.pstate(v.f.state.Load()), r, func(ctx context.Context) (mcp.Result, error) {
		switch p := params.(type) {
		case *mcp.ElicitParams:
			return ss.Elicit(ctx, p)
		case *mcp.CreateMessageParams:
			return ss.CreateMessage(ctx, p)
		case *mcp.CreateMessageWithToolsParams:
			return ss.CreateMessageWithTools(ctx, p)
		case *mcp.ListRootsParams:
			return ss.ListRoots(ctx, p)
		}
		return nil, fmt.Errorf("%s is not relayed", method)
	})
	var me *pipeline.MethodError
	switch {
	case !errors.As(err, &me):
		return res, err
	case r.Tripped != "":
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "refused by the agent: the request tripped the injection tripwire (" + r.Tripped + ")"}
	}
	v.f.clientRequestRefused(server, c.Principal, method)
	return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "refused by the agent: the policy does not let this server send " + method + " to this client (receipt " + me.Receipt + ")"}
}
