package pipeline

import (
	"context"
	"errors"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpready/mcpready/agent/decide"
	"github.com/mcpready/mcpready/agent/invoke"
	"github.com/mcpready/mcpready/agent/telemetry"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
)

// The telemetry hooks: a SERVER span around each request (Call, Method),
// a CLIENT span around each upstream attempt (traced). With
// Options.Telemetry nil they add nothing but a nil check.

// codeRefused is the JSON-RPC code the front answers a refused Method with.
const codeRefused = -32003

// Call runs req under st (call), in a SERVER span when telemetry is on.
func (p *Pipeline) Call(ctx context.Context, st State, req Request, tr Transport) Result {
	t := p.opts.Telemetry
	if t == nil {
		return p.call(ctx, st, req, tr)
	}
	ctx, sp := t.Server(ctx, telemetry.Request{Method: "tools/call", Target: req.Requested, Protocol: req.Caller.Protocol, Meta: req.Meta, Incoming: req.Incoming})
	res := p.call(ctx, st, req, tr)
	sp.End(res.Receipt, res.Answer != nil && res.Answer.IsError, 0)
	return res
}

// Method runs m under st (method), in a SERVER span with the upstream
// request in a CLIENT span when telemetry is on.
func (p *Pipeline) Method(ctx context.Context, st State, m Method, do func(context.Context) (mcp.Result, error)) (mcp.Result, error) {
	t := p.opts.Telemetry
	if t == nil {
		res, _, err := p.method(ctx, st, m, do)
		return res, err
	}
	r := telemetry.Request{Method: m.Method, Protocol: m.Caller.Protocol, Incoming: m.Incoming}
	if strings.HasPrefix(m.Method, "resources/") {
		r.Resource = m.Name
	} else if m.Method == "prompts/get" {
		r.Target = m.Name
	}
	ctx, sp := t.Server(ctx, r)
	res, rec, err := p.method(ctx, st, m, func(ctx context.Context) (mcp.Result, error) {
		ctx, cs := t.Client(ctx, telemetry.Attempt{Method: m.Method, Target: r.Target, Protocol: m.Caller.Protocol, Number: 1})
		res, err := do(ctx)
		out := invoke.Outcome{Class: mcpreadyv1.OutcomeClass_OUTCOME_CLASS_SUCCESS}
		if err != nil {
			out = failureOutcome(err)
		}
		cs.EndAttempt(out)
		return res, err
	})
	code := 0
	var me *MethodError
	if errors.As(err, &me) {
		code = me.JSONRPCCode
		if me.Code != "" {
			code = codeRefused
		}
	}
	if ir, ok := res.(*mcp.InitializeResult); ok {
		sp = sp.Negotiated(ir.ProtocolVersion)
	}
	sp.End(rec, false, code)

	return res, err
}

// traced wraps an attempt in a CLIENT span when telemetry is on.
func (p *Pipeline) traced(do invoke.Attempt) invoke.Attempt {
	t := p.opts.Telemetry
	if t == nil {
		return do
	}
	return func(ctx context.Context, r decide.Route, n int) invoke.Outcome {
		id := r.Identity
		ctx, sp := t.Client(ctx, telemetry.Attempt{Method: "tools/call", Target: id.GetToolName(), Protocol: id.GetProtocolVersion(), Endpoint: id.GetEndpoint(), Number: n})
		out := do(ctx, r, n)
		sp.EndAttempt(out)
		return out
	}
}
