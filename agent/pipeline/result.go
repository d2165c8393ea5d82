package pipeline

import (
	"encoding/json"
	"errors"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpready/mcpready/agent/decide"
	"github.com/mcpready/mcpready/agent/invoke"
	"github.com/mcpready/mcpready/agent/upstream"
	"github.com/mcpready/mcpready/agent/validate"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
)

// failureOutcome is the outcome of an upstream error: the classified
// *validate.Outcome itself (its Err keeping the whole failure, so the
// reason names who observed it), else a transport failure.
func failureOutcome(err error) invoke.Outcome {
	var o *validate.Outcome
	if !errors.As(err, &o) {
		return invoke.Outcome{Class: mcpreadyv1.OutcomeClass_OUTCOME_CLASS_TRANSPORT_FAILURE,
			Layer: mcpreadyv1.ReadinessLayer_READINESS_LAYER_REACHABILITY, Err: err}
	}
	out := *o
	out.Err = err
	return out
}

// checked is a validated upstream result and its JSON (for the digest).
type checked struct {
	res *mcp.CallToolResult
	raw []byte
	sem validate.SemanticVerdict // semantic validation (semantic.go)
	// texts holds the texts the checks scan of a result with one text (the
	// common answer), which then cost no allocation of their own.
	texts [1]string
}

// checkResult validates one upstream result: size, pinned output schema,
// tripwire (over its texts, embedded resources and resource links:
// validate.ContentTexts, as for prompt messages); isError is a tool failure inside
// a protocol success. Size and the receipt's result digest are of the
// JSON the upstream sent, when the agent has it (else of the result
// encoded again).
func checkResult(ch *validate.Checker, r decide.Route, ans upstream.Result) invoke.Outcome {
	return checkResultIn(&checked{}, ch, r, ans)
}

// checkResultIn is checkResult keeping the checked result in ck (a call's
// first attempt keeps it in its flight rather than in an allocation).
func checkResultIn(ck *checked, ch *validate.Checker, r decide.Route, ans upstream.Result) invoke.Outcome {
	res, b := ans.CallToolResult, []byte(ans.JSON)
	if b == nil {
		var err error
		if b, err = json.Marshal(res); err != nil {
			return invoke.Outcome{Class: mcpreadyv1.OutcomeClass_OUTCOME_CLASS_INVALID_RESULT,
				Layer: mcpreadyv1.ReadinessLayer_READINESS_LAYER_RESULT_VALIDITY, Sent: true, Err: err}
		}
	}
	vr := validate.Result{Size: len(b), IsError: res.IsError}
	switch {
	case ans.Structured != nil: // the upstream's own JSON: nothing to encode again
		vr.Structured, vr.Value = ans.Structured, ans.Value
	case res.StructuredContent != nil:
		vr.Structured = SchemaOf(res.StructuredContent)
	}
	ck.res, ck.raw = res, b
	vr.Text = ck.texts[:0]
	for _, c := range res.Content {
		vr.Text = validate.ContentTexts(vr.Text, c)
	}
	if ch == nil {
		ch = defaultChecker
	}
	if err := ch.Check(r.OutputSchemaDigest, vr); err != nil {
		out := failureOutcome(err)
		out.Sent = true
		return out
	}
	if res.IsError {
		return invoke.Outcome{Class: mcpreadyv1.OutcomeClass_OUTCOME_CLASS_TOOL_ERROR,
			Layer: mcpreadyv1.ReadinessLayer_READINESS_LAYER_INVOCATION, Sent: true, IsError: true, Result: ck}
	}
	return invoke.Outcome{Class: mcpreadyv1.OutcomeClass_OUTCOME_CLASS_SUCCESS, Sent: true, Result: ck}
}

var defaultChecker = validate.NewChecker(validate.Rules{})

// SchemaOf returns the raw JSON of a schema or structured value (nil when it
// does not encode).
func SchemaOf(v any) json.RawMessage {
	if v == nil {
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	return b
}
