package pipeline

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpready/mcpready/agent/invoke"
	"github.com/mcpready/mcpready/agent/telemetry"
	"github.com/mcpready/mcpready/agent/validate"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/readiness"
)

// ClientRequest is one request an upstream sends towards the client during
// a call: sampling/createMessage, elicitation/create or roots/list.
type ClientRequest struct {
	// Method is the MCP method; Server the upstream that sent it.
	Method, Server string
	// Caller is whose client is asked.
	Caller Caller
	// Params as the upstream sent them (digested into the receipt only).
	Params json.RawMessage
	// Tripped, when set, is the injection tripwire rule the request's text
	// tripped: it is refused as an invalid result, before the policy is
	// asked.
	Tripped string
}

// ClientRequest runs r under st with one receipt: refused when its text
// tripped the tripwire or the policy's clientRequests do not grant it
// (client_request_not_permitted), else answered by the client (do), whose
// answer the receipt digests. The error of a refusal is a *MethodError;
// do's own error is returned as it is (the receipt records only that the
// client did not answer).
func (p *Pipeline) ClientRequest(ctx context.Context, st State, r ClientRequest, do func(context.Context) (mcp.Result, error)) (mcp.Result, error) {
	rec := p.opts.Builder.Start(p.opts.Now())
	rec.TraceId = telemetry.TraceID(ctx)
	rec.RequestId = rec.ReceiptId
	rec.Requested, rec.Region = r.Method, p.opts.Region
	p.opts.Builder.Arguments(rec, r.Params)
	c := r.Caller
	rec.WorkflowId, rec.PrincipalClass, rec.TenantClass = c.Workflow, c.Principal, c.Tenant
	rec.Selected = &mcpreadyv1.Selection{ServerName: r.Server}
	if r.Tripped != "" {
		p.Fail(rec, invoke.Outcome{Class: mcpreadyv1.OutcomeClass_OUTCOME_CLASS_INVALID_RESULT,
			Layer: mcpreadyv1.ReadinessLayer_READINESS_LAYER_RESULT_VALIDITY, Err: fmt.Errorf("%w: %s", validate.ErrInjection, r.Tripped)}, "")
		return nil, &MethodError{Outcome: rec.Outcome, Reason: rec.ErrorMessage, Receipt: rec.ReceiptId}
	}
	if st.Decide == nil || !st.Decide.ClientRequest(r.Server, c.Principal, r.Method) {
		reason := fmt.Sprintf("the policy's clientRequests do not let %s send %s to a client of principal class %q", r.Server, r.Method, c.Principal)
		p.Refuse(rec, readiness.StepNone, readiness.CodeClientRequestNotPermitted, string(readiness.CodeClientRequestNotPermitted)+": "+reason)
		return nil, &MethodError{Code: readiness.CodeClientRequestNotPermitted, Outcome: rec.Outcome, Reason: reason, Receipt: rec.ReceiptId}
	}
	rec.AttemptCount = 1
	res, err := do(ctx)
	if err != nil { // recorded without the client's text; err goes back as it is
		p.Fail(rec, invoke.Outcome{Class: mcpreadyv1.OutcomeClass_OUTCOME_CLASS_TOOL_ERROR,
			Layer: mcpreadyv1.ReadinessLayer_READINESS_LAYER_INVOCATION, Err: fmt.Errorf("the client did not answer %s", r.Method)}, readiness.CodeInputFailed)
		return nil, err
	}
	rec.Outcome = mcpreadyv1.OutcomeClass_OUTCOME_CLASS_SUCCESS
	if raw, err := json.Marshal(res); err == nil {
		p.opts.Builder.Result(rec, raw)
	}
	_ = p.Emit(rec)
	return res, nil
}
