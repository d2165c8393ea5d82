package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpready/mcpready/agent/access"
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

// Admits reports whether c is admitted to at least one exact tool of
// server by the tool admission (decide's, the one Visible uses): what the
// housekeeping methods (initialize, logging/setLevel) need when c has no
// method rule for server.
func (p *Pipeline) Admits(st State, c Caller, server string) bool {
	for _, x := range p.Visible(st, c) {
		if !x.Class && x.Server == server {
			return true
		}
	}
	return false
}

// admitMethod decides m under the policy's method rules (decide's one
// admission function of non-tool methods).
func (p *Pipeline) admitMethod(st State, m Method, now time.Time) (decide.MethodAccess, *decide.RefusalError) {
	c := m.Caller
	req := decide.MethodRequest{Method: m.Method, Server: m.Server, Name: m.Name,
		Principal: c.Principal, Tenant: c.Tenant, Region: p.opts.Region, Workflow: c.Workflow, ProtocolVersion: c.Protocol, Now: now}
	switch {
	case decide.Housekeeping(m.Method):
		req.Tools = p.Admits(st, c, m.Server)
	case m.Method == "completion/complete":
		var params struct {
			Ref struct{ Type, Name, URI string }
		}
		_ = json.Unmarshal(m.Params, &params)
		req.Ref, req.Name = params.Ref.Type, params.Ref.Name
		if req.Ref == decide.RefResource {
			req.Name = params.Ref.URI
		}
	}
	return st.Decide.AdmitMethod(req)
}

// method runs m under st: refuse it (receipted) unless the method rules
// admit it (admitMethod), else do it on the upstream, keep only what the
// rules reach of a listing, validate what came back (size and injection
// tripwire, as for tool results) and receipt it. One receipt per request,
// returned with the answer for the request's trace.
func (p *Pipeline) method(ctx context.Context, st State, m Method, do func(context.Context) (mcp.Result, error)) (mcp.Result, *mcpreadyv1.Receipt, error) {
	now := p.opts.Now()
	rec := p.opts.Builder.Start(now)
	rec.TraceId = telemetry.TraceID(ctx)
	rec.RequestId = receipt.NewID()
	rec.Requested = m.Method
	if m.Name != "" {
		rec.Requested += " " + receipt.BoundName(m.Name)
	}
	rec.Region = p.opts.Region
	p.opts.Builder.Arguments(rec, m.Params)
	c := m.Caller
	ctx = withPrincipal(ctx, c, new(access.Principal))
	rec.WorkflowId, rec.PrincipalClass, rec.TenantClass = c.Workflow, c.Principal, c.Tenant
	refuse := func(step readiness.Step, code readiness.Code, reason string) error {
		// The receipt names the code: a refused method has no candidates
		// to carry it.
		p.Refuse(rec, step, code, string(code)+": "+reason)
		return &MethodError{Code: code, Outcome: rec.Outcome, Reason: reason, Receipt: rec.ReceiptId}
	}
	code, reason, unusable := st.unusable()
	switch {
	case m.Refusal != nil:
		return nil, rec, refuse(m.Refusal.Step, m.Refusal.Code, m.Refusal.Reason)
	case unusable:
		return nil, rec, refuse(readiness.StepEligibility, code, reason)
	}
	acc, rj := p.admitMethod(st, m, now)
	if rj != nil {
		return nil, rec, refuse(rj.Step, rj.Code, rj.Reason)
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
	if p.opts.AuthClass != nil { // the server's session: its configured or first endpoint
		rec.AuthClass = p.opts.AuthClass(m.Server, "")
	}
	rec.AttemptCount = 1
	res, err := do(ctx)
	if err != nil {
		out := failureOutcome(err)
		p.Fail(rec, out, "")
		return nil, rec, &MethodError{Outcome: rec.Outcome, Reason: "upstream request failed: " + readiness.OutcomeName(rec.Outcome),
			JSONRPCCode: out.JSONRPCCode, Receipt: rec.ReceiptId}
	}
	res = shown(res, acc)
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

// shown is a listing with only the items acc shows (the method rules'
// reach); other results as they are. The upstream's result is not
// modified, and an emptied list is still a list.
func shown(res mcp.Result, acc decide.MethodAccess) mcp.Result {
	switch r := res.(type) {
	case *mcp.ListResourcesResult:
		c := *r
		c.Resources = keep(r.Resources, func(x *mcp.Resource) string { return x.URI }, acc)
		return &c
	case *mcp.ListResourceTemplatesResult:
		c := *r
		c.ResourceTemplates = keep(r.ResourceTemplates, func(x *mcp.ResourceTemplate) string { return x.URITemplate }, acc)
		return &c
	case *mcp.ListPromptsResult:
		c := *r
		c.Prompts = keep(r.Prompts, func(x *mcp.Prompt) string { return x.Name }, acc)
		return &c
	}
	return res
}

// keep is a new slice of the items of xs that acc shows, by name.
func keep[T any](xs []*T, name func(*T) string, acc decide.MethodAccess) []*T {
	out := make([]*T, 0, len(xs))
	for _, x := range xs {
		if x != nil && acc.Shows(name(x)) {
			out = append(out, x)
		}
	}
	return out
}

func checker(ch *validate.Checker) *validate.Checker {
	if ch == nil {
		return defaultChecker
	}
	return ch
}

// methodTexts are the texts of res the tripwire scans: resource contents,
// prompt messages with their embedded resources and resource links,
// completion values, and the descriptions of listed resources and prompts
// (a prompt's arguments included).
func methodTexts(res mcp.Result) []string {
	var out []string
	switch r := res.(type) {
	case *mcp.ReadResourceResult:
		for _, c := range r.Contents {
			out = validate.ResourceTexts(out, c)
		}
	case *mcp.GetPromptResult:
		out = append(out, r.Description)
		for _, m := range r.Messages {
			if m != nil {
				out = validate.ContentTexts(out, m.Content)
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
			for _, a := range x.Arguments {
				if a != nil {
					out = append(out, a.Name, a.Title, a.Description)
				}
			}
		}
	}
	return out
}
