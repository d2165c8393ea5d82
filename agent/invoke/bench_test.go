package invoke

import (
	"context"
	"testing"
	"time"

	"github.com/mcpready/mcpready/agent/circuit"
	"github.com/mcpready/mcpready/agent/decide"
)

// BenchmarkRun is the agent's common call: one read-only route with one
// failure domain, no hedge, circuits and a retry budget on,
// and an attempt that succeeds at once, so what it measures is Run's own
// per-call cost (ns/op, allocs/op).
func BenchmarkRun(b *testing.B) {
	r := route("a", true)
	r.Domains = "operator:a"
	d := decision(r)
	cs := circuit.NewSet(circuit.Config{})
	cs.Report(r.CircuitKey, true, time.Now()) // a known, closed key
	o := Options{Circuits: cs, Budget: NewBudget(0, 0), Now: time.Now}
	ok := func(context.Context, decide.Route, int) Outcome { return Outcome{Class: success, Sent: true} }
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if res := Run(ctx, d, ok, o); res.Final.Class != success || len(res.Attempts) != 1 {
			b.Fatalf("run: %v, %d attempts", res.Final.Class, len(res.Attempts))
		}
	}
}

// A call answered on its first attempt costs its runner (the first
// attempt's record allocated with it), the attempt's context with its
// deadline and timer, and the failure domains: no record of its own.
func TestRunAllocations(t *testing.T) {
	r := route("a", true)
	r.Domains = "operator:a"
	d := decision(r)
	o := Options{Now: time.Now}
	ok := func(context.Context, decide.Route, int) Outcome { return Outcome{Class: success, Sent: true} }
	ctx := context.Background()
	n := testing.AllocsPerRun(100, func() {
		res := Run(ctx, d, ok, o)
		if a := res.Attempts; res.Final.Class != success || len(a) != 1 || a[0].GetNumber() != 1 || a[0].GetEntry() != "a" ||
			a[0].GetStartedAt() == nil || a[0].GetLatency() == nil || a[0].GetOutcome() != success {
			t.Fatalf("run: %v, attempts %v", res.Final.Class, a)
		}
	})
	if n > 6 {
		t.Errorf("%v allocations, want at most 6", n)
	}
}
