package pipeline

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpready/mcpready/agent/decide"
	"github.com/mcpready/mcpready/agent/invoke"
	"github.com/mcpready/mcpready/agent/receipt"
	"github.com/mcpready/mcpready/agent/telemetry"
	"github.com/mcpready/mcpready/agent/validate"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/readiness"
)

// Method is one non-tool request of a transparent view: resources/*,
// prompts/*, completion/complete or a resource subscription.
type Method struct {
	// Method is the MCP method ("resources/read", ...).
	Method string
	// Server is the upstream server the view shows.
	Server string
	// Name is what the method names: the resource URI, prompt name or
	// completion reference ("" for lists).
	Name   string
	Caller Caller
	// Params as the AI agent sent them (digested into the receipt only).
	Params json.RawMessage
	// Refusal, when set, refuses the request before admission (see Request).
	Refusal *decide.RefusalError
	// Incoming is what the front knows of the request for its trace.
	Incoming telemetry.Incoming
}

// MethodError is how a refused or failed Method ends for the AI agent. It
// carries no upstream error text.
type MethodError struct {
	// Code is the stable refusal code ("" for a failed attempt).
	Code readiness.Code
	// Outcome is the receipt's outcome class.
	Outcome mcpreadyv1.OutcomeClass
	// Reason is safe to show (no upstream text, no arguments).
	Reason string
	// JSONRPCCode is the upstream's JSON-RPC error code, when it sent one.
	JSONRPCCode int
	// Receipt is the receipt id.
	Receipt string
}

func (e *MethodError) Error() string {
	s := readiness.OutcomeName(e.Outcome)
	if e.Code != "" {
		s += " " + string(e.Code)
	}
	return fmt.Sprintf("%s: %s (receipt %s)", s, e.Reason, e.Receipt)
}

// Admits reports whether c may use server's resources, prompts and
// completion: only when the admission of tool calls (decide's, the one
// Visible uses) admits c to at least one exact tool of server. The
// policy has no rules of its own for these methods; this keeps a
// principal with no tool of a server from reading it with the agent's
// upstream credentials.
func (p *Pipeline) Admits(st State, c Caller, server string) bool {
	for _, x := range p.Visible(st, c) {
		if !x.Class && x.Server == server {
			return true
		}
	}
	return false
}

// method runs m under st: refuse it (receipted) unless Admits, else do
// it on the upstream, validate what came back (size and injection
// tripwire, as for tool results) and receipt it. One receipt per request,
// returned with the answer for the request's trace.
func (p *Pipeline) method(ctx context.Context, st State, m Method, do func(context.Context) (mcp.Result, error)) (mcp.Result, *mcpreadyv1.Receipt, error) {
	now := p.opts.Now()
	rec := p.opts.Builder.Start(now)
	rec.TraceId = telemetry.TraceID(ctx)
	rec.RequestId = receipt.NewID()
	rec.Requested = m.Method
	if m.Name != "" {
		rec.Requested += " " + m.Name
	}
	rec.Region = p.opts.Region
	p.opts.Builder.Arguments(rec, m.Params)
	c := m.Caller
	ctx = withPrincipal(ctx, c)
	rec.WorkflowId, rec.PrincipalClass, rec.TenantClass = c.Workflow, c.Principal, c.Tenant
	refuse := func(step readiness.Step, code readiness.Code, reason string) error {
		p.Refuse(rec, step, code, reason)
		return &MethodError{Code: code, Outcome: rec.Outcome, Reason: reason, Receipt: rec.ReceiptId}
	}
	code, reason, unusable := st.unusable()
	switch {
	case m.Refusal != nil:
		return nil, rec, refuse(m.Refusal.Step, m.Refusal.Code, m.Refusal.Reason)
	case unusable:
		return nil, rec, refuse(readiness.StepEligibility, code, reason)
	case !p.Admits(st, c, m.Server):
		return nil, rec, refuse(readiness.StepTrust, readiness.CodeMethodNotPermitted,
			fmt.Sprintf("principal %s is admitted to no tool of server %s, so not to its %s", c.Name, m.Server, m.Method))
	}
	// These methods read: their receipts need not be durable before the
	// answer, and the Ledger may let them run without one.
	rec.ProviderSideEffect = mcpreadyv1.SideEffectClass_SIDE_EFFECT_CLASS_READ_ONLY
	rec.ConsumerSideEffect = mcpreadyv1.SideEffectClass_SIDE_EFFECT_CLASS_READ_ONLY
	if err := p.accepting(false); err != nil {
		return nil, rec, refuse(readiness.StepNone, readiness.CodeReceiptsUnavailable,
			"this host cannot record the request's receipt, so it was not started: "+err.Error())
	}
	rec.Selected = &mcpreadyv1.Selection{ServerName: m.Server}
	rec.AttemptCount = 1
	res, err := do(ctx)
	if err != nil {
		out := failureOutcome(err)
		p.Fail(rec, out, "")
		return nil, rec, &MethodError{Outcome: rec.Outcome, Reason: "upstream request failed: " + readiness.OutcomeName(rec.Outcome),
			JSONRPCCode: out.JSONRPCCode, Receipt: rec.ReceiptId}
	}
	raw, err := json.Marshal(res)
	if err == nil {
		err = checker(st.Checker).Check("", validate.Result{Size: len(raw), Text: methodTexts(res)})
	}
	if err != nil {
		out := failureOutcome(err)
		if out.Class == mcpreadyv1.OutcomeClass_OUTCOME_CLASS_TRANSPORT_FAILURE {
			out = invoke.Outcome{Class: mcpreadyv1.OutcomeClass_OUTCOME_CLASS_INVALID_RESULT,
				Layer: mcpreadyv1.ReadinessLayer_READINESS_LAYER_RESULT_VALIDITY, Err: err}
		}
		p.Fail(rec, out, "")
		return nil, rec, &MethodError{Outcome: rec.Outcome, Reason: rec.ErrorMessage, Receipt: rec.ReceiptId}
	}
	rec.Outcome = mcpreadyv1.OutcomeClass_OUTCOME_CLASS_SUCCESS
	p.opts.Builder.Result(rec, raw)
	_ = p.Emit(rec) // read-only: queued, never durable first
	return res, rec, nil
}

func checker(ch *validate.Checker) *validate.Checker {
	if ch == nil {
		return defaultChecker
	}
	return ch
}

// methodTexts are the texts of res the tripwire scans: resource contents,
// prompt messages with their embedded resources and resource links,
// completion values, and the descriptions of listed resources and prompts.
func methodTexts(res mcp.Result) []string {
	var out []string
	content := func(c mcp.Content) {
		switch c := c.(type) {
		case *mcp.TextContent:
			out = append(out, c.Text)
		case *mcp.EmbeddedResource:
			if c.Resource != nil {
				out = append(out, c.Resource.Text)
			}
		case *mcp.ResourceLink:
			out = append(out, c.Name, c.Title, c.Description)
		}
	}
	switch r := res.(type) {
	case *mcp.ReadResourceResult:
		for _, c := range r.Contents {
			if c != nil {
				out = append(out, c.Text)
			}
		}
	case *mcp.GetPromptResult:
		out = append(out, r.Description)
		for _, m := range r.Messages {
			if m != nil {
				content(m.Content)
			}
		}
	case *mcp.CompleteResult:
		out = append(out, r.Completion.Values...)
	case *mcp.ListResourcesResult:
		for _, x := range r.Resources {
			out = append(out, x.Name, x.Title, x.Description)
		}
	case *mcp.ListResourceTemplatesResult:
		for _, x := range r.ResourceTemplates {
			out = append(out, x.Name, x.Title, x.Description)
		}
	case *mcp.ListPromptsResult:
		for _, x := range r.Prompts {
			out = append(out, x.Name, x.Title, x.Description)
		}
	}
	return out
}
