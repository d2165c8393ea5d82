// Package pipeline owns the per-request path of every tools/call that
// reaches an upstream: the decision (capability resolution and the hard
// filters, package decide), human approval per route before that route's
// first attempt, execution (package invoke) on a session dialled for the
// admitted route's own endpoint, result validation (package validate) and
// the one receipt of the request, emitted before the answer is returned:
// for a state-changing call, durable in the Ledger first (else the answer
// is withheld), and no call starts whose receipt the Ledger cannot take.
// The transparent view's resources, prompts, completion and subscriptions
// take the same path in Method (method.go): admitted per principal by the
// policy's method rules (decide.AdmitMethod; listings filtered by the same
// admission), validated and receipted.
//
// It is driven without HTTP: the MCP front (package front) authenticates,
// names and pins, then hands a Request and a Transport to Call. The
// pipeline must not speak MCP to the AI agent itself (no sessions, no
// protocol eras, no input-required rounds: the Transport's Call and
// Approve do that), must not verify signatures (its State is verified),
// and must not send a request anywhere but the endpoint of the route it
// runs, and only when that endpoint's host is inside the entry's
// networkScope (a refused redirect to another origin is reported as
// NETWORK_DRIFT, a token granting more than was qualified as
// PERMISSION_DRIFT).
package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/time/rate"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/mcpready/mcpready/agent/access"
	"github.com/mcpready/mcpready/agent/circuit"
	"github.com/mcpready/mcpready/agent/decide"
	"github.com/mcpready/mcpready/agent/idempotency"
	"github.com/mcpready/mcpready/agent/invoke"
	"github.com/mcpready/mcpready/agent/quota"
	"github.com/mcpready/mcpready/agent/receipt"
	"github.com/mcpready/mcpready/agent/spool"
	"github.com/mcpready/mcpready/agent/telemetry"
	"github.com/mcpready/mcpready/agent/upstream"
	"github.com/mcpready/mcpready/agent/validate"
	"github.com/mcpready/mcpready/agent/workflow"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/internal/jsonwire"
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
	// Emit observes every finished receipt, before Ledger records it and
	// before the answer is returned. It must not block for long. Nil
	// observes none.
	Emit func(*mcpreadyv1.Receipt)
	// Telemetry traces requests and attempts (telemetry.go); nil is off.
	Telemetry *telemetry.Telemetry
	// ReportDrift reports to the control plane that a route's endpoint
	// redirected to another origin (NETWORK_DRIFT), once per entry and
	// target, and that an upstream token grants more than the entry was
	// qualified with (PERMISSION_DRIFT, permdrift.go), once per entry and
	// granted scope set, rate-limited. Nil reports nothing.
	ReportDrift func(context.Context, *mcpreadyv1.ReportDriftRequest) error
	// Logger records failed drift reports; nil discards.
	Logger *slog.Logger
	// Ledger records receipts: durably before the answer for a
	// state-changing call, and it says whether a call may start (see
	// Ledger). Nil records none and admits every call.
	Ledger Ledger
	// Access checks, per call at step 2, the upstream tokens the caller's
	// calls would present; nil checks none. AccessUpstream names the OAuth
	// upstream of a server (required with Access).
	Access         *access.Client
	AccessUpstream func(server string) (*access.Upstream, bool)
	// AuthClass names how the agent authenticates to a server's upstream
	// at an endpoint (readiness.Auth*): the receipt's auth class, and the
	// one evidence must have been observed under to count. Nil knows none:
	// receipts record none and evidence stating an auth class counts for
	// no route.
	AuthClass func(server, endpoint string) string
	// Keys binds idempotency keys durably and allocates keys for
	// state-changing calls to providers that declare key support. Nil binds
	// nothing and allocates nothing: a client's key is still checked and
	// carried, and receipts hold its plain digest.
	Keys *idempotency.Store
	// Workflows tracks the workflows calls name (agent/workflow): a call in
	// a workflow it does not admit is refused with the tracker's code, and
	// every answered call is recorded in its workflow, its answer's _meta
	// naming its receipt (workflow.MetaReceipt). Nil tracks none.
	Workflows *workflow.Tracker
	// ColdAfter is how long an upstream session may sit idle before its
	// next call counts as cold (Receipt.warmth); zero is DefaultColdAfter.
	ColdAfter time.Duration
}

// Ledger is where receipts are recorded (package spool's Writer).
type Ledger interface {
	// Accepting returns nil when a call (state-changing or read-only) may
	// start, else why it must be refused: its receipt cannot be recorded.
	// Whether a read-only call may run without its receipt is the
	// Ledger's policy.
	Accepting(stateChanging bool) error
	// Record records rec; with durable it returns once rec is durable, or
	// why it is not.
	Record(rec *mcpreadyv1.Receipt, durable bool) error
	// Defer records a receipt that need not be durable and is finished
	// later, on the Ledger's own goroutine (spool.Pending): the receipt
	// work a Later leaves for after the answer.
	Defer(spool.Pending)
}

// Pipeline runs requests. It is safe for concurrent use.
type Pipeline struct {
	opts       Options
	reported   sync.Map      // "<entry>|<target>" of redirects, "permission|<entry>|<scopes>" of tokens, reported as drift
	driftLimit *rate.Limiter // permission drift reports (permdrift.go)
	quota      *quota.Ledger // local quota budgets (quota.go)
	warm       *warmth       // last use of each upstream session (warmth.go)
	hints      *quota.Hints  // the upstreams' RateLimit hints (ratelimit.go)
	// sleep waits before a retry (invoke.Options.Sleep); nil is a timer.
	// Tests wrap it to see the waits the agent chose.
	sleep func(ctx context.Context, d time.Duration) error
}

// New returns a Pipeline.
func New(opts Options) *Pipeline {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Pipeline{opts: opts, quota: quota.New(), driftLimit: newDriftLimiter(), warm: newWarmth(opts.ColdAfter), hints: quota.NewHints()}
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
	// SubjectToken is the caller's own verified token from the
	// organisation's identity provider, exchanged for upstream tokens
	// (config.GrantTokenExchange); "" when it authenticated otherwise.
	// Memory only: never recorded.
	SubjectToken string
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
	// Incoming is what the front knows of the request for its trace (HTTP
	// headers, session, JSON-RPC id); zero when not known.
	Incoming telemetry.Incoming
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

// flight is what a call's attempts, approvals and receipt work share:
// one allocation, where closures over call's variables cost one each (and
// moved the state, the request and the flags they touch to the heap).
type flight struct {
	p        *Pipeline
	st       State
	req      Request
	tr       Transport
	rec      *mcpreadyv1.Receipt
	argsDone bool
	key      keyed
	raw      []byte    // the answered result's JSON, for its digest (complete)
	end      time.Time // when the answer was sent, for a receipt finished later (Receipt)
	// params are the first attempt's tools/call parameters: most calls
	// make no other attempt (each other one has its own).
	params mcp.CallToolParams
	// checked is the first attempt's checked result (each other attempt
	// has its own).
	checked checked
	// principal is who the call's upstream requests act for (its context
	// holds it), and parts the receipt's records an admitted call sets:
	// with the flight, not allocations of their own.
	principal access.Principal
	parts     recordParts

	// What the attempts record, under mu: the protocol version of the
	// last route dialled, which is the route that ran when it is that
	// route's (routes run one after another), and the warmth of the
	// call's first attempt.
	mu             sync.Mutex
	entry, version string
	warmth         mcpreadyv1.CallWarmth
}

// digestArgs records the arguments' digest and kept fields, once: before
// the receipt is emitted, the key bound or a human asked, which for a
// read-only call answered before its receipt (Later) is after the answer.
func (f *flight) digestArgs() {
	if !f.argsDone {
		f.argsDone = true
		f.p.opts.Builder.Arguments(f.rec, f.req.Arguments)
	}
}

// attempt is one attempt of the call on route r (invoke.Attempt).
func (f *flight) attempt(ctx context.Context, r decide.Route, n int) invoke.Outcome {
	p, c := f.p, &f.req.Caller
	up, err := f.tr.Dial(ctx, upstream.Target{Server: r.Identity.GetServerName(), Endpoint: r.Identity.GetEndpoint()})
	if err != nil {
		p.redirected(r, err)
		return p.failed(&f.st, *c, r, err)
	}
	w := p.warm.touch(up, p.opts.Now())
	f.mu.Lock()
	f.entry, f.version = r.Entry, up.ProtocolVersion()
	if f.warmth == mcpreadyv1.CallWarmth_CALL_WARMTH_UNSPECIFIED {
		f.warmth = w
	}
	f.mu.Unlock()
	ctx, meta, args := f.key.carry(p.observeRateLimit(ctx, r), r, f.req.Meta, f.req.Arguments)
	params := &f.params // n is 1 for the call's first attempt only
	if n > 1 {
		params = &mcp.CallToolParams{}
	}
	params.Meta, params.Name, params.Arguments = p.opts.Telemetry.Inject(ctx, meta), r.Identity.GetToolName(), args
	if len(args) == 0 {
		params.Arguments = map[string]any{}
	}
	res, in, err := f.tr.Call(ctx, up, params)
	switch {
	case err != nil:
		p.redirected(r, err)
		return p.failed(&f.st, *c, r, err)
	case in != nil:
		return invoke.Outcome{Class: mcpreadyv1.OutcomeClass_OUTCOME_CLASS_SUCCESS, Sent: true, Result: input{in}}
	}
	ck := &f.checked // n is 1 for the call's first attempt only, as with params
	if n > 1 {
		ck = &checked{}
	}
	return semantic(f.st.Checker, r, f.req.Arguments, p.opts.Now, checkResultIn(ck, f.st.Checker, r, res))
}

// approve asks about route r before its first attempt (invoke.Approve).
func (f *flight) approve(ctx context.Context, r *decide.Route) (invoke.Outcome, bool) {
	return f.p.approve(ctx, f.rec, f.tr, r, f.req.Caller.Name)
}

// complete digests the answered result and emits the receipt.
func (f *flight) complete() error {
	f.end = f.p.opts.Now()
	return f.p.record(f.Receipt())
}

// Receipt finishes the receipt of a call whose answer was sent at f.end
// and returns it, for the Ledger that records it (spool.Pending): what
// complete does but hand it to the Ledger, on the Ledger's goroutine.
func (f *flight) Receipt() *mcpreadyv1.Receipt {
	f.digestArgs()
	f.p.opts.Builder.Result(f.rec, f.raw)
	f.p.finish(f.rec, f.end)
	return f.rec
}

// call runs req under st: refuse, or decide, approve each route before its
// first attempt, invoke on the route's endpoint, validate, and receipt.
func (p *Pipeline) call(ctx context.Context, st State, req Request, tr Transport) (res Result) {
	now := p.opts.Now()
	rec := p.opts.Builder.Start(now)
	rec.TraceId = telemetry.TraceID(ctx)
	rec.RequestId = req.RequestID
	if rec.RequestId == "" {
		rec.RequestId = rec.ReceiptId // a new request is named by its first receipt
	}
	rec.Requested = receipt.BoundName(req.Requested)
	rec.Region = p.opts.Region
	f := &flight{p: p, st: st, req: req, tr: tr, rec: rec}
	refuse := func(step readiness.Step, code readiness.Code, reason string) Result {
		f.digestArgs()
		return Result{Answer: p.Refuse(rec, step, code, reason), Receipt: rec}
	}
	c := req.Caller
	ctx = withPrincipal(ctx, c, &f.principal)
	rec.WorkflowId, rec.PrincipalClass, rec.TenantClass = c.Workflow, c.Principal, c.Tenant
	if re := req.Refusal; re != nil {
		return refuse(re.Step, re.Code, re.Reason)
	}
	if len(req.Tool) > receipt.MaxNameBytes {
		return refuse(readiness.StepResolve, readiness.CodeUnknownTool,
			fmt.Sprintf("the requested name is %d bytes; no capability or tool name is longer than %d", len(req.Tool), receipt.MaxNameBytes))
	}
	if err := jsonwire.RepeatedKey(req.Arguments); errors.Is(err, jsonwire.ErrRepeatedKey) {
		return refuse(readiness.StepNone, readiness.CodeArgumentsAmbiguous, "the arguments cannot be read one way only: "+err.Error())
	}
	if reason := p.caseVariant(st, req.Arguments); reason != "" {
		return refuse(readiness.StepNone, readiness.CodeArgumentsAmbiguous, reason)
	}
	if code, reason, ok := st.unusable(); ok {
		return refuse(readiness.StepEligibility, code, reason)
	}
	if wf := p.opts.Workflows; wf != nil && c.Workflow != "" {
		wp := workflow.Principal{Name: c.Name, Class: c.Principal, Tenant: c.Tenant}
		if err := wf.Admit(wp, c.Workflow); err != nil {
			return refuse(readiness.StepEligibility, workflow.Code(err), err.Error())
		}
		defer func() { workflowAnswered(wf, wp, c.Workflow, res) }()
	}
	dr := p.request(&st, c, req.Tool, now)
	dr.IdempotencyKey, dr.AllocateKey = req.HasKey, p.opts.Keys != nil
	dr.Arguments = req.Arguments
	d := st.Decide.Decide(dr, st.Health())
	releaseGuard(&dr)
	p.permissionDrift(&st, c, &d, now)
	rec.Candidates, rec.PolicyVersion, rec.EvidenceIds = d.Candidates, d.PolicyVersion, d.EvidenceIDs
	parts := &f.parts
	rec.Deadline = setDuration(&parts.deadline, d.Deadline)
	pin(&d, req.Pin)
	if re := refusalOf(d.Refusal); re != nil {
		return refuse(re.Step, re.Code, re.Reason)
	}
	re := p.quotaFilter(&d, c, now)
	if re == nil {
		re = p.costFilter(&d, c, now)
	}
	if re != nil {
		return refuse(re.Step, re.Code, re.Reason)
	}
	hinted := p.rankByHints(&d, now)
	if later(ctx) == nil || req.HasKey || stateChanging(d.Routes) || approvalRequired(d.Routes) {
		f.digestArgs() // a key binds it, a human sees it, or the receipt goes first
	}
	key, re := p.keys(rec, &d, &f.req)
	if re != nil {
		return refuse(re.Step, re.Code, re.Reason)
	}
	first := d.Routes[0]
	rec.ProviderSideEffect, rec.ConsumerSideEffect = first.ProviderSideEffect, first.ConsumerSideEffect
	rec.Approval = mcpreadyv1.ApprovalState_APPROVAL_STATE_NOT_REQUIRED
	if err := p.accepting(stateChanging(d.Routes)); err != nil {
		return refuse(readiness.StepNone, readiness.CodeReceiptsUnavailable,
			"this host cannot record the call's receipt, so the call was not started: "+err.Error())
	}
	f.key = key
	run := invoke.Run(ctx, d, p.traced(f.attempt), invoke.Options{Circuits: st.Circuits, Budget: st.Budget, Now: p.opts.Now, Sleep: p.sleep, Approve: f.approve})
	rec.Attempts, rec.Actions, rec.FailureDomains = run.Attempts, append(hinted, run.Actions...), run.Domains
	rec.AttemptCount = int32(len(run.Attempts))
	if r := run.Route; r != nil {
		id := r.Identity
		f.mu.Lock()
		protocol := f.version
		if f.entry != r.Entry {
			protocol = ""
		}
		f.mu.Unlock()
		sel := &parts.selected
		sel.Entry, sel.Endpoint, sel.ServerName, sel.ServerVersion = r.Entry, id.GetEndpoint(), id.GetServerName(), id.GetServerVersion()
		sel.ToolName, sel.InputSchemaDigest, sel.OutputSchemaDigest = id.GetToolName(), id.GetInputSchemaDigest(), id.GetOutputSchemaDigest()
		sel.ProtocolVersion, sel.Access = protocol, p.accessFacts(c, id.GetServerName())
		sel.IncidentOwner = r.IncidentOwner
		rec.Selected = sel
		rec.PerAttemptTimeout = setDuration(&parts.perAttempt, r.PerAttempt)
		rec.ProviderSideEffect, rec.ConsumerSideEffect = r.ProviderSideEffect, r.ConsumerSideEffect
		rec.Cost, rec.InputClass = r.Cost, r.InputClass
		rec.Candidates = d.WithSelected(r.Entry) // the decision's records are shared: copy
		if p.opts.AuthClass != nil {
			rec.AuthClass = p.opts.AuthClass(id.GetServerName(), id.GetEndpoint())
		}
	}
	f.mu.Lock()
	rec.Warmth = f.warmth
	f.mu.Unlock()
	out := run.Final
	if run.Route != nil {
		p.finishKey(key, run.Route.Entry, out.Class)
	}
	p.chargeQuota(rec, &d, c, run.Route)
	p.chargeCost(rec, &d, c, run.Route)
	switch out.Result.(type) {
	case ask, input:
		f.digestArgs() // the front finishes this receipt
	}
	switch v := out.Result.(type) {
	case ask:
		return Result{Receipt: rec, Route: run.Route, Ask: v.v}
	case input:
		return Result{Receipt: rec, Route: run.Route, Input: v.v}
	case *checked:
		if out.Class == mcpreadyv1.OutcomeClass_OUTCOME_CLASS_SUCCESS || out.Class == mcpreadyv1.OutcomeClass_OUTCOME_CLASS_TOOL_ERROR {
			rec.Outcome, rec.IsError = out.Class, v.res.IsError
			rec.SchemaValidation = "passed"
			recordSemantic(rec, out)
			if v.res.IsError {
				rec.FailedLayer = out.Layer
			}
			f.raw = v.raw
			if l := later(ctx); l != nil && !Durable(rec) && l.hold(f) {
				return Result{Answer: v.res, Receipt: rec, Route: run.Route}
			}
			if err := f.complete(); err != nil {
				return Result{Answer: withheld(rec), Receipt: rec, Route: run.Route}
			}
			return Result{Answer: v.res, Receipt: rec, Route: run.Route}
		}
	}
	code := out.Code // the agent's own refusal names its reason
	switch {
	case code != "":
	case out.Class == mcpreadyv1.OutcomeClass_OUTCOME_CLASS_APPROVAL_DENIED:
		code = readiness.CodeApprovalDenied
	case recordSemantic(rec, out):
		code = readiness.CodeSemanticInvalid
		rec.SchemaValidation = "passed"
	}
	f.digestArgs()
	return Result{Answer: p.Fail(rec, out, code), Receipt: rec, Route: run.Route}
}

// caseVariant is why args cannot be read one way only when a top-level
// argument is, but for its case, a name the agent reads exactly (the
// redaction allow-list shown to approvers and kept in receipts, the value
// rules' paths) while a provider decoding into a struct reads it as that
// name; "" when none is.
func (p *Pipeline) caseVariant(st State, args []byte) string {
	names := [2][]string{p.opts.Builder.Redaction.KeepArguments}
	if st.Decide != nil {
		names[1] = st.Decide.ArgumentNames()
	}
	for _, n := range names {
		if key, name, err := jsonwire.CaseVariant(args, n); err == nil && key != "" {
			return fmt.Sprintf("the arguments cannot be read one way only: argument %q is %q but for its case, and providers differ on whether it is", receipt.BoundName(key), name)
		}
	}
	return ""
}

// recordParts are the records of a receipt that an admitted call sets,
// allocated together (with the call's flight) instead of one by one.
type recordParts struct {
	deadline, perAttempt durationpb.Duration
	selected             mcpreadyv1.Selection
}

// setDuration sets x to d as durationpb.New would make it, and returns x.
func setDuration(x *durationpb.Duration, d time.Duration) *durationpb.Duration {
	x.Seconds, x.Nanos = int64(d/time.Second), int32(d%time.Second)
	return x
}

// refusalOf is the decision's refusal in err (nil when err is nil or
// another error): checked for nil first, so that the common admitted call
// does not allocate errors.As's target.
func refusalOf(err error) *decide.RefusalError {
	if err == nil {
		return nil
	}
	var re *decide.RefusalError
	if errors.As(err, &re) {
		return re
	}
	return nil
}

// workflowAnswered records an answered call in its workflow and names its
// receipt in the answer's _meta; a round waiting for input is not a call
// of the workflow yet (the round that answers is).
func workflowAnswered(wf *workflow.Tracker, p workflow.Principal, id string, res Result) {
	if res.Answer == nil {
		return
	}
	wf.Note(p, id, res.Receipt)
	if res.Answer.Meta == nil {
		res.Answer.Meta = mcp.Meta{}
	}
	res.Answer.Meta[workflow.MetaReceipt] = res.Receipt.GetReceiptId()
}

// approvalRequired: some route needs a human's approval.
func approvalRequired(routes []decide.Route) bool {
	for _, r := range routes {
		if r.ApprovalRequired {
			return true
		}
	}
	return false
}

// stateChanging: some route may change state (decide's Route.ReadOnly).
func stateChanging(routes []decide.Route) bool {
	for _, r := range routes {
		if !r.ReadOnly {
			return true
		}
	}
	return false
}

// accepting is the Ledger's word on whether a call may start.
func (p *Pipeline) accepting(stateChanging bool) error {
	if p.opts.Ledger == nil {
		return nil
	}
	return p.opts.Ledger.Accepting(stateChanging)
}

// approve asks the transport about route r and records the approval state.
func (p *Pipeline) approve(ctx context.Context, rec *mcpreadyv1.Receipt, tr Transport, r *decide.Route, caller string) (invoke.Outcome, bool) {
	denied := func(err error) invoke.Outcome {
		return invoke.Outcome{Class: mcpreadyv1.OutcomeClass_OUTCOME_CLASS_APPROVAL_DENIED,
			Layer: mcpreadyv1.ReadinessLayer_READINESS_LAYER_INVOCATION, Err: err}
	}
	question := *r // the decision's routes are shared: the prompt goes on a copy
	question.ApprovalPrompt = approvalPrompt(caller, rec, r)
	ok, q, err := tr.Approve(ctx, question)
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

// redirected reports NETWORK_DRIFT for route r when err is a refused
// redirect to another origin: the endpoint no longer serves where it is
// pinned. Each entry and target is reported once, in the background.
func (p *Pipeline) redirected(r decide.Route, err error) {
	var re *upstream.RedirectError
	if p.opts.ReportDrift == nil || !errors.As(err, &re) {
		return
	}
	if _, dup := p.reported.LoadOrStore(r.Entry+"|"+re.Target, true); dup {
		return
	}
	observed := proto.Clone(r.Identity).(*mcpreadyv1.ToolIdentity)
	observed.Endpoint = re.Target
	req := &mcpreadyv1.ReportDriftRequest{EntryName: r.Entry, Labels: []mcpreadyv1.DriftLabel{mcpreadyv1.DriftLabel_DRIFT_LABEL_NETWORK_DRIFT},
		Observed: observed, Detail: "observed by host agent at tools/call: the pinned endpoint redirected to another origin"}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := p.opts.ReportDrift(ctx, req); err != nil {
			p.opts.Logger.Warn("reporting drift", "entry", r.Entry, "err", err)
		}
	}()
}

// request is the decision request of caller c for tool: built in one
// place, so that listings (Visible) and calls are admitted alike.
func (p *Pipeline) request(st *State, c Caller, tool string, now time.Time) decide.Request {
	return decide.Request{Tool: tool, Principal: c.Principal, Tenant: c.Tenant, Region: p.opts.Region,
		Workflow: c.Workflow, ProtocolVersion: c.Protocol, ApprovalAvailable: c.Elicit, Now: now, Drift: st.Drift,
		Access: p.accessGuard(c), AuthClass: p.opts.AuthClass}
}

// Visible is what c may see in tools/list under st: exactly what its calls
// would be admitted to (decide.Snapshot.Visible). Nil without a policy.
func (p *Pipeline) Visible(st State, c Caller) []decide.Visible {
	if _, _, ok := st.unusable(); ok {
		return nil
	}
	req := p.request(&st, c, "", p.opts.Now())
	defer releaseGuard(&req)
	return st.Decide.Visible(req, st.Health())
}

// VisibleNamed is Visible for the one class or exact tool called name.
func (p *Pipeline) VisibleNamed(st State, c Caller, name string) (decide.Visible, bool) {
	if _, _, ok := st.unusable(); ok {
		return decide.Visible{}, false
	}
	req := p.request(&st, c, "", p.opts.Now())
	defer releaseGuard(&req)
	return st.Decide.VisibleNamed(req, st.Health(), name)
}
