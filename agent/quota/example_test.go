package quota_test

import (
	"fmt"
	"time"

	"github.com/mcpready/mcpready/agent/quota"
)

// A local budget of 3 units per minute for one principal's use of one
// tool, used as the call pipeline uses it: a call is admitted while Used
// is under the limit and charged with Add once it ran. Another principal
// has a budget of its own, and a new window starts afresh.
func ExampleLedger() {
	const limit, window = 3, time.Minute
	l := quota.New()
	alice := quota.Key{Principal: "alice", Class: "dev", Server: "com.example/search", Tool: "search"}
	bob := quota.Key{Principal: "bob", Class: "dev", Server: "com.example/search", Tool: "search"}
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

	for i := 1; i <= 4; i++ {
		at := now.Add(time.Duration(i) * time.Second)
		if l.Used(alice, window, at) >= limit {
			fmt.Printf("call %d: refused, %d/%d used\n", i, l.Used(alice, window, at), limit)
			continue
		}
		fmt.Printf("call %d: ran, %d/%d used\n", i, l.Add(alice, 1, window, at), limit)
	}
	fmt.Println("bob:", l.Used(bob, window, now.Add(5*time.Second)))
	fmt.Println("alice, next window:", l.Used(alice, window, now.Add(window+time.Second)))
	// Output:
	// call 1: ran, 1/3 used
	// call 2: ran, 2/3 used
	// call 3: ran, 3/3 used
	// call 4: refused, 3/3 used
	// bob: 0
	// alice, next window: 0
}

// ParseRateLimit reads an upstream's RateLimit and RateLimit-Policy
// response fields, in the draft's current form and in its older one.
func ExampleParseRateLimit() {
	hints, err := quota.ParseRateLimit(`"default";r=0;t=30`, `"default";q=100;w=60`)
	fmt.Printf("%+v %v\n", hints, err)

	hints, err = quota.ParseRateLimit("limit=100, remaining=7, reset=12", "")
	fmt.Printf("%+v %v\n", hints, err)

	_, err = quota.ParseRateLimit(`"default";r=-1`, "")
	fmt.Println(err)
	// Output:
	// [{Policy:default Remaining:0 Reset:30s Known:true Quota:100 Window:1m0s}] <nil>
	// [{Policy: Remaining:7 Reset:12s Known:true Quota:100 Window:0s}] <nil>
	// quota: malformed RateLimit field: "-1" is not a non-negative integer of at most 15 digits
}

// Hints remembers which endpoints said their quota is spent, until the
// reset they gave; any later response without that clears the mark.
func ExampleHints() {
	h := quota.NewHints()
	const endpoint = "https://search.example/mcp"
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

	spent, _ := quota.ParseRateLimit(`"default";r=0;t=30`, "")
	h.Observe(endpoint, spent, now)
	fmt.Println(h.Exhausted(endpoint, now.Add(29*time.Second)), h.Exhausted(endpoint, now.Add(30*time.Second)))

	h.Observe(endpoint, spent, now)
	left, _ := quota.ParseRateLimit(`"default";r=50;t=30`, "")
	h.Observe(endpoint, left, now.Add(time.Second))
	fmt.Println(h.Exhausted(endpoint, now.Add(2*time.Second)))
	// Output:
	// true false
	// false
}
