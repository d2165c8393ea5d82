package front

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpready/mcpready/agent/config"
	"github.com/mcpready/mcpready/agent/decide"
	"github.com/mcpready/mcpready/agent/idempotency"
	"github.com/mcpready/mcpready/agent/pipeline"
	"github.com/mcpready/mcpready/agent/upstream"
	"github.com/mcpready/mcpready/agent/workflow"
	"github.com/mcpready/mcpready/readiness"
)

// caller is who is calling and within which workflow.
type caller struct {
	id       config.Identity
	subject  string // the caller's identity-provider token (token exchange), memory only
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

// caller is the principal of req and what it brings: authenticated from
// req's headers, unless the front has authenticated this very request
// already (known, the fast path's: ServeHTTP answered 401 otherwise).
func (v *view) caller(req mcp.Request, s *session, known *config.Identity) (caller, error) {
	var id config.Identity
	if known != nil {
		id = *known
	} else {
		var err error
		if id, err = v.f.authenticate(headerOf(req)); err != nil {
			return caller{}, err
		}
	}
	c := caller{id: id, subject: v.f.subjectToken(headerOf(req), id), workflow: headerOf(req).Get(HeaderWorkflow)}
	if m := metaOf(req.GetParams()); m != nil {
		if w, ok := m[MetaWorkflow].(string); ok && w != "" {
			c.workflow = w
		}
	}
	c.protocol = protocolOf(req, s)
	if ss, ok := req.GetSession().(*mcp.ServerSession); ok && s != nil {
		if ip := ss.InitializeParams(); ip != nil {
			c.elicit = ip.Capabilities != nil && ip.Capabilities.Elicitation != nil
		}
	}
	c.elicit = c.elicit || statelessElicit(req, s)
	return c, nil
}

// protocolOf is the protocol version req is spoken in: its own (a
// stateless request's), else its session's ("" before initialize).
func protocolOf(req mcp.Request, s *session) string {
	if sr, ok := req.(interface{ ProtocolVersion() string }); ok {
		if v := sr.ProtocolVersion(); v != "" {
			return v
		}
	}
	if ss, ok := req.GetSession().(*mcp.ServerSession); ok && s != nil {
		if ip := ss.InitializeParams(); ip != nil {
			return ip.ProtocolVersion
		}
	}
	return ""
}

// callerOf is caller, with the refusal of a caller that is
// unauthenticated or may not act in its workflow (nil when it may ask).
func (v *view) callerOf(req mcp.Request, s *session, known *config.Identity) (caller, *decide.RefusalError) {
	c, err := v.caller(req, s, known)
	switch {
	case err != nil:
		return c, &decide.RefusalError{Step: readiness.StepTrust, Code: readiness.CodeUnauthenticated, Reason: err.Error()}
	case !c.id.AllowsWorkflow(c.workflow):
		return c, &decide.RefusalError{Step: readiness.StepEligibility, Code: readiness.CodeWorkflow,
			Reason: fmt.Sprintf("principal %s may not act in workflow %q", c.id.Name, c.workflow)}
	}
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
	return v.f.pipe.Visible(v.f.pstate(st), c.pipeline())
}

// pipeline is c as the pipeline sees it.
func (c caller) pipeline() pipeline.Caller {
	return pipeline.Caller{Name: c.id.Name, Principal: c.id.PrincipalClass, Tenant: c.id.TenantClass, Workflow: c.workflow,
		Protocol: c.protocol, Elicit: c.elicit, SubjectToken: c.subject}
}

// listTools shows only what the caller may call, and checks pins.
func (v *view) listTools(ctx context.Context, s *session, req *mcp.ListToolsRequest) (*mcp.ListToolsResult, error) {
	c, err := v.caller(req, s, nil)
	if err != nil {
		return nil, err
	}
	st := v.f.state.Load()
	// The list is the caller's own (admission per principal): only its
	// client may cache it, and only until the next list_changed.
	out := &mcp.ListToolsResult{Tools: []*mcp.Tool{}, Cacheable: mcp.Cacheable{CacheScope: "private"}}
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
		if len(allowed) == 0 {
			return out, nil // nothing to show: the upstream is not asked
		}
		up, err := v.upstream(ctx, s, upstream.Target{Server: v.server})
		if err != nil {
			return nil, unavailable(err)
		}
		// Every page, pinned, answered as one page: a later page could
		// otherwise carry a changed definition the pins never see.
		list, err := v.f.listAll(ctx, up)
		if err != nil {
			return nil, err
		}
		v.f.pins.observe(st, up, list)
		for _, t := range list {
			if allowed[t.Name] && v.usable(st, v.server, t.Name) {
				out.Tools = append(out.Tools, t)
			}
		}
		return out, nil
	}
	for _, x := range vis {
		if x.Class {
			if schemasDiffer(st, x.Entries) {
				continue // warned of with the snapshot (decide), refused when called (resolveName)
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
		name := aggName(x.Server, x.Tool)
		if len(st.aggNames[name]) > 1 {
			continue // refused when called (resolveName)
		}
		if lt := v.listed(ctx, st, x.Entries[0]); lt != nil && v.usable(st, x.Server, x.Tool) {
			t := *lt
			t.Name = name
			out.Tools = append(out.Tools, &t)
		}
	}
	if v.f.workflows != nil && c.id.ReportWorkflows {
		out.Tools = append(out.Tools, reportTool)
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
	if x, ok := v.f.pipe.VisibleNamed(v.f.pstate(st), c.pipeline(), name); ok && x.Class {
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
	}
	// An exact tool by its aggregate name, when one pair alone spells it;
	// anything else resolves as is (the decision says why it is refused).
	switch pairs := st.aggNames[name]; {
	case len(pairs) == 1:
		return pairs[0].server + "/" + pairs[0].tool, v.f.targets(st, pairs[0].server), nil
	case len(pairs) > 1:
		return name, nil, fmt.Errorf("%w: %s", errAmbiguousName, pairList(pairs))
	}
	return name, nil, nil
}

// errAmbiguousName refuses an aggregate view name that more than one
// server and tool pair spells (SetState warns of each).
var errAmbiguousName = errors.New("the name stands for more than one tool")

// pairList names pairs for a refusal or a log, in a stable order.
func pairList(pairs []toolPair) string {
	out := make([]string, len(pairs))
	for i, p := range pairs {
		out[i] = fmt.Sprintf("server %q tool %q", p.server, p.tool)
	}
	slices.Sort(out)
	return strings.Join(out, ", ")
}

// callTool authenticates and names the call, checks the pins of the
// upstreams that may serve it, and hands it to the pipeline; an input or
// approval request the pipeline returns becomes an input round. known is
// the identity the front authenticated req with (nil: caller does).
func (v *view) callTool(ctx context.Context, s *session, req *mcp.CallToolRequest, known *config.Identity) (*mcp.CallToolResult, error) {
	f := v.f
	if v.server == "" && req.Params.Name == workflow.ReportTool && f.workflows != nil {
		if c, err := v.caller(req, s, known); err == nil {
			return f.reportTool(c.id, req.Params.Arguments), nil
		}
	}
	st := f.state.Load()
	pr := pipeline.Request{Requested: req.Params.Name, Arguments: req.Params.Arguments}
	c, refusal := v.callerOf(req, s, known)
	pr.Caller = c.pipeline() // zero for an unauthenticated caller
	switch {
	case refusal != nil:
		pr.Refusal = refusal
	case st.Decide != nil:
		requested, targets, err := v.resolveName(st, c, req.Params.Name)
		pr.Tool = requested
		switch {
		case errors.Is(err, errAmbiguousName):
			pr.Refusal = &decide.RefusalError{Step: readiness.StepResolve, Code: readiness.CodeAmbiguousTool, Reason: err.Error()}
		case err != nil:
			pr.Requested = requested
			pr.Refusal = &decide.RefusalError{Step: readiness.StepEligibility, Code: readiness.CodeClassSchemaMismatch, Reason: err.Error()}
		}
		if err != nil {
			break
		}
		for _, t := range targets {
			_, _ = f.pins.tools(ctx, st, t) // pins are checked before anything is called
		}
	default:
		pr.Caller = c.pipeline()
	}
	meta := metaOf(req.Params)
	key, hasKey, err := idempotency.FromMeta(meta)
	pr.IdempotencyKey, pr.HasKey = key, hasKey
	if err != nil && pr.Refusal == nil {
		pr.Refusal = &decide.RefusalError{Step: readiness.StepSideEffect, Code: readiness.CodeIdempotencyKeyInvalid, Reason: err.Error()}
	}
	if len(meta) > 0 {
		pr.Meta = forUpstream(&mcp.CallToolParams{Meta: meta}).Meta
	}
	if rd := roundOf(ctx); rd != nil && rd.prior != nil {
		pr.RequestID, pr.Pin = rd.prior.requestID, rd.prior.entry
	}
	tr := transport{v: v, s: s, req: req, c: c}
	if tok := req.Params.GetProgressToken(); s == nil && tok != nil && req.Session != nil {
		tr.own = &callSessions{v: v, principal: c.id.Name, notify: func(p *mcp.ProgressNotificationParams) {
			_ = req.Session.NotifyProgress(ctx, p)
		}}
		defer tr.own.close()
	}
	if f.opts.Telemetry != nil {
		pr.Incoming = incoming(ctx, req)
	}
	if pr.Refusal == nil {
		if err := f.calls.enter(c.id.Name, true); err != nil {
			pr.Refusal = &decide.RefusalError{Step: readiness.StepNone, Code: readiness.CodeAgentCapacity, Reason: err.Error()}
		} else {
			defer f.calls.leave(c.id.Name)
		}
	}
	res := f.pipe.Call(ctx, f.pstate(st), pr, tr)
	if err := roundOf(ctx).missingCapability(res.Receipt.GetReceiptId()); err != nil && res.Answer != nil && res.Answer.IsError {
		return nil, err
	}
	switch {
	case res.Ask != nil:
		return v.askApproval(ctx, res.Receipt, *res.Route, res.Ask.(*errNeedApproval))
	case res.Input != nil:
		return v.askInput(ctx, res.Receipt, *res.Route, res.Input.(*needsInput)), nil
	}
	return res.Answer, nil
}

// transport is the MCP side of one call, as the pipeline uses it.
type transport struct {
	v   *view
	s   *session
	req *mcp.CallToolRequest
	c   caller
	own *callSessions // sessions of this call alone (a stateless call asking for progress); nil: none
}

// Dial returns the session of the front session (or the shared one, or
// one of the call's own) for exactly t's endpoint.
func (t transport) Dial(ctx context.Context, tg upstream.Target) (*upstream.Session, error) {
	if t.own != nil {
		return t.own.open(ctx, t.v.f.target(tg.Server, tg.Endpoint))
	}
	return t.v.upstream(ctx, t.s, t.v.f.target(tg.Server, tg.Endpoint))
}

// Call runs one upstream call, with the input rounds of package front.
func (t transport) Call(ctx context.Context, up *upstream.Session, params *mcp.CallToolParams) (upstream.Result, any, error) {
	res, ni, err := t.v.callUpstream(ctx, up, params)
	if ni != nil {
		return res, ni, err
	}
	return res, nil, err
}

// Approve asks the human over the client (an input round for a stateless one).
func (t transport) Approve(ctx context.Context, r decide.Route) (bool, any, error) {
	ok, err := t.v.approve(ctx, t.s, t.req, t.c, r)
	var need *errNeedApproval
	if errors.As(err, &need) {
		return false, need, nil
	}
	return ok, nil, err
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

// ToolError is the JSON body of a structured, recoverable tool error (see
// pipeline.ToolError).
type ToolError = pipeline.ToolError

// ParseToolError extracts the ToolError of a structured tool error result.
func ParseToolError(res *mcp.CallToolResult) (ToolError, bool) { return pipeline.ParseToolError(res) }
