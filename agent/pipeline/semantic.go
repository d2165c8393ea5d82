package pipeline

// Semantic validation on the call path: the policy's CEL validators
// (validate.Semantic) over the arguments and structured result of every
// result that passed the other checks.

import (
	"encoding/json"
	"errors"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpready/mcpready/agent/decide"
	"github.com/mcpready/mcpready/agent/invoke"
	"github.com/mcpready/mcpready/agent/validate"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
)

// MetaSemantic is the _meta field of an annotated result (the policy
// annotates rather than withholds results a validator rejected).
const MetaSemantic = "mcpready.dev/semantic"

// semantic runs the validators that apply to route r (by equivalence
// class, the call's input class or "<server>/<tool>") on a successful
// checked outcome. A rejection is an INVALID_RESULT at the semantic layer,
// unless the policy annotates. The clock is read only when validators run
// (a reading costs more than the rest of a call without them).
func semantic(ch *validate.Checker, r decide.Route, args json.RawMessage, now func() time.Time, out invoke.Outcome) invoke.Outcome {
	c, ok := out.Result.(*checked)
	if !ok || ch == nil || out.Class != mcpreadyv1.OutcomeClass_OUTCOME_CLASS_SUCCESS {
		return out
	}
	s := ch.Rules().Semantic
	if s == nil {
		return out
	}
	tool := r.Identity.GetServerName() + "/" + r.Identity.GetToolName()
	applies := func(key string) bool {
		return (r.Class != "" && decide.Match(key, r.Class)) || (r.InputClass != "" && decide.Match(key, r.InputClass)) || decide.Match(key, tool)
	}
	in := validate.SemanticInput{Tool: tool, Now: now(), Result: c.res.StructuredContent, ArgsJSON: args}
	c.sem = s.Check(applies, in)
	if f := c.sem.Failure; f != nil {
		if s.Annotate {
			meta := c.res.Meta
			if meta == nil {
				meta = mcp.Meta{}
			}
			meta[MetaSemantic] = map[string]any{"valid": false, "validator": f.Key, "version": f.Version, "errored": f.Errored}
			c.res.Meta = meta
			return out
		}
		return invoke.Outcome{Class: mcpreadyv1.OutcomeClass_OUTCOME_CLASS_INVALID_RESULT,
			Layer: mcpreadyv1.ReadinessLayer_READINESS_LAYER_SEMANTIC, Sent: true, Err: f, Result: c}
	}
	return out
}

// recordSemantic copies the verdict of out (when validators ran) into rec
// and says whether out is a semantic rejection. Without an error nothing
// is asked of errors.As, whose target would cost every answered call an
// allocation.
func recordSemantic(rec *mcpreadyv1.Receipt, out invoke.Outcome) bool {
	c, ok := out.Result.(*checked)
	if !ok || c.sem.Outcome == "" {
		if out.Err == nil {
			return false
		}
		var f *validate.SemanticFailure
		return errors.As(out.Err, &f)
	}
	rec.SemanticValidation, rec.SemanticValidatorVersion = c.sem.Outcome, c.sem.Versions
	return c.sem.Failure != nil
}
