package artifact

// Input classes (Policy.inputClasses): the CEL environment their
// expressions are written against, and the apply-time check of every rule.
// The agent classifies calls (agent/decide); this file only compiles.

import (
	"fmt"
	"regexp"
	"sync"

	"github.com/google/cel-go/cel"

	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
)

// inputClassName is what an input class may be called.
var inputClassName = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)

var inputClassEnv = sync.OnceValues(func() (*cel.Env, error) {
	return cel.NewEnv(
		cel.Variable("args", cel.MapType(cel.StringType, cel.DynType)),
		cel.Variable("tool", cel.StringType),
	)
})

// InputClassNames says, for error messages, which names ValidInputClass
// accepts.
const InputClassNames = "1-63 of a-z, 0-9, '.', '_' and '-', starting with a letter or digit"

// ValidInputClass reports whether name is a name Policy.inputClasses
// accepts (InputClassNames).
func ValidInputClass(name string) bool { return inputClassName.MatchString(name) }

// InputClassEnv is the CEL environment of input class expressions: args
// (the call's arguments, a map) and tool ("<server>/<tool>").
func InputClassEnv() (*cel.Env, error) { return inputClassEnv() }

// CompileInputClass compiles rule i of Policy.inputClasses: its name, tools
// pattern and expression (which must yield a bool). Errors wrap ErrInvalid
// and name the rule and field.
func CompileInputClass(i int, r *mcpreadyv1.InputClassRule) (*cel.Ast, error) {
	if !ValidInputClass(r.GetName()) {
		return nil, fmt.Errorf("%w: inputClasses[%d].name: %q is not %s", ErrInvalid, i, r.GetName(), InputClassNames)
	}
	if r.GetTools() != "" {
		if reason, ok := checkPattern(r.GetTools()); !ok {
			return nil, fmt.Errorf("%w: inputClasses[%d].tools: %s", ErrInvalid, i, reason)
		}
	}
	expr := r.GetWhen()
	switch {
	case expr == "":
		return nil, fmt.Errorf("%w: inputClasses[%d].when: an expression is required (a class of every call says nothing evidence does not)", ErrInvalid, i)
	case len(expr) > MaxSemanticExpression:
		return nil, fmt.Errorf("%w: inputClasses[%d].when: expression is %d bytes, at most %d", ErrInvalid, i, len(expr), MaxSemanticExpression)
	}
	env, err := InputClassEnv()
	if err != nil {
		return nil, fmt.Errorf("%w: CEL environment: %w", ErrInvalid, err)
	}
	ast, iss := env.Compile(expr)
	if iss.Err() != nil {
		line, column, reason := firstIssue(iss)
		if line > 0 {
			reason = fmt.Sprintf("line %d column %d: %s", line, column, reason)
		}
		return nil, fmt.Errorf("%w: inputClasses[%d].when: %s", ErrInvalid, i, reason)
	}
	if t := ast.OutputType(); !t.IsExactType(cel.BoolType) && !t.IsExactType(cel.DynType) {
		return nil, fmt.Errorf("%w: inputClasses[%d].when: expression yields %s, not bool", ErrInvalid, i, t)
	}
	return ast, nil
}

// checkInputClasses compiles every inputClasses rule of a Policy spec, in
// order.
func checkInputClasses(o *Object) error {
	p, ok := o.Spec.(*mcpreadyv1.Policy)
	if !ok {
		return nil
	}
	for i, r := range p.GetInputClasses() {
		if _, err := CompileInputClass(i, r); err != nil {
			return err
		}
	}
	return nil
}
