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
