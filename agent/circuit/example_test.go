package circuit_test

import (
	"fmt"
	"time"

	"github.com/mcpready/mcpready/agent/circuit"
)

// A breaker opens after a run of consecutive failures and refuses calls
// until its ejection ends; then it is half-open, and one success closes
// it. The caller passes the time in, so nothing here waits.
func Example() {
	set := circuit.NewSet(circuit.Config{ConsecutiveFailures: 3, BaseEjection: 30 * time.Second})
	key := circuit.Key("https://docs.example/mcp", "docs.lookup")
	t0 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

	fmt.Println("before:", set.State(key, t0), set.Allow(key, t0))
	for i := 0; i < 3; i++ { // three transport failures in a row
		set.Report(key, false, t0)
	}
	fmt.Println("after 3 failures:", set.State(key, t0), set.Allow(key, t0))

	t1 := t0.Add(30 * time.Second) // the ejection (30s) is over
	fmt.Println("30s later:", set.State(key, t1), set.Allow(key, t1))
	set.Report(key, true, t1) // the probe call succeeded
	fmt.Println("after a success:", set.State(key, t1), set.Allow(key, t1))

	// Breakers are per (endpoint, tool): the same tool elsewhere was never
	// affected.
	other := circuit.Key("https://mirror.example/mcp", "docs.lookup")
	fmt.Println("other endpoint:", set.State(other, t0))
	// Output:
	// before: closed true
	// after 3 failures: open false
	// 30s later: half-open true
	// after a success: closed true
	// other endpoint: closed
}

// Each consecutive ejection lasts longer (base × count, capped at max): a
// failure of the half-open probe ejects the key again, for twice as long.
func ExampleSet_Report() {
	set := circuit.NewSet(circuit.Config{ConsecutiveFailures: 1, BaseEjection: 10 * time.Second, MaxEjection: time.Minute})
	key := circuit.Key("https://tickets.example/mcp", "create")
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

	set.Report(key, false, now)
	fmt.Println("ejections:", set.Ejections(key), "open at +9s:", set.State(key, now.Add(9*time.Second)))

	now = now.Add(10 * time.Second) // half-open; the probe fails
	set.Report(key, false, now)
	fmt.Println("ejections:", set.Ejections(key),
		"open at +19s:", set.State(key, now.Add(19*time.Second)),
		"at +20s:", set.State(key, now.Add(20*time.Second)))
	// Output:
	// ejections: 1 open at +9s: open
	// ejections: 2 open at +19s: open at +20s: half-open
}

// While half-open, a breaker re-admits the first call and then only a
// ReadmitRatio share of calls, so a recovering endpoint is not flooded.
func ExampleSet_Allow() {
	set := circuit.NewSet(circuit.Config{ConsecutiveFailures: 1, BaseEjection: time.Second, ReadmitRatio: 0.25})
	key := circuit.Key("https://search.example/mcp", "search")
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	set.Report(key, false, now)

	now = now.Add(time.Second) // half-open
	admitted := ""
	for i := 0; i < 8; i++ {
		if set.Allow(key, now) {
			admitted += "y"
		} else {
			admitted += "."
		}
	}
	fmt.Println(set.State(key, now), admitted)
	// Output:
	// half-open y...y...
}

// A counted failure makes the route's failure domains suspect for one base
// ejection time, so that routes sharing them rank below the others.
func ExampleSet_MarkSuspect() {
	set := circuit.NewSet(circuit.Config{BaseEjection: 30 * time.Second})
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

	set.MarkSuspect([]string{"aws:eu-west-1"}, now)
	fmt.Println(set.Suspect("aws:eu-west-1", now.Add(29*time.Second)),
		set.Suspect("gcp:europe-west4", now),
		set.Suspect("aws:eu-west-1", now.Add(30*time.Second)))
	// Output:
	// true false false
}

// The zero Config takes the documented defaults: five consecutive failures
// open a breaker, for 30 seconds.
func ExampleNewSet() {
	set := circuit.NewSet(circuit.Config{})
	key := circuit.Key("https://docs.example/mcp", "docs.lookup")
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

	for i := 1; i <= 5; i++ {
		set.Report(key, false, now)
		fmt.Printf("%d: %v\n", i, set.State(key, now))
	}
	fmt.Println("+29s:", set.State(key, now.Add(29*time.Second)))
	fmt.Println("+30s:", set.State(key, now.Add(30*time.Second)))
	// Output:
	// 1: closed
	// 2: closed
	// 3: closed
	// 4: closed
	// 5: open
	// +29s: open
	// +30s: half-open
}
