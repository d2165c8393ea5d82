package readiness

import (
	"testing"

	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
)

// TestTermsCoverEnums: every step, action and outcome the proto defines has
// exactly one described term, and no term is named twice.
func TestTermsCoverEnums(t *testing.T) {
	seen := map[Kind]map[int32]bool{}
	names := map[Kind]map[string]bool{}
	for _, tm := range Terms() {
		if tm.Description == "" || tm.Name == "" {
			t.Errorf("%s %q has no name or description", tm.Kind, tm.Name)
		}
		if names[tm.Kind] == nil {
			names[tm.Kind], seen[tm.Kind] = map[string]bool{}, map[int32]bool{}
		}
		if names[tm.Kind][tm.Name] {
			t.Errorf("%s %q listed twice", tm.Kind, tm.Name)
		}
		names[tm.Kind][tm.Name] = true
		if tm.Kind != KindCode {
			seen[tm.Kind][tm.Value] = true
		}
	}
	for kind, values := range map[Kind]map[int32]string{
		KindStep: mcpreadyv1.DecisionStep_name, KindAction: mcpreadyv1.ActionKind_name, KindOutcome: mcpreadyv1.OutcomeClass_name,
	} {
		for v, n := range values {
			if v != 0 && !seen[kind][v] {
				t.Errorf("%s %s has no term", kind, n)
			}
		}
	}
}

func TestActionString(t *testing.T) {
	for a, want := range map[*mcpreadyv1.Action]string{
		NewAction(ActionCircuitOpen, "docs-a"):                                 "circuit-open:docs-a",
		NewAction(ActionFallback, "docs-b"):                                    "fallback:docs-b",
		NewAction(ActionRetryBudgetExhausted, ""):                              "retry-budget-exhausted",
		{Kind: ActionRetryConditionNotAllowed, Entry: "a", Detail: "http-502"}: "retry-condition-not-allowed:http-502",
	} {
		if got := ActionString(a); got != want {
			t.Errorf("ActionString(%v) = %q, want %q", a, got, want)
		}
	}
	if Number(StepResolve) != 0 || Number(StepHealth) != 6 {
		t.Fatal("step numbers")
	}
}

// The auth classes agents record are the vocabulary evidence may state.
func TestIsAuthClass(t *testing.T) {
	for s, want := range map[string]bool{
		AuthKeyless: true, AuthBearer: true, AuthStdio: true, AuthOAuth(GrantClientCredentials): true, AuthOAuth(GrantIDJAG): true,
		"": false, "none": false, "unclassified": false, "oauth:": false, "oauth:password": false, "OAUTH:" + GrantTokenExchange: false,
	} {
		if got := IsAuthClass(s); got != want {
			t.Errorf("IsAuthClass(%q) = %v, want %v", s, got, want)
		}
	}
}
