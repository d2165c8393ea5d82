package decide

// Input classes (Policy.inputClasses): which class of arguments a call to
// a route is in. Evidence counts only for calls in the input class its
// subject names, evidence naming none only for calls in none
// (freshEvidence); the route carries the class to the receipt
// (Route.InputClass). Nothing here runs for a policy without input
// classes.

import (
	"encoding/json"
	"fmt"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/interpreter"

	"github.com/mcpready/mcpready/artifact"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
)

// anyInputClass is the input class a listing admits with for an entry
// with input class rules: evidence of any class counts, since a call in
// that class may follow. No class is called so (artifact.ValidInputClass).
const anyInputClass = "*"

// inputClassCostLimit bounds one expression's evaluation (CEL cost units):
// one that would run longer matches nothing.
const inputClassCostLimit = 10_000

// inputClass is one compiled Policy.inputClasses rule.
type inputClass struct {
	name, tools string
	prg         cel.Program
}

// compileInputClasses compiles the policy's rules and gives each entry the
// indexes of the rules whose tools pattern matches its "<server>/<tool>".
func (s *Snapshot) compileInputClasses(rules []*mcpreadyv1.InputClassRule) error {
	if len(rules) == 0 {
		return nil
	}
	env, err := artifact.InputClassEnv()
	if err != nil {
		return err
	}
	for i, r := range rules {
		ast, err := artifact.CompileInputClass(i, r)
		if err != nil {
			return fmt.Errorf("decide: %w", err)
		}
		prg, err := env.Program(ast, cel.EvalOptions(cel.OptOptimize), cel.CostLimit(inputClassCostLimit))
		if err != nil {
			return fmt.Errorf("decide: inputClasses[%d]: %w", i, err)
		}
		s.inputClasses = append(s.inputClasses, inputClass{name: r.GetName(), tools: r.GetTools(), prg: prg})
	}
	for _, e := range s.entries {
		for i, c := range s.inputClasses {
			if c.tools == "" || match(c.tools, e.key) {
				e.inputRules = append(e.inputRules, i)
			}
		}
	}
	return nil
}

// classArgs are a call's arguments as input class expressions read them,
// decoded once, when the first entry with input class rules is met.
type classArgs struct {
	object map[string]any
	done   bool
}

// inputClassOf is the input class of a call with arguments raw to entry e:
// the name of the first of e's rules whose expression yields true, "" for
// none.
func (s *Snapshot) inputClassOf(e *entry, args *classArgs, raw []byte) string {
	if len(e.inputRules) == 0 {
		return ""
	}
	if !args.done {
		args.done, args.object = true, decodeObject(raw)
	}
	act := classActivation{args: args.object, tool: e.key}
	for _, i := range e.inputRules {
		if s.inputClasses[i].holds(act) {
			return s.inputClasses[i].name
		}
	}
	return ""
}

// decodeObject decodes arguments that are a JSON object (an empty map for
// anything else), numbers as float64, as CEL reads them.
func decodeObject(b []byte) map[string]any {
	var m map[string]any
	if json.Unmarshal(b, &m) != nil || m == nil {
		return map[string]any{}
	}
	return m
}

// holds evaluates the rule; an evaluation that fails (a missing field, a
// type mismatch, the cost limit, a panic) or yields no bool does not hold.
func (c *inputClass) holds(act classActivation) (ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	out, _, err := c.prg.Eval(act)
	if err != nil {
		return false
	}
	b, _ := out.Value().(bool)
	return b
}

// classActivation resolves an input class expression's variables.
type classActivation struct {
	args map[string]any
	tool string
}

func (a classActivation) ResolveName(name string) (any, bool) {
	switch name {
	case "args":
		return a.args, true
	case "tool":
		return types.String(a.tool), true
	}
	return nil, false
}

func (classActivation) Parent() interpreter.Activation { return nil }
