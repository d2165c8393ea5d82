package decide

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mcpready/mcpready/agent/circuit"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
)

// benchInputs: one class "search" with 50 members on 50 servers (each with
// fresh evidence and distinct latency), plus 200 noise entries in other
// classes and exact tools, and a policy with residency, scopes and
// principal rules, so every filter runs for every candidate. The members
// sit in five failure domains (operators), one of them suspect in
// benchSetup, so domain ranking and suspicion run too.
func benchInputs() Inputs {
	in := fixture()
	cls := &mcpreadyv1.EquivalenceClass{Name: "search", FallbackAllowed: true}
	for i := 0; i < 50; i++ {
		server := fmt.Sprintf("com.vendor%02d/search", i)
		ep := fmt.Sprintf("https://s%02d.example/mcp", i)
		name := fmt.Sprintf("search-%02d", i)
		in.Entries[name] = newRegEntry(server, "search", ep, "eu")
		in.Entries[name].FailureDomains = []string{fmt.Sprintf("operator:op%d", i%5), fmt.Sprintf("cloud:r%d", i%2)}
		cls.Members = append(cls.Members, server+"/search")
		in.Evidence["ev-"+name] = evidence(server, "search", ep, float64(10+i%17), float64(40+i%23), t0.Add(-time.Minute))
	}
	for i := 0; i < 200; i++ {
		server := fmt.Sprintf("com.noise%03d/tools", i)
		in.Entries[fmt.Sprintf("noise-%03d", i)] = newRegEntry(server, fmt.Sprintf("t%d", i%7), fmt.Sprintf("https://n%03d.example/mcp", i), "eu")
	}
	in.Policy.EquivalenceClasses = append(in.Policy.EquivalenceClasses, cls)
	in.Policy.Principals[0].Allow = append(in.Policy.Principals[0].Allow, "search")
	in.Policy.SideEffects = append(in.Policy.SideEffects, &mcpreadyv1.SideEffectRule{Match: "*/search", Assigned: readOnly})
	in.Policy.Residency = &mcpreadyv1.ResidencyRules{AllowedRegions: []string{"eu", "us"},
		AllowedDataClasses: []mcpreadyv1.DataAccessClass{mcpreadyv1.DataAccessClass_DATA_ACCESS_CLASS_PUBLIC}}
	return in
}

func benchSetup(b *testing.B) (*Snapshot, Request, *circuit.Set) {
	s := snap(b, benchInputs())
	cs := circuit.NewSet(circuit.Config{ConsecutiveFailures: 1})
	// One open breaker and some known keys so lookups hit real state.
	cs.Report(circuit.Key("https://s07.example/mcp", "search"), false, t0)
	cs.MarkSuspect([]string{"operator:op2"}, t0)
	for i := 0; i < 50; i += 3 {
		cs.Report(circuit.Key(fmt.Sprintf("https://s%02d.example/mcp", i), "search"), true, t0)
	}
	req := baseReq()
	req.Tool = "search"
	d := s.Decide(req, cs)
	if d.Refusal != nil || len(d.Candidates) != 50 || len(d.Routes) != 4 {
		b.Fatalf("setup: refusal %v, %d candidates, %d routes", d.Refusal, len(d.Candidates), len(d.Routes))
	}
	return s, req, cs
}

// reportPercentiles adds p50/p99 (ns) from per-op samples.
func reportPercentiles(b *testing.B, samples []time.Duration) {
	if len(samples) == 0 {
		return
	}
	slices.Sort(samples)
	at := func(q float64) float64 { return float64(samples[int(q*float64(len(samples)-1))].Nanoseconds()) }
	b.ReportMetric(at(0.50), "p50-ns")
	b.ReportMetric(at(0.99), "p99-ns")
}

// reportCPU adds the process CPU time per op (includes GC and the timing
// calls themselves), which run-queue waits on a busy machine do not inflate.
func reportCPU(b *testing.B, cpu0 time.Duration) {
	if cpu := processCPU() - cpu0; cpu > 0 {
		b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
	}
}

const maxSamples = 1 << 20

// BenchmarkDecide: policy + routing over a 50-member class (target p99 <
// 20µs). The serial run times each op; the parallel run (GOMAXPROCS
// goroutines sharing one snapshot and breaker set) shows there is no lock
// contention.
func BenchmarkDecide(b *testing.B) {
	b.Run("serial", func(b *testing.B) {
		s, req, cs := benchSetup(b)
		timeSerial(b, func() { _ = s.Decide(req, cs) })
	})
	// exact: a one-candidate, one-route decision (an exact tool), the
	// shape of the agent's proxy-overhead benchmark call.
	b.Run("exact", func(b *testing.B) {
		s := snap(b, fixture())
		cs := circuit.NewSet(circuit.Config{})
		req := baseReq()
		req.Tool = "com.example/docs/docs.lookup"
		if d := s.Decide(req, cs); d.Refusal != nil || len(d.Routes) != 1 {
			b.Fatalf("setup: refusal %v, %d routes", d.Refusal, len(d.Routes))
		}
		timeSerial(b, func() { _ = s.Decide(req, cs) })
	})
	b.Run("parallel", func(b *testing.B) {
		s, req, cs := benchSetup(b)
		var mu sync.Mutex
		var all []time.Duration
		b.ReportAllocs()
		b.ResetTimer()
		cpu0 := processCPU()
		b.RunParallel(func(pb *testing.PB) {
			local := make([]time.Duration, 0, 4096)
			for pb.Next() {
				start := time.Now()
				d := s.Decide(req, cs)
				el := time.Since(start)
				if len(local) < maxSamples/8 {
					local = append(local, el)
				}
				_ = d
			}
			mu.Lock()
			all = append(all, local...)
			mu.Unlock()
		})
		b.StopTimer()
		reportCPU(b, cpu0)
		reportPercentiles(b, all)
	})
}
