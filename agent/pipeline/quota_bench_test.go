package pipeline

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/mcpready/mcpready/agent/circuit"
	"github.com/mcpready/mcpready/agent/decide"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
)

// BenchmarkDecideBudget is the decision with quotas and failure domains:
// a call to a class of 50 members (the shape of decide's BenchmarkDecide:
// fresh evidence with distinct latencies, five operator and two cloud
// failure domains, one operator suspect, one breaker open), then the step-7
// checks the pipeline adds, as Call runs them: the local budget per
// principal class, tool and tenant (maxQuotaUnits per quotaWindow, over a
// ledger holding 1,000 other principals' windows) and the workflow's cost
// ceiling from declared prices. Nothing is refused, so every route is
// checked. Target p99 < 20 µs (issue 14).
func BenchmarkDecideBudget(b *testing.B) {
	now := time.Now()
	p := policy()
	p.Evidence = &mcpreadyv1.EvidenceRules{AcceptedIssuers: []string{"prober"},
		MaxAge:    map[string]*durationpb.Duration{"invocation": durationpb.New(30 * time.Minute)},
		OnUnknown: mcpreadyv1.UnknownEvidenceAction_UNKNOWN_EVIDENCE_ACTION_ALLOW}
	p.Cost = &mcpreadyv1.CostRules{MaxQuotaUnits: 1 << 40, QuotaWindow: durationpb.New(time.Hour), MaxCostPerWorkflow: 1e6}
	cls := &mcpreadyv1.EquivalenceClass{Name: "search", FallbackAllowed: true}
	in := decide.Inputs{PolicyVersion: "1", Policy: p, Entries: map[string]*mcpreadyv1.RegistryEntry{},
		Declarations: map[string]*mcpreadyv1.Declaration{}, Evidence: map[string]*mcpreadyv1.Evidence{}}
	for i := range 50 {
		server, ep := fmt.Sprintf("com.vendor%02d/search", i), fmt.Sprintf("https://s%02d.example/mcp", i)
		e := entry(server, ep)
		e.Identity.ToolName = "search"
		e.Region = "eu"
		e.FailureDomains = []string{fmt.Sprintf("operator:op%d", i%5), fmt.Sprintf("cloud:r%d", i%2)}
		in.Entries[fmt.Sprintf("search-%02d", i)] = e
		in.Declarations[server] = &mcpreadyv1.Declaration{ServerName: server,
			Pricing: &mcpreadyv1.DeclaredPricing{Amount: "0.001", Currency: "EUR"},
			Quota:   &mcpreadyv1.DeclaredQuota{Unit: "request", PartitionKeys: []string{"tenant"}}}
		in.Evidence[fmt.Sprintf("ev-%02d", i)] = &mcpreadyv1.Evidence{
			Provenance: &mcpreadyv1.Provenance{Issuer: "prober"},
			Subject:    &mcpreadyv1.Subject{ServerName: server, ToolName: "search", ServerVersion: "1.0.0", Endpoint: ep},
			ObservedAt: timestamppb.New(now.Add(-time.Minute)), ExpiresAt: timestamppb.New(now.Add(time.Hour)),
			Sample:  &mcpreadyv1.Sample{Attempted: 100, Eligible: 100},
			Rates:   []*mcpreadyv1.LayerRate{{Layer: mcpreadyv1.ReadinessLayer_READINESS_LAYER_INVOCATION, Successes: 99, Denominator: 100}},
			Latency: &mcpreadyv1.Latency{P50Ms: float64(10 + i%17), P99Ms: float64(40 + i%23), Count: 100},
		}
		cls.Members = append(cls.Members, server+"/search")
	}
	p.EquivalenceClasses = append(p.EquivalenceClasses, cls)
	p.SideEffects = append(p.SideEffects, &mcpreadyv1.SideEffectRule{Match: "*/search", Assigned: mcpreadyv1.SideEffectClass_SIDE_EFFECT_CLASS_READ_ONLY})
	snap, err := decide.NewSnapshot(in)
	if err != nil {
		b.Fatal(err)
	}
	cs := circuit.NewSet(circuit.Config{ConsecutiveFailures: 1})
	cs.Report(circuit.Key("https://s07.example/mcp", "search"), false, now)
	cs.MarkSuspect([]string{"operator:op2"}, now)
	pl, st := New(Options{Region: "eu", Now: func() time.Time { return now }}), State{Decide: snap, Circuits: cs}
	c := Caller{Name: "c", Principal: "dev", Tenant: "t1", Workflow: "wf-1"}
	op := func() *decide.RefusalError {
		dr := pl.request(&st, c, "search", now)
		d := st.Decide.Decide(dr, st.Health())
		releaseGuard(&dr)
		if d.Refusal != nil {
			return &decide.RefusalError{Reason: d.Refusal.Error()}
		}
		re := pl.quotaFilter(&d, c, now)
		if re == nil {
			re = pl.costFilter(&d, c, now)
		}
		return re
	}
	// The shape: 50 candidates, several routes, both checks on, nothing refused.
	dr := pl.request(&st, c, "search", now)
	d := st.Decide.Decide(dr, st.Health())
	releaseGuard(&dr)
	if d.Refusal != nil || len(d.Candidates) != 50 || len(d.Routes) < 2 || d.QuotaLimit <= 0 || d.WorkflowCostCeiling <= 0 || !d.Routes[0].QuotaByTenant {
		b.Fatalf("setup: refusal %v, %d candidates, %d routes, quota %d, ceiling %g", d.Refusal, len(d.Candidates), len(d.Routes), d.QuotaLimit, d.WorkflowCostCeiling)
	}
	for _, r := range d.Routes { // this principal's windows, and 1,000 others'
		pl.quota.Add(quotaKey(c, &r), 1, d.QuotaWindow, now)
	}
	for i := range 1000 {
		other := c
		other.Principal = fmt.Sprintf("p%d", i)
		pl.quota.Add(quotaKey(other, &d.Routes[i%len(d.Routes)]), 1, d.QuotaWindow, now)
	}
	pl.quota.Add(workflowKey(c), micro(0.5), workflowWindow, now)
	if re := op(); re != nil {
		b.Fatalf("setup: refused: %v", re.Reason)
	}
	samples := make([]time.Duration, 0, min(b.N, 1<<20))
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		_ = op()
		if el := time.Since(start); len(samples) < cap(samples) {
			samples = append(samples, el)
		}
	}
	b.StopTimer()
	slices.Sort(samples)
	at := func(q float64) float64 { return float64(samples[int(q*float64(len(samples)-1))].Nanoseconds()) }
	b.ReportMetric(at(0.50), "p50-ns")
	b.ReportMetric(at(0.99), "p99-ns")
}
