package readiness_test

import (
	"fmt"

	"github.com/mcpready/mcpready/readiness"
)

// The agent's decision applies its hard filters in a fixed order; a
// candidate's rejection names the step by number and name, as receipts
// and `mcpready explain` do.
func ExampleStepName() {
	for _, s := range readiness.Filters[:3] {
		fmt.Println(readiness.Number(s), readiness.StepName(s))
	}
	// Output:
	// 1 ELIGIBILITY
	// 2 TRUST
	// 3 RESIDENCY
}

// An auth class says how a call reached its upstream; Evidence that states
// one counts only for calls made the same way, and only these values are
// accepted in Evidence.
func ExampleIsAuthClass() {
	for _, c := range []string{readiness.AuthKeyless, readiness.AuthOAuth(readiness.GrantTokenExchange), "none"} {
		fmt.Println(c, readiness.IsAuthClass(c))
	}
	// Output:
	// keyless true
	// oauth:token_exchange true
	// none false
}
