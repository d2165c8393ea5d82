package pipeline

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpready/mcpready/agent/invoke"
	"github.com/mcpready/mcpready/agent/receipt"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/readiness"
)

// Refuse finishes rec for a request refused before any upstream was tried,
// emits it, and returns the structured tool error for the AI agent.
func (p *Pipeline) Refuse(rec *mcpreadyv1.Receipt, step readiness.Step, code readiness.Code, reason string) *mcp.CallToolResult {
	rec.Outcome = mcpreadyv1.OutcomeClass_OUTCOME_CLASS_REFUSED
	rec.FailedLayer = mcpreadyv1.ReadinessLayer_READINESS_LAYER_REGISTRY
	if code == readiness.CodeDriftBlocked {
		rec.Outcome = mcpreadyv1.OutcomeClass_OUTCOME_CLASS_DRIFT_BLOCKED
	}
	if code == readiness.CodeCircuitOpen {
		rec.Outcome = mcpreadyv1.OutcomeClass_OUTCOME_CLASS_CIRCUIT_OPEN
	}
	rec.ErrorMessage = receipt.SafeError(reason)
	_ = p.Emit(rec) // nothing was attempted: never durable, so no error
	return errorResult(ToolError{Layer: layerName(rec.FailedLayer), Outcome: readiness.OutcomeName(rec.Outcome), Step: readiness.Number(step), Code: string(code),
		Reason: reason, Retryable: transientRefusal(code), Receipt: rec.ReceiptId})
}

// transientRefusal: a refusal that lifts by itself, so the same call may
// succeed when repeated later unchanged: the agent's own bounds free up as
// calls end (agent_capacity), an open circuit breaker half-opens after its
// cooldown (circuit_open). Every other refusal needs a change first (of
// the call, the policy, the registry or the host).
func transientRefusal(code readiness.Code) bool {
	return code == readiness.CodeAgentCapacity || code == readiness.CodeCircuitOpen
}

// Fail finishes rec for a request that was attempted (or whose approval or
// input failed) with outcome out, emits it, and returns the structured
// tool error for the AI agent.
func (p *Pipeline) Fail(rec *mcpreadyv1.Receipt, out invoke.Outcome, code readiness.Code) *mcp.CallToolResult {
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
	// The answer is a failure either way; the Ledger logs a receipt that
	// could not be made durable.
	_ = p.Emit(rec)
	te := ToolError{Layer: layerName(out.Layer), Outcome: readiness.OutcomeName(out.Class), Code: string(code), Reason: rec.ErrorMessage,
		Retryable: invoke.Transient(out) && out.Class != mcpreadyv1.OutcomeClass_OUTCOME_CLASS_AMBIGUOUS ||
			out.Class == mcpreadyv1.OutcomeClass_OUTCOME_CLASS_REFUSED && transientRefusal(code),
		HTTPStatus: out.HTTPStatus, JSONRPCCode: out.JSONRPCCode, Owner: rec.GetSelected().GetIncidentOwner(), Receipt: rec.ReceiptId}
	if out.RetryAfter > 0 {
		te.RetryAfterSeconds = int(out.RetryAfter.Round(time.Second) / time.Second)
	}
	if out.Class == mcpreadyv1.OutcomeClass_OUTCOME_CLASS_AMBIGUOUS {
		te.Hint = "the call may have taken effect; check before repeating it"
	}
	te.Actions = readiness.ActionStrings(rec.Actions)
	return errorResult(te)
}

// Emit finishes rec, hands it to Options.Emit and records it in the
// Ledger: durably, before Emit returns, when rec is of a call that reached
// an upstream and may have changed state (Durable). The error says why
// such a receipt is not durable; the caller must then not answer as if
// the call had been receipted (withheld).
func (p *Pipeline) Emit(rec *mcpreadyv1.Receipt) error {
	p.finish(rec, p.opts.Now())
	return p.record(rec)
}

// record hands the finished rec to the Ledger (durably when Durable).
func (p *Pipeline) record(rec *mcpreadyv1.Receipt) error {
	if p.opts.Ledger == nil {
		return nil
	}
	return p.opts.Ledger.Record(rec, Durable(rec))
}

// finish ends rec at end and hands it to Options.Emit.
func (p *Pipeline) finish(rec *mcpreadyv1.Receipt, end time.Time) {
	p.opts.Builder.Finish(rec, end)
	if p.opts.Emit != nil {
		p.opts.Emit(rec)
	}
}

// Durable reports whether rec must be durable before its answer: some
// attempt reached an upstream and the call is not read-only. Read-only is
// decide's rule (Route.ReadOnly) on the receipt's classes: the consumer
// class READ_ONLY, and the provider's READ_ONLY or UNKNOWN.
func Durable(rec *mcpreadyv1.Receipt) bool {
	const ro, unknown = mcpreadyv1.SideEffectClass_SIDE_EFFECT_CLASS_READ_ONLY, mcpreadyv1.SideEffectClass_SIDE_EFFECT_CLASS_UNKNOWN
	readOnly := rec.GetConsumerSideEffect() == ro && (rec.GetProviderSideEffect() == ro || rec.GetProviderSideEffect() == unknown)
	return rec.GetAttemptCount() > 0 && !readOnly
}

// withheld is the answer of a state-changing call whose receipt could not
// be made durable: the upstream's answer is withheld.
func withheld(rec *mcpreadyv1.Receipt) *mcp.CallToolResult {
	return errorResult(ToolError{Layer: layerName(mcpreadyv1.ReadinessLayer_READINESS_LAYER_INVOCATION), Outcome: readiness.OutcomeName(rec.Outcome),
		Code: string(readiness.CodeReceiptNotDurable), Reason: "the call's receipt could not be made durable on this host, so its answer is withheld",
		Hint: "the call may have taken effect; check before repeating it", Receipt: rec.ReceiptId})
}

func layerName(l mcpreadyv1.ReadinessLayer) string {
	return strings.TrimPrefix(l.String(), "READINESS_LAYER_")
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
	// Owner answers for the incidents of the route that failed (Policy
	// incidentOwners), when one is named.
	Owner   string `json:"owner,omitempty"`
	Receipt string `json:"receipt"`
}

// ErrorResult is the structured tool error result carrying te.
func ErrorResult(te ToolError) *mcp.CallToolResult { return errorResult(te) }

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
