package artifact

import (
	"errors"
	"strings"
	"testing"

	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
)

// Every inputClasses rule is checked at apply: a name outside the
// vocabulary, a bad tools pattern, a missing, non-compiling or non-bool
// expression is refused with the rule's index and field.
func TestInputClassesChecked(t *testing.T) {
	good := &mcpreadyv1.InputClassRule{Name: "bulk", Tools: "com.example/*", When: "size(args.ids) > 100"}
	for _, c := range []struct {
		rule *mcpreadyv1.InputClassRule
		want string // "" accepted, else a fragment of the error
	}{
		{good, ""},
		{&mcpreadyv1.InputClassRule{Name: "large-query.v2", When: `has(args.q) && size(args.q) > 1000 && tool.startsWith("docs/")`}, ""},
		{&mcpreadyv1.InputClassRule{Name: "Bulk", When: "true"}, "inputClasses[1].name"},
		{&mcpreadyv1.InputClassRule{Name: "", When: "true"}, "inputClasses[1].name"},
		{&mcpreadyv1.InputClassRule{Name: "bulk", Tools: "a\x00b", When: "true"}, "inputClasses[1].tools"},
		{&mcpreadyv1.InputClassRule{Name: "bulk"}, "inputClasses[1].when: an expression is required"},
		{&mcpreadyv1.InputClassRule{Name: "bulk", When: "size(args.ids) >"}, "inputClasses[1].when: line 1 column"},
		{&mcpreadyv1.InputClassRule{Name: "bulk", When: "size(args)"}, "yields int, not bool"},
		{&mcpreadyv1.InputClassRule{Name: "bulk", When: "result.ok"}, "undeclared reference to 'result'"},
		{&mcpreadyv1.InputClassRule{Name: "bulk", When: strings.Repeat("x", MaxSemanticExpression+1)}, "bytes, at most"},
	} {
		rules := []*mcpreadyv1.InputClassRule{good}
		if c.rule != good {
			rules = append(rules, c.rule)
		}
		err := New(KindPolicy, "p", &mcpreadyv1.Policy{InputClasses: rules}).Validate()
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%+v refused: %v", c.rule, err)
		case c.want != "" && (err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%+v: got %v, want an ErrInvalid naming %q", c.rule, err, c.want)
		}
	}
}

// Compiling an input class rule never panics, and every refusal is an
// ErrInvalid.
func FuzzCompileInputClass(f *testing.F) {
	f.Add("bulk", "a/*", "size(args.ids) > 2")
	f.Add("x", "", "tool == 'a/b' && args.q.startsWith('x')")
	f.Add("", "[", "((((")
	f.Fuzz(func(t *testing.T, name, tools, when string) {
		_, err := CompileInputClass(0, &mcpreadyv1.InputClassRule{Name: name, Tools: tools, When: when})
		if err != nil && !errors.Is(err, ErrInvalid) {
			t.Fatalf("untyped error %v", err)
		}
	})
}
