// Package pipeline owns the per-request path of every tools/call that
// reaches an upstream: the decision (capability resolution and the hard
// filters, package decide), human approval per route before that route's
// first attempt, execution (package invoke) on a session dialled for the
// admitted route's own endpoint, result validation (package validate) and
// the one receipt of the request, emitted before the answer is returned.
// The transparent view's resources, prompts, completion and subscriptions
// take the same path in Method (method.go): admitted per principal by the
// tool admission, validated and receipted.
//
// It is driven without HTTP: the MCP front (package front) authenticates,
// names and pins, then hands a Request and a Transport to Call. The
// pipeline must not speak MCP to the AI agent itself (no sessions, no
// protocol eras, no input-required rounds: the Transport's Call and
// Approve do that), must not verify signatures (its State is verified),
// and must not send a request anywhere but the endpoint of the route it
// runs.
package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/mcpready/mcpready/agent/circuit"
	"github.com/mcpready/mcpready/agent/decide"
	"github.com/mcpready/mcpready/agent/invoke"
	"github.com/mcpready/mcpready/agent/receipt"
	"github.com/mcpready/mcpready/agent/upstream"
	"github.com/mcpready/mcpready/agent/validate"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/readiness"
)

// Options configures a Pipeline. Zero values are documented per field.
type Options struct {
	// Builder stamps receipts (its zero value stamps nothing but ids).
	Builder receipt.Builder
	// Region of this host (the decision's residency input and the receipt's).
	Region string
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Emit receives every finished receipt, before the answer is returned.
	// It must not block for long. Nil drops receipts.
	Emit func(*mcpreadyv1.Receipt)
}

// Pipeline runs requests. It is safe for concurrent use.
type Pipeline struct {
	opts Options
}

// New returns a Pipeline.
func New(opts Options) *Pipeline {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Pipeline{opts: opts}
}

// State is the verified configuration a request is decided under.
type State struct {
	// Decide is the decision table; nil refuses every request (no_policy).
	Decide *decide.Snapshot
	// Checker validates results; nil uses the default rules.
	Checker *validate.Checker
	// Circuits and Budget are the agent-wide breakers and retry budget;
	// nil disables them.
	Circuits *circuit.Set
	Budget   *invoke.Budget
	// Drift blocks entries whose live definition drifted; nil blocks none.
	Drift decide.DriftGuard
	// Refusal, when set, refuses every request with it: the host's
	// configuration is unusable (e.g. configuration_stale, or no_policy
	// naming the Policy that is missing).
	Refusal *decide.RefusalError
}

// unusable is the refusal of every request under st, if any.
func (st *State) unusable() (readiness.Code, string, bool) {
	switch {
	case st.Refusal != nil:
		return st.Refusal.Code, st.Refusal.Reason, true
	case st.Decide == nil:
		return readiness.CodeNoPolicy, "no verified policy is installed on this host", true
	}
	return "", "", false
}

// Health is the decision's breaker view of st (nil without breakers).
func (st *State) Health() decide.Health {
	if st.Circuits == nil {
		return nil
	}
	return st.Circuits
}

// Caller is who asks, as the front authenticated them.
type Caller struct {
	// Name of the principal (approval questions), its principal and tenant
	// classes (the decision's), the workflow it acts in and the protocol
	// version its client negotiated.
	Name, Principal, Tenant, Workflow, Protocol string
	// Elicit: a human can be asked (the client supports elicitation).
	Elicit bool
}

// Request is one tools/call to run.
type Request struct {
	// Requested is the tool name as the AI agent called it (the receipt's).
	Requested string
	// Tool is the decision's name for it: a capability or "<server>/<tool>".
	Tool   string
	Caller Caller
	// Arguments as the AI agent sent them (digested into the receipt,
	// forwarded as they are).
	Arguments json.RawMessage
	// Meta is the _meta forwarded to the upstream (nil for none).
	Meta map[string]any
	// IdempotencyKey is the caller's key ("" for none; HasKey says whether
	// one was given).
	IdempotencyKey string
	HasKey         bool
	// RequestID links the receipt to earlier rounds of the same call; ""
	// starts a new request.
	RequestID string
	// Pin restricts the routes to this registry entry (a resumed round must
	// continue where it asked for input); "" for none.
	Pin string
	// Refusal, when set, refuses the request before the decision (the front
	// found the caller unauthenticated, outside its workflows, or the name
	// ambiguous).
	Refusal *decide.RefusalError
}

// Transport is what the pipeline needs from the MCP side of the agent.
type Transport interface {
	// Dial returns a session to t: exactly the endpoint the admitted route's
	// entry pins (t.Endpoint) for server t.Server.
	Dial(ctx context.Context, t upstream.Target) (*upstream.Session, error)
	// Call performs one upstream tools/call on up. A non-nil input means the
	// upstream asked for input the transport must obtain from the client in
	// another round; the pipeline returns it in Result.Input.
	Call(ctx context.Context, up *upstream.Session, params *mcp.CallToolParams) (res upstream.Result, input any, err error)
	// Approve asks a human to approve route r. A non-nil ask means the
	// question must go to the client in another round (Result.Ask); else ok
	// says whether the human approved, and err why no one could be asked.
	Approve(ctx context.Context, r decide.Route) (ok bool, ask any, err error)
}

// Result is how a request ended.
type Result struct {
	// Answer is the tools/call result for the AI agent; nil when Input or
	// Ask is set (the front answers with an input request).
	Answer *mcp.CallToolResult
	// Receipt of the request: emitted when Answer is set, still open
	// (to finish with Emit or Fail) when Input or Ask is.
	Receipt *mcpreadyv1.Receipt
	// Route that produced the outcome (nil when nothing was attempted).
	Route *decide.Route
	// Input is the upstream's request for input (Transport.Call's).
	Input any
	// Ask is the approval question for route Route (Transport.Approve's).
	Ask any
}

// input marks an attempt outcome whose upstream asked for input.
type input struct{ v any }

// ask marks an approval outcome that must go to the client.
type ask struct{ v any }

// Call runs req under st: refuse, or decide, approve each route before its
// first attempt, invoke on the route's endpoint, validate, and receipt.
func (p *Pipeline) Call(ctx context.Context, st State, req Request, tr Transport) Result {
	now := p.opts.Now()
	rec := p.opts.Builder.Start(now)
	rec.RequestId = req.RequestID
	if rec.RequestId == "" {
		rec.RequestId = receipt.NewID()
	}
	rec.Requested = req.Requested
	rec.Region = p.opts.Region
	p.opts.Builder.Arguments(rec, req.Arguments)
	c := req.Caller
	rec.WorkflowId, rec.PrincipalClass, rec.TenantClass = c.Workflow, c.Principal, c.Tenant
	if re := req.Refusal; re != nil {
		return Result{Answer: p.Refuse(rec, re.Step, re.Code, re.Reason), Receipt: rec}
	}
	if code, reason, ok := st.unusable(); ok {
		return Result{Answer: p.Refuse(rec, readiness.StepEligibility, code, reason), Receipt: rec}
	}
	dr := p.request(&st, c, req.Tool, now)
	dr.IdempotencyKey = req.HasKey
	d := st.Decide.Decide(dr, st.Health())
	rec.Candidates, rec.PolicyVersion, rec.EvidenceIds = d.Candidates, d.PolicyVersion, d.EvidenceIDs
	rec.Deadline = durationpb.New(d.Deadline)
	pin(&d, req.Pin)
	if req.HasKey {
		rec.IdempotencyKeyRef = receipt.ArgumentsDigest(json.RawMessage(fmt.Sprintf("%q", req.IdempotencyKey)))
	}
	var re *decide.RefusalError
	if errors.As(d.Refusal, &re) {
		return Result{Answer: p.Refuse(rec, re.Step, re.Code, re.Reason), Receipt: rec}
	}
	first := d.Routes[0]
	rec.ProviderSideEffect, rec.ConsumerSideEffect = first.ProviderSideEffect, first.ConsumerSideEffect
	rec.Approval = mcpreadyv1.ApprovalState_APPROVAL_STATE_NOT_REQUIRED

	var protoMu sync.Mutex
	protocol := map[string]string{}
	attempt := func(ctx context.Context, r decide.Route, n int) invoke.Outcome {
		up, err := tr.Dial(ctx, upstream.Target{Server: r.Identity.GetServerName(), Endpoint: r.Identity.GetEndpoint()})
		if err != nil {
			return failureOutcome(err)
		}
		protoMu.Lock()
		protocol[r.Entry] = up.ProtocolVersion()
		protoMu.Unlock()
		params := &mcp.CallToolParams{Meta: req.Meta, Name: r.Identity.GetToolName(), Arguments: req.Arguments}
		if len(req.Arguments) == 0 {
			params.Arguments = map[string]any{}
		}
		res, in, err := tr.Call(ctx, up, params)
		switch {
		case err != nil:
			return failureOutcome(err)
		case in != nil:
			return invoke.Outcome{Class: mcpreadyv1.OutcomeClass_OUTCOME_CLASS_SUCCESS, Sent: true, Result: input{in}}
		}
		return checkResult(st.Checker, r, res)
	}
	approve := func(ctx context.Context, r *decide.Route) (invoke.Outcome, bool) {
		return p.approve(ctx, rec, tr, r)
	}
	run := invoke.Run(ctx, d, attempt, invoke.Options{Circuits: st.Circuits, Budget: st.Budget, Now: p.opts.Now, Approve: approve})
	rec.Attempts, rec.Actions = run.Attempts, run.Actions
	rec.AttemptCount = int32(len(run.Attempts))
	if r := run.Route; r != nil {
		id := r.Identity
		rec.Selected = &mcpreadyv1.Selection{Entry: r.Entry, Endpoint: id.GetEndpoint(), ServerName: id.GetServerName(),
			ServerVersion: id.GetServerVersion(), ToolName: id.GetToolName(), InputSchemaDigest: id.GetInputSchemaDigest(),
			OutputSchemaDigest: id.GetOutputSchemaDigest(), ProtocolVersion: protocol[r.Entry]}
		rec.PerAttemptTimeout = durationpb.New(r.PerAttempt)
		rec.ProviderSideEffect, rec.ConsumerSideEffect = r.ProviderSideEffect, r.ConsumerSideEffect
		rec.Candidates = d.WithSelected(r.Entry) // the decision's records are shared: copy
	}
	out := run.Final
	switch v := out.Result.(type) {
	case ask:
		return Result{Receipt: rec, Route: run.Route, Ask: v.v}
	case input:
		return Result{Receipt: rec, Route: run.Route, Input: v.v}
	case *checked:
		if out.Class == mcpreadyv1.OutcomeClass_OUTCOME_CLASS_SUCCESS || out.Class == mcpreadyv1.OutcomeClass_OUTCOME_CLASS_TOOL_ERROR {
			rec.Outcome, rec.IsError = out.Class, v.res.IsError
			rec.SchemaValidation = "passed"
			if v.res.IsError {
				rec.FailedLayer = out.Layer
			}
			p.opts.Builder.Result(rec, v.raw)
			p.Emit(rec)
			return Result{Answer: v.res, Receipt: rec, Route: run.Route}
		}
	}
	var code readiness.Code
	if out.Class == mcpreadyv1.OutcomeClass_OUTCOME_CLASS_APPROVAL_DENIED {
		code = readiness.CodeApprovalDenied
	}
	return Result{Answer: p.Fail(rec, out, code), Receipt: rec, Route: run.Route}
}

// approve asks the transport about route r and records the approval state.
func (p *Pipeline) approve(ctx context.Context, rec *mcpreadyv1.Receipt, tr Transport, r *decide.Route) (invoke.Outcome, bool) {
	denied := func(err error) invoke.Outcome {
		return invoke.Outcome{Class: mcpreadyv1.OutcomeClass_OUTCOME_CLASS_APPROVAL_DENIED,
			Layer: mcpreadyv1.ReadinessLayer_READINESS_LAYER_INVOCATION, Err: err}
	}
	ok, q, err := tr.Approve(ctx, *r)
	switch {
	case q != nil:
		out := denied(errors.New("approval input required"))
		out.Result = ask{q}
		return out, false
	case err != nil:
		rec.Approval = mcpreadyv1.ApprovalState_APPROVAL_STATE_UNAVAILABLE
		return denied(fmt.Errorf("approval could not be obtained: %w", err)), false
	case !ok:
		rec.Approval = mcpreadyv1.ApprovalState_APPROVAL_STATE_DENIED
		return denied(errors.New("a human declined the call")), false
	}
	rec.Approval = mcpreadyv1.ApprovalState_APPROVAL_STATE_APPROVED
	return invoke.Outcome{}, true
}

// pin restricts d to the route of entry (a resumed round); if the decision
// made again no longer admits it, the request is refused.
func pin(d *decide.Decision, entry string) {
	if entry == "" || d.Refusal != nil {
		return
	}
	for _, r := range d.Routes {
		if r.Entry == entry {
			d.Routes = []decide.Route{r}
			return
		}
	}
	d.Refusal = &decide.RefusalError{Step: readiness.StepEligibility, Code: readiness.CodeInputRoute,
		Reason: fmt.Sprintf("registry entry %s, which asked for input, is no longer admitted for this call", entry)}
}

// request is the decision request of caller c for tool: built in one
// place, so that listings (Visible) and calls are admitted alike.
func (p *Pipeline) request(st *State, c Caller, tool string, now time.Time) decide.Request {
	return decide.Request{Tool: tool, Principal: c.Principal, Tenant: c.Tenant, Region: p.opts.Region,
		Workflow: c.Workflow, ProtocolVersion: c.Protocol, ApprovalAvailable: c.Elicit, Now: now, Drift: st.Drift}
}

// Visible is what c may see in tools/list under st: exactly what its calls
// would be admitted to (decide.Snapshot.Visible). Nil without a policy.
func (p *Pipeline) Visible(st State, c Caller) []decide.Visible {
	if _, _, ok := st.unusable(); ok {
		return nil
	}
	return st.Decide.Visible(p.request(&st, c, "", p.opts.Now()), st.Health())
}

// VisibleNamed is Visible for the one class or exact tool called name.
func (p *Pipeline) VisibleNamed(st State, c Caller, name string) (decide.Visible, bool) {
	if _, _, ok := st.unusable(); ok {
		return decide.Visible{}, false
	}
	return st.Decide.VisibleNamed(p.request(&st, c, "", p.opts.Now()), st.Health(), name)
}
