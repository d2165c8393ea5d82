package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/mcpready/mcpready/agent/internal/mcptest"
	"github.com/mcpready/mcpready/agent/invoke"
	"github.com/mcpready/mcpready/agent/validate"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/readiness"
)

// A semantic validator that rejects a real upstream's structured result
// withholds it (semantic_invalid, layer SEMANTIC) or, when the policy
// says so, returns it annotated; receipts record the verdict and the
// validator's version. Before, semanticValidation was accepted and ignored:
// the rejected result reached the AI agent unmarked.
func TestSemanticValidation(t *testing.T) {
	up := mcptest.New(t, mcptest.Options{})
	for _, tc := range []struct {
		expr    string
		action  mcpreadyv1.SemanticFailureAction
		outcome string
	}{
		{"result.echo == args.text", 0, "passed"},
		{"size(result.echo) > 5", 0, "failed:echo_any"},
		{"result.missing == 1", 0, "error:echo_any"},
		{"size(result.echo) > 5", mcpreadyv1.SemanticFailureAction_SEMANTIC_FAILURE_ACTION_ANNOTATE, "failed:echo_any"},
	} {
		pl, st, out := setup(t, policy(), map[string]*mcpreadyv1.RegistryEntry{"a": entry("test", up.URL)})
		sem, err := validate.CompileSemantic(map[string]string{"echo_any": tc.expr, "other/*": "false"}, tc.action)
		if err != nil {
			t.Fatal(err)
		}
		st.Checker = validate.NewChecker(validate.Rules{Semantic: sem})
		res := pl.Call(context.Background(), st, request("echo_any"), newFake(t))
		rec := out.recs[0]
		if rec.GetSemanticValidation() != tc.outcome || rec.GetSemanticValidatorVersion() == "" || rec.GetSchemaValidation() != "passed" {
			t.Fatalf("%s: receipt semantic %q version %q schema %q", tc.expr, rec.GetSemanticValidation(), rec.GetSemanticValidatorVersion(), rec.GetSchemaValidation())
		}
		switch {
		case tc.outcome == "passed":
			if res.Answer.IsError || rec.GetOutcome() != mcpreadyv1.OutcomeClass_OUTCOME_CLASS_SUCCESS {
				t.Fatalf("passed: %+v", res.Answer)
			}
		case tc.action == mcpreadyv1.SemanticFailureAction_SEMANTIC_FAILURE_ACTION_ANNOTATE:
			m, _ := res.Answer.Meta[MetaSemantic].(map[string]any)
			if res.Answer.IsError || m["valid"] != false || m["validator"] != "echo_any" || rec.GetOutcome() != mcpreadyv1.OutcomeClass_OUTCOME_CLASS_SUCCESS {
				t.Fatalf("annotate: %+v meta %v", res.Answer, res.Answer.Meta)
			}
		default:
			te, ok := ParseToolError(res.Answer)
			if !ok || te.Code != string(readiness.CodeSemanticInvalid) || te.Layer != "SEMANTIC" ||
				rec.GetOutcome() != mcpreadyv1.OutcomeClass_OUTCOME_CLASS_INVALID_RESULT || rec.GetFailedLayer() != mcpreadyv1.ReadinessLayer_READINESS_LAYER_SEMANTIC {
				t.Fatalf("withhold: %+v receipt %v/%v", res.Answer, rec.GetOutcome(), rec.GetFailedLayer())
			}
			if b, _ := json.Marshal(res.Answer); strings.Contains(string(b), `"echo":"hi"`) {
				t.Fatal("withheld result reached the AI agent")
			}
		}
	}
}

// recordSemantic says a semantic rejection is one, wrapped or not, and
// that nothing else is, and costs an answered call without validators
// (no verdict, no error) no allocation.
func TestRecordSemantic(t *testing.T) {
	f := &validate.SemanticFailure{Key: "k", Version: "1"}
	for name, tc := range map[string]struct {
		out  invoke.Outcome
		want bool
	}{
		"answered":  {invoke.Outcome{Result: &checked{}}, false},
		"failure":   {invoke.Outcome{Err: f}, true},
		"wrapped":   {invoke.Outcome{Err: fmt.Errorf("checking: %w", f)}, true},
		"other":     {invoke.Outcome{Err: errors.New("other")}, false},
		"validated": {invoke.Outcome{Result: &checked{sem: validate.SemanticVerdict{Outcome: "failed:k", Failure: f}}}, true},
	} {
		if got := recordSemantic(&mcpreadyv1.Receipt{}, tc.out); got != tc.want {
			t.Errorf("%s: %v, want %v", name, got, tc.want)
		}
	}
	if raceEnabled {
		return
	}
	rec, out := &mcpreadyv1.Receipt{}, invoke.Outcome{Class: mcpreadyv1.OutcomeClass_OUTCOME_CLASS_SUCCESS, Result: &checked{}}
	if n := testing.AllocsPerRun(100, func() { _ = recordSemantic(rec, out) }); n != 0 {
		t.Errorf("%v allocations for an answer without validators", n)
	}
}

// A semanticValidation key may name an input class (Policy.inputClasses):
// its validator runs on the calls in that class only, so a consequential
// class of input can carry checks the others do not.
func TestSemanticValidationPerInputClass(t *testing.T) {
	up := mcptest.New(t, mcptest.Options{})
	p := policy()
	p.InputClasses = []*mcpreadyv1.InputClassRule{{Name: "long-text", When: "size(args.text) > 5"}}
	pl, st, out := setup(t, p, map[string]*mcpreadyv1.RegistryEntry{"a": entry("test", up.URL)})
	sem, err := validate.CompileSemantic(map[string]string{"long-text": "size(result.echo) < 5"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	st.Checker = validate.NewChecker(validate.Rules{Semantic: sem})
	for i, tc := range []struct{ args, semantic string }{
		{`{"text":"hi"}`, ""},
		{`{"text":"a longer text"}`, "failed:long-text"},
	} {
		req := request("test/echo")
		req.Arguments = []byte(tc.args)
		pl.Call(context.Background(), st, req, newFake(t))
		if rec := out.recs[i]; rec.GetInputClass() != map[bool]string{true: "long-text"}[tc.semantic != ""] || rec.GetSemanticValidation() != tc.semantic {
			t.Fatalf("arguments %s: input class %q, semantic %q, want %q", tc.args, rec.GetInputClass(), rec.GetSemanticValidation(), tc.semantic)
		}
	}
}
