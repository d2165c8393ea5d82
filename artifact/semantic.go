package artifact

// Semantic validators (Policy.semanticValidation): the one CEL environment
// they are written against, and the apply-time check that every expression
// compiles to a boolean. The agent evaluates them (agent/validate); this
// file only compiles.

import (
	"errors"
	"fmt"
	"sort"
	"sync"

	"github.com/google/cel-go/cel"

	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
)

// ErrSemanticExpression is wrapped by every error about a
// semanticValidation expression (a *SemanticError).
var ErrSemanticExpression = errors.New("semantic validation expression")

// MaxSemanticExpression bounds one expression's length in bytes.
const MaxSemanticExpression = 4096

// SemanticError says which validator failed to compile, and where.
type SemanticError struct {
	// Key is the semanticValidation key (input class or tool pattern).
	Key string
	// Line (1-based) and Column (1-based) of the first error; 0 when the
	// error has no position (e.g. the result is not a boolean).
	Line, Column int
	Reason       string
}

func (e *SemanticError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("semanticValidation[%q]: line %d column %d: %s", e.Key, e.Line, e.Column, e.Reason)
	}
	return fmt.Sprintf("semanticValidation[%q]: %s", e.Key, e.Reason)
}

// Unwrap makes errors.Is(err, ErrSemanticExpression) and ErrInvalid true.
func (e *SemanticError) Unwrap() []error { return []error{ErrSemanticExpression, ErrInvalid} }

var semanticEnv = sync.OnceValues(func() (*cel.Env, error) {
	return cel.NewEnv(
		cel.Variable("args", cel.MapType(cel.StringType, cel.DynType)),
		cel.Variable("result", cel.DynType),
		cel.Variable("now", cel.TimestampType),
		cel.Variable("tool", cel.StringType),
	)
})

// SemanticEnv is the CEL environment of semantic validators: args (the
// call's arguments, a map), result (the structured result, null when
// absent), now (a timestamp) and tool ("<server>/<tool>").
func SemanticEnv() (*cel.Env, error) { return semanticEnv() }

// CompileSemantic compiles one validator expression, which must yield a
// boolean. Errors are *SemanticError with the position of the first issue.
func CompileSemantic(key, expr string) (*cel.Ast, error) {
	if len(expr) > MaxSemanticExpression {
		return nil, &SemanticError{Key: key, Reason: fmt.Sprintf("expression is %d bytes, at most %d", len(expr), MaxSemanticExpression)}
	}
	env, err := SemanticEnv()
	if err != nil {
		return nil, &SemanticError{Key: key, Reason: "CEL environment: " + err.Error()}
	}
	ast, iss := env.Compile(expr)
	if iss.Err() != nil {
		se := &SemanticError{Key: key}
		se.Line, se.Column, se.Reason = firstIssue(iss)
		return nil, se
	}
	if t := ast.OutputType(); !t.IsExactType(cel.BoolType) && !t.IsExactType(cel.DynType) {
		return nil, &SemanticError{Key: key, Reason: "expression yields " + t.String() + ", not bool"}
	}
	return ast, nil
}

// firstIssue is the position (1-based; 0 when it has none) and message
// of the first issue of a failed compilation.
func firstIssue(iss *cel.Issues) (line, column int, reason string) {
	errs := iss.Errors()
	if len(errs) == 0 {
		return 0, 0, iss.Err().Error()
	}
	if loc := errs[0].Location; loc != nil && loc.Line() > 0 {
		line, column = loc.Line(), loc.Column()+1
	}
	return line, column, errs[0].Message
}

// checkSemantic compiles every semanticValidation expression of a Policy
// spec (sorted by key, so the first error is stable).
func checkSemantic(o *Object) error {
	p, ok := o.Spec.(*mcpreadyv1.Policy)
	if !ok || len(p.GetSemanticValidation()) == 0 {
		return nil
	}
	keys := make([]string, 0, len(p.GetSemanticValidation()))
	for k := range p.GetSemanticValidation() {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if k == "" {
			return &SemanticError{Key: k, Reason: "the key must name an input class or a tool pattern"}
		}
		if _, err := CompileSemantic(k, p.GetSemanticValidation()[k]); err != nil {
			return err
		}
	}
	return nil
}
