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
