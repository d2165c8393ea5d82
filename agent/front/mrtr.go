package front

// Multi round-trip requests (SEP-2322) on the tools/call path.
//
// An upstream that needs input during a call (elicitation, sampling, roots)
// answers tools/call with an input-required result: input requests keyed by
// id and an opaque requestState. The upstream client never fulfils them
// (package upstream); the front does, depending on the caller's era:
//
//   - a 2026-07-28 (stateless) client gets the input-required result itself,
//     so its own handlers run. The agent keeps what it needs to resume the
//     call (the entry that asked, the upstream's requestState, the principal,
//     tool and arguments digest of the call) under a random single-use key,
//     and hands the client that key as requestState. On the retry the key is
//     taken (a second use, an unknown or expired key, or a key used by
//     another principal, tool, arguments or view is refused), policy is
//     decided again with the route pinned to that entry, and the client's
//     inputResponses go to the upstream with the upstream's own state.
//     A session-era upstream asks with server-to-client requests instead;
//     for a stateless client that declared elicitation, sampling or roots
//     the call runs on a leased upstream session and is held open across
//     rounds (mrtr_held.go), each request becoming one input request.
//   - a session-era client is asked by the agent over its session (the
//     go-sdk server-to-client requests) and the agent repeats the upstream
//     call itself, up to maxSessionRounds times.
//
// The agent's own approval step (Policy approvals) uses the same mechanism
// for stateless clients: an input-required result carrying one elicitation
// under approvalInputKey.
//
// Receipts: every round that reaches an upstream emits its own receipt, and
// all rounds of one call share the receipt request_id. A round that ended in
// an input request records outcome SUCCESS with the action "input_required"
// and the digest of the input-required result. A round that only asked for
// approval reaches no upstream and emits none: the receipt of the retry
// records the approval (APPROVED or DENIED).

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpready/mcpready/agent/decide"
	"github.com/mcpready/mcpready/agent/invoke"
	"github.com/mcpready/mcpready/agent/pipeline"
	"github.com/mcpready/mcpready/agent/receipt"
	"github.com/mcpready/mcpready/agent/upstream"
	"github.com/mcpready/mcpready/agent/validate"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/readiness"
)

const (
	// approvalInputKey is the input request id of the agent's approval question.
	approvalInputKey = "mcpready.dev/approval"
	// statePrefix starts every requestState the agent hands out.
	statePrefix = "mcpready-rs1."
	// stateKeyBytes is the size of the random part of a requestState.
	stateKeyBytes = 32
	// roundTTL bounds how long a pending round waits for its retry.
	roundTTL = 10 * time.Minute
	// maxSessionRounds bounds the input rounds the agent runs for one
	// session-era call.
	maxSessionRounds = 10
)

// ErrRequestState is the error (as JSON-RPC invalid params) for a retry whose
// requestState the agent did not issue, already consumed, let expire, or
// issued for another principal, tool, arguments or view.
var ErrRequestState = errors.New("invalid requestState")

// round is the multi round-trip context of one tools/call.
type round struct {
	stateless bool
	ss        *mcp.ServerSession // who answers input requests for a session-era client
	caps      *mcp.ClientCapabilities
	v         *view
	req       *mcp.CallToolRequest
	prior     *pending             // the round this call resumes (stateless retries)
	responses mcp.InputResponseMap // the client's answers to prior

	mu       sync.Mutex
	approved bool // approval was granted in this call (now or in an earlier round)
	heldUsed bool // the held call of prior was continued (or aborted)
	// missing is what a stateless upstream said the caller must declare
	// (SEP-2575 MissingRequiredClientCapabilityError), for callTool to
	// pass on as that error.
	missing *mcp.ClientCapabilities
}

// pendingKey binds a pending round to the call that may resume it.
type pendingKey struct {
	server, principal, tool, args string
}

// pending is what the agent keeps between an input-required result and its retry.
type pending struct {
	key       pendingKey
	requestID string
	entry     string    // the registry entry the retry is pinned to
	approval  bool      // the agent asked for approval (approvalInputKey)
	approved  bool      // approval was granted in an earlier round
	state     string    // the upstream's requestState
	held      *heldCall // the upstream call waiting for the answer (session-era upstream)
	expires   time.Time
	release   func() // gives back the round's slot (idempotent)
}

type roundKey struct{}

// callKey is what binds a pending round to this call.
func (rd *round) callKey() pendingKey {
	id, _ := rd.v.f.authenticate(headerOf(rd.req))
	return pendingKey{server: rd.v.server, principal: id.Name, tool: rd.req.Params.Name, args: receipt.ArgumentsDigest(rd.req.Params.Arguments)}
}

// caller is the round's caller, for the requests its upstream sends
// towards its client.
func (rd *round) caller() pipeline.Caller {
	id, _ := rd.v.f.authenticate(headerOf(rd.req))
	return pipeline.Caller{Name: id.Name, Principal: id.PrincipalClass, Tenant: id.TenantClass}
}

func roundOf(ctx context.Context) *round {
	rd, _ := ctx.Value(roundKey{}).(*round)
	return rd
}

// beginRound attaches the round of req to ctx. A stateless retry whose
// requestState is not valid for this call is refused with ErrRequestState.
func (v *view) beginRound(ctx context.Context, s *session, req *mcp.CallToolRequest) (context.Context, error) {
	rd := &round{stateless: s == nil, v: v, req: req}
	if ss, ok := req.GetSession().(*mcp.ServerSession); ok && s != nil {
		rd.ss = ss
		if ip := ss.InitializeParams(); ip != nil {
			rd.caps = ip.Capabilities
		}
	}
	if rd.stateless {
		rd.caps = req.ClientCapabilities()
		if state, responses := req.Params.RequestState, req.Params.InputResponses; state != "" || responses != nil {
			p, err := v.f.rounds().take(state, rd.callKey(), v.f.opts.Now())
			if err != nil {
				return ctx, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: err.Error()}
			}
			rd.prior, rd.responses, rd.approved = p, responses, p.approved
		}
	}
	return context.WithValue(ctx, roundKey{}, rd), nil
}

// statelessElicit reports whether a stateless caller (s == nil) declared
// elicitation in its per-request capabilities.
func statelessElicit(req mcp.Request, s *session) bool {
	cr, ok := req.(*mcp.CallToolRequest)
	if s != nil || !ok {
		return false
	}
	caps := cr.ClientCapabilities()
	return caps != nil && caps.Elicitation != nil
}

// errNeedApproval asks the caller of approve to return an approval input request.
type errNeedApproval struct{ params *mcp.ElicitParams }

func (e *errNeedApproval) Error() string { return "approval input required" }

// approvalRequest is the elicitation that asks a human to approve r.
func approvalRequest(c caller, r decide.Route) *mcp.ElicitParams {
	msg := r.ApprovalPrompt // the pipeline's: tool, server, side effect, reversibility, allow-listed arguments
	if msg == "" {
		msg = fmt.Sprintf("Approve calling %s on %s (side effect: %s) for %s?", r.Identity.GetToolName(), r.Identity.GetServerName(),
			strings.TrimPrefix(r.ConsumerSideEffect.String(), "SIDE_EFFECT_CLASS_"), c.id.Name)
	}
	return &mcp.ElicitParams{
		Message: msg,
		RequestedSchema: map[string]any{
			"type":       "object",
			"properties": map[string]any{"approve": map[string]any{"type": "boolean", "description": "Allow this call"}},
			"required":   []any{"approve"},
		},
	}
}

// approvedBy reports whether an elicitation answer approves the call.
func approvedBy(res *mcp.ElicitResult) bool {
	approved, _ := res.Content["approve"].(bool)
	return res.Action == "accept" && approved
}

// approve decides approval for a stateless caller: granted in an earlier
// round, answered in this one, or still to be asked (*errNeedApproval).
func (rd *round) approve(c caller, r decide.Route) (bool, error) {
	if !c.elicit {
		return false, errors.New("the client cannot elicit")
	}
	rd.mu.Lock()
	defer rd.mu.Unlock()
	if rd.approved {
		return true, nil
	}
	if rd.prior != nil && rd.prior.approval {
		if res, ok := rd.responses[approvalInputKey].(*mcp.ElicitResult); ok {
			rd.approved = approvedBy(res)
			return rd.approved, nil
		}
	}
	return false, &errNeedApproval{params: approvalRequest(c, r)}
}

// askApproval returns the approval input request of a stateless call for
// route r (the retry is pinned to r). A round that already reached an
// upstream (an earlier route failed) emits its receipt, with the action
// input_required on r.
func (v *view) askApproval(ctx context.Context, rec *mcpreadyv1.Receipt, r decide.Route, need *errNeedApproval) (*mcp.CallToolResult, error) {
	rd := roundOf(ctx)
	if rd == nil {
		return v.f.pipe.Fail(rec, invoke.Outcome{Class: mcpreadyv1.OutcomeClass_OUTCOME_CLASS_APPROVAL_DENIED,
			Layer: mcpreadyv1.ReadinessLayer_READINESS_LAYER_INVOCATION, Err: need}, readiness.CodeApprovalDenied), nil
	}
	out := v.inputRequired(rd, rec, &pending{requestID: rec.RequestId, entry: r.Entry, approval: true},
		mcp.InputRequestMap{approvalInputKey: need.params})
	if n := len(rec.Attempts); n > 0 && !out.IsError {
		rec.Outcome = rec.Attempts[n-1].GetOutcome()
		rec.Actions = append(rec.Actions, readiness.NewAction(readiness.ActionInputRequired, r.Entry))
		v.f.pipe.Emit(rec)
	}
	return out, nil
}

// needsInput is an upstream answer that asks for input (invoke.Outcome.Result).
type needsInput struct {
	res  *mcp.CallToolResult
	err  error     // the agent could not obtain the input for a session-era client
	held *heldCall // the upstream call waiting for the answer, if any
}

// callUpstream calls the upstream for one attempt: a resumed stateless call
// carries the client's answers and the upstream's state; for a session-era
// client the agent answers input requests over the client's session and
// repeats the call. A result that still needs input is returned as needsInput.
func (v *view) callUpstream(ctx context.Context, up *upstream.Session, params *mcp.CallToolParams) (upstream.Result, *needsInput, error) {
	rd := roundOf(ctx)
	if h := rd.resumeHeld(); h != nil {
		h.answer(rd.responses)
		return h.wait(ctx)
	}
	if h, err := v.heldFor(ctx, rd, up, params); h != nil || err != nil {
		if err != nil {
			return upstream.Result{}, nil, err
		}
		return h.wait(ctx)
	}
	if rd != nil && rd.prior != nil && !rd.prior.approval {
		params.RequestState = rd.prior.state
		params.InputResponses = make(mcp.InputResponseMap, len(rd.responses))
		for k, r := range rd.responses {
			if k != approvalInputKey {
				params.InputResponses[k] = r
			}
		}
	}
	if rd != nil && up.ProtocolVersion() >= statelessProtocol {
		params = withClientCaps(params, rd.caps)
	}
	res, err := rd.call(ctx, up, params)
	for i := 0; err == nil && res.NeedsInput() && rd != nil && rd.ss != nil && i < maxSessionRounds; i++ {
		if _, bad := scanInput(inputParams(res.InputRequests)...); bad || len(res.InputRequests) == 0 || unsupported(rd.caps, res.InputRequests) != "" ||
			v.f.refusedClientRequest(up.Server, rd.caller().Principal, res.InputRequests) != "" {
			break // askInput refuses what trips the tripwire or the policy does not grant
		}
		responses, ferr := v.fulfil(ctx, rd, up.Server, res.InputRequests)
		if ferr != nil {
			return upstream.Result{}, &needsInput{res: res.CallToolResult, err: ferr}, nil
		}
		p := *params
		p.InputResponses, p.RequestState = responses, res.RequestState
		res, err = rd.call(ctx, up, &p)
	}
	if err != nil {
		return upstream.Result{}, nil, err
	}
	if res.NeedsInput() {
		return upstream.Result{}, &needsInput{res: res.CallToolResult}, nil
	}
	return res, nil, nil
}

// fulfil answers input requests by asking the session-era client.
func (v *view) fulfil(ctx context.Context, rd *round, server string, reqs mcp.InputRequestMap) (mcp.InputResponseMap, error) {
	out := make(mcp.InputResponseMap, len(reqs))
	c := rd.caller()
	for id, ir := range reqs {
		p, ok := ir.(mcp.Params)
		if !ok || clientMethod(p) == "" {
			return nil, fmt.Errorf("input request %q: unknown input request type %T", id, ir)
		}
		res, err := v.askClient(ctx, rd.ss, server, c, p)
		if err != nil {
			return nil, fmt.Errorf("input request %q: %w", id, err)
		}
		ir, ok := res.(mcp.InputResponse)
		if !ok {
			return nil, fmt.Errorf("input request %q: answer of type %T", id, res)
		}
		out[id] = ir
	}
	return out, nil
}

// inputTexts appends the texts of an upstream's request for client input
// that reach the user or the client's model: an elicitation's message and
// schema titles and descriptions, a sampling request's system prompt,
// message texts and tools.
func inputTexts(out []string, p mcp.Params) []string {
	switch x := p.(type) {
	case *mcp.ElicitParams:
		out = schemaTexts(append(out, x.Message), x.RequestedSchema)
	case *mcp.CreateMessageParams:
		out = append(out, x.SystemPrompt)
		for _, m := range x.Messages {
			if m != nil {
				out = validate.ContentTexts(out, m.Content)
			}
		}
	case *mcp.CreateMessageWithToolsParams:
		out = append(out, x.SystemPrompt)
		for _, m := range x.Messages {
			if m == nil {
				continue
			}
			for _, c := range m.Content {
				out = validate.ContentTexts(out, c)
			}
		}
		for _, t := range x.Tools {
			if t != nil {
				out = toolTexts(out, t)
			}
		}
	}
	return out
}

// inputParams are the input requests of reqs as Params.
func inputParams(reqs mcp.InputRequestMap) []mcp.Params {
	out := make([]mcp.Params, 0, len(reqs))
	for _, ir := range reqs {
		if p, ok := ir.(mcp.Params); ok {
			out = append(out, p)
		}
	}
	return out
}

// scanInput runs the injection tripwire over the input requests ps.
func scanInput(ps ...mcp.Params) (validate.Hit, bool) {
	var texts []string
	for _, p := range ps {
		texts = inputTexts(texts, p)
	}
	return scanTexts(texts)
}

// refuseInput reports whether the upstream's input requests trip the
// tripwire, and if so logs (by rule, never quoting) and counts it.
func (v *view) refuseInput(ps ...mcp.Params) (validate.Hit, bool) {
	hit, bad := scanInput(ps...)
	if bad {
		v.f.metrics.inputRefused.WithLabelValues(v.server).Inc()
		v.f.opts.Logger.Warn("upstream input request refused: injection tripwire", "server", v.server, "rule", hit.Rule)
	}
	return hit, bad
}

// unsupported names the first kind of input in reqs a client with caps did
// not declare ("" when it declared all).
func unsupported(caps *mcp.ClientCapabilities, reqs mcp.InputRequestMap) string {
	if caps == nil {
		caps = &mcp.ClientCapabilities{}
	}
	for _, ir := range reqs {
		switch ir.(type) {
		case *mcp.ElicitParams:
			if caps.Elicitation == nil {
				return "elicitation"
			}
		case *mcp.CreateMessageParams, *mcp.CreateMessageWithToolsParams:
			if caps.Sampling == nil {
				return "sampling"
			}
		case *mcp.ListRootsParams:
			if caps.RootsV2 == nil {
				return "roots"
			}
		}
	}
	return ""
}

// askInput answers a call whose upstream asked for input: a stateless client
// gets the input requests (and this round's receipt is emitted); any other
// caller gets a structured error.
func (v *view) askInput(ctx context.Context, rec *mcpreadyv1.Receipt, r decide.Route, n *needsInput) *mcp.CallToolResult {
	rd := roundOf(ctx)
	fail := func(code readiness.Code, reason string) *mcp.CallToolResult {
		if n.held != nil {
			n.held.abort()
		}
		return v.f.pipe.Fail(rec, invoke.Outcome{Class: mcpreadyv1.OutcomeClass_OUTCOME_CLASS_REFUSED,
			Layer: mcpreadyv1.ReadinessLayer_READINESS_LAYER_INVOCATION, Sent: true, Err: errors.New(reason)}, code)
	}
	if hit, bad := v.refuseInput(inputParams(n.res.InputRequests)...); bad {
		if n.held != nil {
			n.held.abort()
		}
		return v.f.pipe.Fail(rec, invoke.Outcome{Class: mcpreadyv1.OutcomeClass_OUTCOME_CLASS_INVALID_RESULT,
			Layer: mcpreadyv1.ReadinessLayer_READINESS_LAYER_RESULT_VALIDITY, Sent: true,
			Err: fmt.Errorf("%w: input request: %s", validate.ErrInjection, hit.Rule)}, "")
	}
	server, class := r.Identity.GetServerName(), rec.GetPrincipalClass()
	if m := v.f.refusedClientRequest(server, class, n.res.InputRequests); m != "" {
		v.f.clientRequestRefused(server, class, m)
		return fail(readiness.CodeClientRequestNotPermitted, fmt.Sprintf("the upstream asked the client for %s, which the policy's clientRequests do not grant %s", m, server))
	}
	switch {
	case n.err != nil:
		return fail(readiness.CodeInputFailed, "the client did not provide the input the upstream asked for: "+n.err.Error())
	case len(n.res.InputRequests) == 0:
		return fail(readiness.CodeInputUnavailable, "the upstream is busy (input required without input requests); retry later")
	}
	var caps *mcp.ClientCapabilities // nil for a fast-path call: its client declared no elicitation or sampling
	if rd != nil {
		caps = rd.caps
	}
	if kind := unsupported(caps, n.res.InputRequests); kind != "" {
		return fail(readiness.CodeInputUnavailable, fmt.Sprintf("the upstream asked for %s, which the client did not declare", kind))
	}
	if rd == nil || !rd.stateless {
		return fail(readiness.CodeInputUnavailable, fmt.Sprintf("the upstream still asked for input after %d rounds", maxSessionRounds))
	}
	rd.mu.Lock()
	approved := rd.approved
	rd.mu.Unlock()
	rec.Outcome = mcpreadyv1.OutcomeClass_OUTCOME_CLASS_SUCCESS
	rec.Actions = append(rec.Actions, readiness.NewAction(readiness.ActionInputRequired, r.Entry))
	if raw, err := json.Marshal(n.res); err == nil {
		v.f.opts.Builder.Result(rec, raw)
	}
	out := v.inputRequired(rd, rec, &pending{requestID: rec.RequestId, entry: r.Entry, approved: approved, state: n.res.RequestState,
		held: n.held}, n.res.InputRequests)
	if !out.IsError {
		v.f.pipe.Emit(rec)
	} else if n.held != nil {
		n.held.abort()
	}
	return out
}

// inputRequired stores p and returns the input-required result carrying its key.
func (v *view) inputRequired(rd *round, rec *mcpreadyv1.Receipt, p *pending, reqs mcp.InputRequestMap) *mcp.CallToolResult {
	p.key = rd.callKey()
	state, err := v.f.rounds().put(p, v.f.opts.Now())
	if err != nil {
		return v.f.pipe.Fail(rec, invoke.Outcome{Class: mcpreadyv1.OutcomeClass_OUTCOME_CLASS_REFUSED,
			Layer: mcpreadyv1.ReadinessLayer_READINESS_LAYER_INVOCATION, Err: err}, readiness.CodeInputUnavailable)
	}
	b, err := json.Marshal(struct {
		ResultType    string              `json:"resultType"`
		InputRequests mcp.InputRequestMap `json:"inputRequests"`
		RequestState  string              `json:"requestState"`
	}{"input_required", reqs, state})
	var res mcp.CallToolResult
	if err == nil {
		err = json.Unmarshal(b, &res) // the only way to set the result type
	}
	if err != nil {
		return v.f.pipe.Fail(rec, invoke.Outcome{Class: mcpreadyv1.OutcomeClass_OUTCOME_CLASS_PROTOCOL_ERROR,
			Layer: mcpreadyv1.ReadinessLayer_READINESS_LAYER_INVOCATION, Sent: true, Err: err}, readiness.CodeInputUnavailable)
	}
	return &res
}

// roundStore holds the pending rounds of one Front.
type roundStore struct {
	rounds *limiter // pending rounds, per principal and overall
	held   *limiter // upstream calls held open across rounds

	mu     sync.Mutex
	m      map[string]*pending
	closed bool
}

func newRoundStore(rounds, held *limiter) *roundStore {
	return &roundStore{m: map[string]*pending{}, rounds: rounds, held: held}
}

func (f *Front) rounds() *roundStore { return f.pending }

// put stores p under a new random key and returns the key (the
// requestState), or refuses past the caps on pending rounds (expired
// rounds are dropped first).
func (st *roundStore) put(p *pending, now time.Time) (string, error) {
	b := make([]byte, stateKeyBytes)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	key := statePrefix + base64.RawURLEncoding.EncodeToString(b)
	p.expires = now.Add(roundTTL)
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.closed {
		return "", fmt.Errorf("%w: the agent is shutting down", errTooManyRounds)
	}
	release, err := st.rounds.take(p.key.principal, false)
	if err != nil {
		for k, x := range st.m {
			if now.After(x.expires) {
				st.drop(k, x)
			}
		}
		if release, err = st.rounds.acquire(p.key.principal); err != nil {
			return "", err
		}
	}
	p.release = release
	st.m[key] = p
	return key, nil
}

// drop removes an expired or abandoned round (under st.mu), ending its held call.
func (st *roundStore) drop(k string, p *pending) {
	delete(st.m, k)
	p.release()
	if p.held != nil {
		p.held.abort()
	}
}

// close drops every pending round and ends their held calls; later rounds are refused.
func (st *roundStore) close() {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.closed = true
	for k, p := range st.m {
		st.drop(k, p)
	}
}

// take removes and returns the pending round of state, checking that it
// belongs to the call k. A key is usable once.
func (st *roundStore) take(state string, k pendingKey, now time.Time) (*pending, error) {
	if err := parseState(state); err != nil {
		return nil, err
	}
	st.mu.Lock()
	p := st.m[state]
	delete(st.m, state)
	st.mu.Unlock()
	if p != nil {
		p.release()
	}
	if p != nil && p.held != nil && (now.After(p.expires) || p.key != k) {
		p.held.abort()
	}
	switch {
	case p == nil:
		return nil, fmt.Errorf("%w: unknown or already used (each requestState is valid once)", ErrRequestState)
	case now.After(p.expires):
		return nil, fmt.Errorf("%w: expired (input must come within %s)", ErrRequestState, roundTTL)
	case p.key != k:
		return nil, fmt.Errorf("%w: issued for another call (principal, tool, arguments or server differ)", ErrRequestState)
	}
	return p, nil
}

// parseState checks the form of a requestState the agent issued.
func parseState(state string) error {
	rest, ok := strings.CutPrefix(state, statePrefix)
	if !ok {
		if state == "" {
			return fmt.Errorf("%w: inputResponses without requestState", ErrRequestState)
		}
		return fmt.Errorf("%w: not issued by this agent", ErrRequestState)
	}
	b, err := base64.RawURLEncoding.DecodeString(rest)
	if err != nil || len(b) != stateKeyBytes {
		return fmt.Errorf("%w: malformed", ErrRequestState)
	}
	return nil
}
