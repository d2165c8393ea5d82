package front

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpready/mcpready/agent/decide"
	"github.com/mcpready/mcpready/agent/pipeline"
	"github.com/mcpready/mcpready/readiness"
)

// codeRefused is the JSON-RPC error code of a non-tool request the policy
// refuses (a server error code; the message names the readiness code and
// the receipt).
const codeRefused = -32003

// method hands one non-tool request of the transparent view (resources,
// prompts, completion, subscriptions) to the pipeline, which admits it
// for the caller, runs do on the upstream, validates and receipts it.
func (v *view) method(ctx context.Context, s *session, method string, req mcp.Request, do func(context.Context) (mcp.Result, error)) (mcp.Result, error) {
	return rpcError(v.decideMethod(ctx, s, method, req, do))
}

// decideMethod is method with the pipeline's own error (*pipeline.MethodError).
func (v *view) decideMethod(ctx context.Context, s *session, method string, req mcp.Request, do func(context.Context) (mcp.Result, error)) (mcp.Result, error) {
	m := pipeline.Method{Method: method, Server: v.server, Name: methodName(req.GetParams())}
	m.Params, _ = json.Marshal(req.GetParams())
	c, refusal := v.callerOf(req, s, nil)
	if refusal == nil {
		if err := v.f.calls.enter(c.id.Name, true); err != nil {
			refusal = &decide.RefusalError{Step: readiness.StepNone, Code: readiness.CodeAgentCapacity, Reason: err.Error()}
		} else {
			defer v.f.calls.leave(c.id.Name)
		}
	}
	m.Caller, m.Refusal = c.pipeline(), refusal
	if v.f.opts.Telemetry != nil {
		m.Incoming = incoming(ctx, req)
	}
	return v.f.pipe.Method(ctx, v.f.pstate(v.f.state.Load()), m, do)
}

// rpcError turns a *pipeline.MethodError into the JSON-RPC error the AI agent gets.
func rpcError(res mcp.Result, err error) (mcp.Result, error) {
	var me *pipeline.MethodError
	if errors.As(err, &me) {
		code := int64(jsonrpc.CodeInternalError)
		switch {
		case me.Code != "":
			code = codeRefused
		case me.JSONRPCCode != 0:
			code = int64(me.JSONRPCCode)
		}
		return nil, &jsonrpc.Error{Code: code, Message: me.Error()}
	}
	return res, err
}

// methodName is what a non-tool request names, for its receipt.
func methodName(p mcp.Params) string {
	switch p := p.(type) {
	case *mcp.ReadResourceParams:
		return p.URI
	case *mcp.GetPromptParams:
		return p.Name
	case *mcp.SubscribeParams:
		return p.URI
	case *mcp.UnsubscribeParams:
		return p.URI
	case *mcp.CompleteParams:
		if p.Ref != nil {
			return p.Ref.Name + p.Ref.URI
		}
	}
	return ""
}
