package front

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/mcpready/mcpready/agent/config"
	"github.com/mcpready/mcpready/agent/decide"
	"github.com/mcpready/mcpready/agent/invoke"
	"github.com/mcpready/mcpready/agent/receipt"
	"github.com/mcpready/mcpready/agent/upstream"
	"github.com/mcpready/mcpready/agent/validate"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/readiness"
)

// caller is who is calling and within which workflow.
type caller struct {
	id       config.Identity
	workflow string
	protocol string
	elicit   bool
}

func headerOf(req mcp.Request) http.Header {
	if ex := req.GetExtra(); ex != nil && ex.Header != nil {
		return ex.Header
	}
	return http.Header{}
}

func (v *view) caller(req mcp.Request, s *session) (caller, error) {
	id, err := v.f.authenticate(headerOf(req))
	if err != nil {
		return caller{}, err
	}
	c := caller{id: id, workflow: headerOf(req).Get(HeaderWorkflow)}
	if m := metaOf(req.GetParams()); m != nil {
		if w, ok := m[MetaWorkflow].(string); ok && w != "" {
			c.workflow = w
		}
	}
	if sr, ok := req.(interface{ ProtocolVersion() string }); ok {
		c.protocol = sr.ProtocolVersion()
	}
	if ss, ok := req.GetSession().(*mcp.ServerSession); ok && s != nil {
		if ip := ss.InitializeParams(); ip != nil {
			if c.protocol == "" {
				c.protocol = ip.ProtocolVersion
			}
			c.elicit = ip.Capabilities != nil && ip.Capabilities.Elicitation != nil
		}
	}
	c.elicit = c.elicit || statelessElicit(req, s)
	return c, nil
}

// aggName is the aggregate view's name of an exact tool: <server>__<tool>,
// with characters MCP tool names do not allow replaced by '_'.
func aggName(server, tool string) string {
	clean := func(s string) string {
		return strings.Map(func(r rune) rune {
			if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.' {
				return r
			}
			return '_'
		}, s)
	}
	return clean(server) + "__" + clean(tool)
}

// visible is what c may call, by the same admission as its calls.
func (v *view) visible(st *State, c caller) []decide.Visible {
	if st.Decide == nil {
		return nil
	}
	return st.Decide.Visible(v.request(c, ""), st.health())
}

// request is the decision request of caller c for tool.
func (v *view) request(c caller, tool string) decide.Request {
	return decide.Request{Tool: tool, Principal: c.id.PrincipalClass, Tenant: c.id.TenantClass, Region: v.f.opts.Region,
		Workflow: c.workflow, ProtocolVersion: c.protocol, ApprovalAvailable: c.elicit, Now: v.f.opts.Now(), Drift: v.f.pins}
}

// listTools shows only what the caller may call, and checks pins.
func (v *view) listTools(ctx context.Context, s *session, req *mcp.ListToolsRequest) (*mcp.ListToolsResult, error) {
	c, err := v.caller(req, s)
	if err != nil {
		return nil, err
	}
	st := v.f.state.Load()
	out := &mcp.ListToolsResult{Tools: []*mcp.Tool{}}
	if !c.id.AllowsWorkflow(c.workflow) {
		return out, nil
	}
	vis := v.visible(st, c)
	if v.server != "" {
		allowed := map[string]bool{}
		for _, x := range vis {
			if !x.Class && x.Server == v.server {
				allowed[x.Tool] = true
			}
		}
		up, err := v.upstream(ctx, s, upstream.Target{Server: v.server})
		if err != nil {
			return nil, fmt.Errorf("%w: %w", errUpstreamUnavailable, err)
		}
		var res *mcp.ListToolsResult
		if err := up.Do(ctx, func(ctx context.Context, cs *mcp.ClientSession) error {
			var err error
			res, err = cs.ListTools(ctx, forUpstream(req.Params))
			return err
		}); err != nil {
			return nil, err
		}
		v.f.pins.observe(st, up, res.Tools)
		for _, t := range res.Tools {
			if allowed[t.Name] && v.usable(st, v.server, t.Name) {
				out.Tools = append(out.Tools, t)
			}
		}
		out.NextCursor = res.NextCursor
		return out, nil
	}
	for _, x := range vis {
		if x.Class {
			if schemasDiffer(st, x.Entries) {
				v.f.opts.Logger.Warn("capability not listed: its members' input schemas differ", "class", x.Name, "entries", x.Entries)
				continue
			}
			t := &mcp.Tool{Name: x.Name, Description: x.Description, InputSchema: map[string]any{"type": "object"}}
			for _, e := range x.Entries {
				if lt := v.listed(ctx, st, e); lt != nil {
					t.InputSchema = lt.InputSchema
					if t.Description == "" {
						t.Description = lt.Description
					}
					break
				}
			}
			out.Tools = append(out.Tools, t)
			continue
		}
		if lt := v.listed(ctx, st, x.Entries[0]); lt != nil && v.usable(st, x.Server, x.Tool) {
			t := *lt
			t.Name = aggName(x.Server, x.Tool)
			out.Tools = append(out.Tools, &t)
		}
	}
	return out, nil
}

// listed returns the live definition of entry's tool at entry's endpoint.
func (v *view) listed(ctx context.Context, st *State, entry string) *mcp.Tool {
	id := st.Entries[entry].GetIdentity()
	m, err := v.f.pins.tools(ctx, st, v.f.target(id.GetServerName(), id.GetEndpoint()))
	if err != nil {
		return nil
	}
	return m[id.GetToolName()]
}

// usable reports whether some entry of server/tool is neither drifted nor tainted.
func (v *view) usable(st *State, server, tool string) bool {
	for _, e := range st.byTool[server][tool] {
		if !v.f.pins.Drifted(e) {
			return true
		}
	}
	return false
}

// schemasDiffer reports whether the members of a class do not share one
// input schema (equal pinned digests). One capability tool stands for every
// member, so such a class is neither listed nor called: arguments valid for
// the advertised schema could reach a member that expects others.
func schemasDiffer(st *State, entries []string) bool {
	digest := st.Entries[entries[0]].GetIdentity().GetInputSchemaDigest()
	for _, e := range entries[1:] {
		if st.Entries[e].GetIdentity().GetInputSchemaDigest() != digest {
			return true
		}
	}
	return false
}

// errMixedSchemas refuses a call of a class whose members' input schemas differ.
var errMixedSchemas = errors.New("the members of this capability do not share one input schema")

// resolveName maps the tool name the AI agent called to a decide request
// name and the upstreams whose pins must be checked first.
func (v *view) resolveName(st *State, c caller, name string) (string, []upstream.Target, error) {
	if v.server != "" {
		return v.server + "/" + name, v.f.targets(st, v.server), nil
	}
	for _, x := range v.visible(st, c) {
		switch {
		case x.Class && x.Name == name:
			if schemasDiffer(st, x.Entries) {
				return x.Name, nil, errMixedSchemas
			}
			var targets []upstream.Target
			for _, e := range x.Entries {
				id := st.Entries[e].GetIdentity()
				if t := v.f.target(id.GetServerName(), id.GetEndpoint()); !slices.Contains(targets, t) {
					targets = append(targets, t)
				}
			}
			return x.Name, targets, nil
		case !x.Class && aggName(x.Server, x.Tool) == name:
			return x.Server + "/" + x.Tool, v.f.targets(st, x.Server), nil
		}
	}
	// Not visible: the decision says why (a class name resolves as is).
	for server, tools := range st.byTool {
		for tool := range tools {
			if aggName(server, tool) == name {
				return server + "/" + tool, v.f.targets(st, server), nil
			}
		}
	}
	return name, nil, nil
}

// callTool is the whole pipeline of one call: decide, approve, invoke,
// validate, receipt.
func (v *view) callTool(ctx context.Context, s *session, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	f := v.f
	now := f.opts.Now()
	st := f.state.Load()
	rec := f.opts.Builder.Start(now)
	rec.RequestId = receipt.NewID()
	rec.Requested = req.Params.Name
	rec.Region = f.opts.Region
	f.opts.Builder.Arguments(rec, req.Params.Arguments)
	c, err := v.caller(req, s)
	if err != nil {
		return v.refuse(rec, readiness.StepTrust, readiness.CodeUnauthenticated, err.Error()), nil
	}
	rec.WorkflowId, rec.PrincipalClass, rec.TenantClass = c.workflow, c.id.PrincipalClass, c.id.TenantClass
	if !c.id.AllowsWorkflow(c.workflow) {
		return v.refuse(rec, readiness.StepEligibility, readiness.CodeWorkflow,
			fmt.Sprintf("principal %s may not act in workflow %q", c.id.Name, c.workflow)), nil
	}
	if st.Decide == nil {
		return v.refuse(rec, readiness.StepEligibility, readiness.CodeNoPolicy, "no verified policy is installed on this host"), nil
	}
	requested, targets, err := v.resolveName(st, c, req.Params.Name)
	if err != nil {
		rec.Requested = requested
		return v.refuse(rec, readiness.StepEligibility, readiness.CodeClassSchemaMismatch, err.Error()), nil
	}
	for _, t := range targets {
		_, _ = f.pins.tools(ctx, st, t) // pins are checked before anything is called
	}
	meta := metaOf(req.Params)
	_, hasKey := meta[MetaIdempotency].(string)
	dr := v.request(c, requested)
	dr.IdempotencyKey, dr.Now = hasKey, now
	d := st.Decide.Decide(dr, st.health())
	rec.Candidates, rec.PolicyVersion, rec.EvidenceIds = d.Candidates, d.PolicyVersion, d.EvidenceIDs
	rec.Deadline = durationpb.New(d.Deadline)
	v.resumeRound(ctx, rec, &d)
	if hasKey {
		rec.IdempotencyKeyRef = receipt.ArgumentsDigest(json.RawMessage(fmt.Sprintf("%q", meta[MetaIdempotency])))
	}
	var re *decide.RefusalError
	if errors.As(d.Refusal, &re) {
		return v.refuse(rec, re.Step, re.Code, re.Reason), nil
	}
	first := d.Routes[0]
	rec.ProviderSideEffect, rec.ConsumerSideEffect = first.ProviderSideEffect, first.ConsumerSideEffect
	rec.Approval = mcpreadyv1.ApprovalState_APPROVAL_STATE_NOT_REQUIRED
	approve := func(ctx context.Context, r *decide.Route) (invoke.Outcome, bool) {
		ok, err := v.approve(ctx, s, req, c, *r)
		var need *errNeedApproval
		if errors.As(err, &need) {
			return invoke.Outcome{Class: mcpreadyv1.OutcomeClass_OUTCOME_CLASS_APPROVAL_DENIED,
				Layer: mcpreadyv1.ReadinessLayer_READINESS_LAYER_INVOCATION, Err: err, Result: need}, false
		}
		if !ok {
			rec.Approval = mcpreadyv1.ApprovalState_APPROVAL_STATE_DENIED
			reason := "a human declined the call"
			if err != nil {
				rec.Approval = mcpreadyv1.ApprovalState_APPROVAL_STATE_UNAVAILABLE
				reason = "approval could not be obtained: " + err.Error()
			}
			return invoke.Outcome{Class: mcpreadyv1.OutcomeClass_OUTCOME_CLASS_APPROVAL_DENIED,
				Layer: mcpreadyv1.ReadinessLayer_READINESS_LAYER_INVOCATION, Err: errors.New(reason)}, false
		}
		rec.Approval = mcpreadyv1.ApprovalState_APPROVAL_STATE_APPROVED
		return invoke.Outcome{}, true
	}
	var protoMu sync.Mutex
	protocol := map[string]string{}
	attempt := func(ctx context.Context, r decide.Route, n int) invoke.Outcome {
		up, err := v.upstream(ctx, s, f.target(r.Identity.GetServerName(), r.Identity.GetEndpoint()))
		if err != nil {
			return failureOutcome(err)
		}
		protoMu.Lock()
		protocol[r.Entry] = up.ProtocolVersion()
		protoMu.Unlock()
		params := &mcp.CallToolParams{Meta: forUpstream(&mcp.CallToolParams{Meta: meta}).Meta, Name: r.Identity.GetToolName(), Arguments: req.Params.Arguments}
		if params.Arguments == nil || len(req.Params.Arguments) == 0 {
			params.Arguments = map[string]any{}
		}
		res, ni, err := v.callUpstream(ctx, up, params)
		if err != nil {
			return failureOutcome(err)
		}
		if ni != nil {
			return ni.outcome()
		}
		return checkResult(st.Checker, r, res)
	}
	run := invoke.Run(ctx, d, attempt, invoke.Options{Circuits: st.Circuits, Budget: st.Budget, Now: f.opts.Now, Approve: approve})
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
	if need, ok := out.Result.(*errNeedApproval); ok {
		return v.askApproval(ctx, rec, *run.Route, need)
	}
	if ni, ok := out.Result.(*needsInput); ok {
		return v.askInput(ctx, rec, *run.Route, ni), nil
	}
	if cr, ok := out.Result.(*checked); ok && (out.Class == mcpreadyv1.OutcomeClass_OUTCOME_CLASS_SUCCESS || out.Class == mcpreadyv1.OutcomeClass_OUTCOME_CLASS_TOOL_ERROR) {
		rec.Outcome, rec.IsError = out.Class, cr.res.IsError
		rec.SchemaValidation = "passed"
		if cr.res.IsError {
			rec.FailedLayer = out.Layer
		}
		f.opts.Builder.Result(rec, cr.raw)
		v.emit(rec)
		return cr.res, nil
	}
	var code readiness.Code
	if out.Class == mcpreadyv1.OutcomeClass_OUTCOME_CLASS_APPROVAL_DENIED {
		code = readiness.CodeApprovalDenied
	}
	return v.fail(rec, out, code), nil
}

// failureOutcome converts an upstream failure to an invoke outcome.
func failureOutcome(err error) invoke.Outcome {
	var uf *upstream.Failure
	if !errors.As(err, &uf) {
		return invoke.Outcome{Class: mcpreadyv1.OutcomeClass_OUTCOME_CLASS_TRANSPORT_FAILURE,
			Layer: mcpreadyv1.ReadinessLayer_READINESS_LAYER_REACHABILITY, Err: err}
	}
	return invoke.Outcome{Class: uf.Outcome, Layer: uf.Layer, Sent: uf.Obs.Sent, RetryAfter: uf.RetryAfter,
		HTTPStatus: uf.Obs.HTTPStatus, JSONRPCCode: uf.Obs.JSONRPCCode, Err: uf}
}

// checked is a validated upstream result and its JSON (for the digest).
type checked struct {
	res *mcp.CallToolResult
	raw []byte
}

// checkResult validates one upstream result: size, pinned output schema,
// tripwire; isError is a tool failure inside a protocol success. Size and
// the receipt's result digest are of the JSON the upstream sent, when the
// agent has it (else of the result encoded again).
func checkResult(ch *validate.Checker, r decide.Route, ans upstream.Result) invoke.Outcome {
	res, b := ans.CallToolResult, []byte(ans.JSON)
	if b == nil {
		var err error
		if b, err = json.Marshal(res); err != nil {
			return invoke.Outcome{Class: mcpreadyv1.OutcomeClass_OUTCOME_CLASS_INVALID_RESULT,
				Layer: mcpreadyv1.ReadinessLayer_READINESS_LAYER_RESULT_VALIDITY, Sent: true, Err: err}
		}
	}
	vr := validate.Result{Size: len(b), IsError: res.IsError}
	if res.StructuredContent != nil {
		vr.Structured = schemaOf(res.StructuredContent)
	}
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			vr.Text = append(vr.Text, t.Text)
		}
	}
	if err := ch.Check(r.OutputSchemaDigest, vr); err != nil {
		return invoke.Outcome{Class: validate.ClassOf(err), Layer: validate.LayerOf(err), Sent: true, Err: err}
	}
	if res.IsError {
		return invoke.Outcome{Class: mcpreadyv1.OutcomeClass_OUTCOME_CLASS_TOOL_ERROR,
			Layer: mcpreadyv1.ReadinessLayer_READINESS_LAYER_INVOCATION, Sent: true, IsError: true, Result: &checked{res, b}}
	}
	return invoke.Outcome{Class: mcpreadyv1.OutcomeClass_OUTCOME_CLASS_SUCCESS, Sent: true, Result: &checked{res, b}}
}

// approve asks a human through MCP elicitation: over the session of a
// session-era client, or as an input request (*errNeedApproval, see
// askApproval) for a stateless one.
func (v *view) approve(ctx context.Context, s *session, req *mcp.CallToolRequest, c caller, r decide.Route) (bool, error) {
	if rd := roundOf(ctx); rd != nil && rd.stateless {
		return rd.approve(c, r)
	}
	ss, ok := req.GetSession().(*mcp.ServerSession)
	if !ok || s == nil || !c.elicit {
		return false, errors.New("the client cannot elicit")
	}
	res, err := ss.Elicit(ctx, approvalRequest(c, r))
	if err != nil {
		return false, err
	}
	return approvedBy(res), nil
}

// refuse answers a call refused before any upstream was tried.
func (v *view) refuse(rec *mcpreadyv1.Receipt, step readiness.Step, code readiness.Code, reason string) *mcp.CallToolResult {
	rec.Outcome = mcpreadyv1.OutcomeClass_OUTCOME_CLASS_REFUSED
	rec.FailedLayer = mcpreadyv1.ReadinessLayer_READINESS_LAYER_REGISTRY
	if code == readiness.CodeDriftBlocked {
		rec.Outcome = mcpreadyv1.OutcomeClass_OUTCOME_CLASS_DRIFT_BLOCKED
	}
	if code == readiness.CodeCircuitOpen {
		rec.Outcome = mcpreadyv1.OutcomeClass_OUTCOME_CLASS_CIRCUIT_OPEN
	}
	rec.ErrorMessage = receipt.SafeError(reason)
	v.emit(rec)
	return errorResult(ToolError{Layer: layerName(rec.FailedLayer), Outcome: outcomeName(rec.Outcome), Step: readiness.Number(step), Code: string(code),
		Reason: reason, Retryable: false, Receipt: rec.ReceiptId})
}

// fail answers a call that was attempted (or approval that failed).
func (v *view) fail(rec *mcpreadyv1.Receipt, out invoke.Outcome, code readiness.Code) *mcp.CallToolResult {
	rec.Outcome, rec.FailedLayer = out.Class, out.Layer
	rec.JsonrpcCode = int32(out.JSONRPCCode)
	rec.IsError = out.IsError
	if out.HTTPStatus != 0 {
		rec.TransportStatus = fmt.Sprintf("http %d", out.HTTPStatus)
	} else if out.Class == mcpreadyv1.OutcomeClass_OUTCOME_CLASS_AMBIGUOUS || out.Class == mcpreadyv1.OutcomeClass_OUTCOME_CLASS_TIMEOUT {
		rec.TransportStatus = "timeout"
	}
	if out.Layer == mcpreadyv1.ReadinessLayer_READINESS_LAYER_RESULT_VALIDITY {
		rec.SchemaValidation = "failed"
	}
	reason := "failed"
	if out.Err != nil {
		reason = out.Err.Error()
	}
	rec.ErrorMessage = receipt.SafeError(reason)
	v.emit(rec)
	te := ToolError{Layer: layerName(out.Layer), Outcome: outcomeName(out.Class), Code: string(code), Reason: rec.ErrorMessage,
		Retryable:  invoke.Transient(out) && out.Class != mcpreadyv1.OutcomeClass_OUTCOME_CLASS_AMBIGUOUS,
		HTTPStatus: out.HTTPStatus, JSONRPCCode: out.JSONRPCCode, Receipt: rec.ReceiptId}
	if out.RetryAfter > 0 {
		te.RetryAfterSeconds = int(out.RetryAfter.Round(time.Second) / time.Second)
	}
	if out.Class == mcpreadyv1.OutcomeClass_OUTCOME_CLASS_AMBIGUOUS {
		te.Hint = "the call may have taken effect; check before repeating it"
	}
	if len(rec.Actions) > 0 {
		te.Actions = readiness.ActionStrings(rec.Actions)
	}
	return errorResult(te)
}

func (v *view) emit(rec *mcpreadyv1.Receipt) {
	v.f.opts.Builder.Finish(rec, v.f.opts.Now())
	v.f.observe(rec)
	if v.f.opts.Receipts != nil {
		v.f.opts.Receipts(rec)
	}
}

func layerName(l mcpreadyv1.ReadinessLayer) string {
	return strings.TrimPrefix(l.String(), "READINESS_LAYER_")
}

func outcomeName(o mcpreadyv1.OutcomeClass) string {
	return strings.TrimPrefix(o.String(), "OUTCOME_CLASS_")
}

// ToolError is the JSON body of a structured, recoverable tool error: the
// text of a CallToolResult with isError, so the AI agent can read which
// layer failed and why.
type ToolError struct {
	Layer             string   `json:"layer"`
	Outcome           string   `json:"outcome"`
	Step              int      `json:"step,omitempty"`
	Code              string   `json:"code,omitempty"`
	Reason            string   `json:"reason"`
	Retryable         bool     `json:"retryable"`
	RetryAfterSeconds int      `json:"retryAfterSeconds,omitempty"`
	HTTPStatus        int      `json:"httpStatus,omitempty"`
	JSONRPCCode       int      `json:"jsonrpcCode,omitempty"`
	Hint              string   `json:"hint,omitempty"`
	Actions           []string `json:"actions,omitempty"`
	Receipt           string   `json:"receipt"`
}

func errorResult(te ToolError) *mcp.CallToolResult {
	b, _ := json.Marshal(struct {
		Error ToolError `json:"mcpreadyError"`
	}{te})
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}}
}

// ParseToolError extracts the ToolError of a result errorResult produced.
func ParseToolError(res *mcp.CallToolResult) (ToolError, bool) {
	if res == nil || !res.IsError || len(res.Content) != 1 {
		return ToolError{}, false
	}
	t, ok := res.Content[0].(*mcp.TextContent)
	if !ok {
		return ToolError{}, false
	}
	var body struct {
		Error *ToolError `json:"mcpreadyError"`
	}
	if json.Unmarshal([]byte(t.Text), &body) != nil || body.Error == nil {
		return ToolError{}, false
	}
	return *body.Error, true
}
