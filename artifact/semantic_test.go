package artifact_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/mcpready/mcpready/artifact"
)

func policyYAML(expr string) []byte {
	return []byte(`apiVersion: mcpready.dev/v1
kind: Policy
metadata:
  name: default
spec:
  inventory: ["*"]
  semanticValidation:
    quotes: ` + expr + `
`)
}

// A semanticValidation expression that does not compile, or does not yield
// a boolean, is refused at parse (so at apply, before anything is signed or
// stored), with the key and the position of the error.
func TestSemanticExpressionRefused(t *testing.T) {
	for _, tc := range []struct {
		expr       string
		line, col  int
		reasonPart string
	}{
		{`"size(result.items) >"`, 1, 21, "Syntax error"},
		{`"result.price + "`, 1, 16, ""},
		{`"unknown_var == 1"`, 1, 1, "undeclared reference"},
		{`"size(args)"`, 0, 0, "not bool"},
	} {
		_, err := artifact.Parse(policyYAML(tc.expr))
		var se *artifact.SemanticError
		if !errors.As(err, &se) || !errors.Is(err, artifact.ErrSemanticExpression) || !errors.Is(err, artifact.ErrInvalid) {
			t.Fatalf("%s: err %v, want a SemanticError", tc.expr, err)
		}
		if se.Key != "quotes" || se.Line != tc.line || (tc.col > 0 && se.Column != tc.col) || !strings.Contains(se.Reason, tc.reasonPart) {
			t.Errorf("%s: %+v (%v)", tc.expr, se, err)
		}
	}
	if _, err := artifact.Parse(policyYAML(`"size(result.items) > 0 && timestamp(result.asOf) > now - duration('1h') && result.currency == args.currency"`)); err != nil {
		t.Fatalf("valid expression refused: %v", err)
	}
	long := `"` + strings.Repeat("true && ", 600) + `true"`
	if _, err := artifact.Parse(policyYAML(long)); !errors.Is(err, artifact.ErrSemanticExpression) {
		t.Fatalf("oversized expression: %v", err)
	}
}

func FuzzCompileSemantic(f *testing.F) {
	f.Add("size(result.items) > 0")
	f.Add("result.a.b.c == args.x")
	f.Add("((((")
	f.Fuzz(func(t *testing.T, expr string) {
		_, err := artifact.CompileSemantic("k", expr)
		if err != nil && !errors.Is(err, artifact.ErrSemanticExpression) {
			t.Fatalf("untyped error %v", err)
		}
	})
}
