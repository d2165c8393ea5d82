package decide_test

import (
	"errors"
	"fmt"
	"log"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/mcpready/mcpready/agent/circuit"
	"github.com/mcpready/mcpready/agent/decide"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/readiness"
)

var now = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

// entry is a qualified registry entry of one tool on one endpoint.
func entry(server, tool, endpoint string) *mcpreadyv1.RegistryEntry {
	return &mcpreadyv1.RegistryEntry{
		Identity: &mcpreadyv1.ToolIdentity{ServerName: server, ServerVersion: "1.0.0", ToolName: tool, Endpoint: endpoint},
		State:    mcpreadyv1.LifecycleState_LIFECYCLE_STATE_QUALIFIED,
	}
}

// evidence is a prober's recent observation of one tool, with its latency.
func evidence(server, tool, endpoint string, p50, p99 float64) *mcpreadyv1.Evidence {
	return &mcpreadyv1.Evidence{
		Provenance: &mcpreadyv1.Provenance{Issuer: "prober"},
		Subject:    &mcpreadyv1.Subject{ServerName: server, ServerVersion: "1.0.0", ToolName: tool, Endpoint: endpoint},
		ObservedAt: timestamppb.New(now.Add(-5 * time.Minute)),
		ExpiresAt:  timestamppb.New(now.Add(time.Hour)),
		Sample:     &mcpreadyv1.Sample{Attempted: 100, Eligible: 100},
		Rates:      []*mcpreadyv1.LayerRate{{Layer: mcpreadyv1.ReadinessLayer_READINESS_LAYER_INVOCATION, Successes: 99, Denominator: 100}},
		Latency:    &mcpreadyv1.Latency{P50Ms: p50, P99Ms: p99, Count: 100},
	}
}

// inputs are a small verified configuration: a capability docs_lookup
// served by two approved servers, a look-alike server offering a tool of
// the same name, and a policy that lets developers (not interns) call the
// capability.
func inputs() decide.Inputs {
	return decide.Inputs{
		PolicyName: "default", PolicyVersion: "v7",
		Policy: &mcpreadyv1.Policy{
			Inventory: []string{"*"},
			Evidence: &mcpreadyv1.EvidenceRules{AcceptedIssuers: []string{"prober"},
				MaxAge: map[string]*durationpb.Duration{"invocation": durationpb.New(30 * time.Minute)}},
			SideEffects: []*mcpreadyv1.SideEffectRule{{Match: "*/docs.lookup", Assigned: mcpreadyv1.SideEffectClass_SIDE_EFFECT_CLASS_READ_ONLY}},
			Deadline:    durationpb.New(10 * time.Second),
			Retry:       &mcpreadyv1.RetryRules{MaxAttempts: 2},
			EquivalenceClasses: []*mcpreadyv1.EquivalenceClass{{Name: "docs_lookup", FallbackAllowed: true,
				Members: []string{"com.example/docs/docs.lookup", "com.other/docs/docs.lookup"}}},
			Principals: []*mcpreadyv1.PrincipalRule{{PrincipalClass: "dev", Allow: []string{"docs_lookup"}}},
		},
		Entries: map[string]*mcpreadyv1.RegistryEntry{
			"docs-a":     entry("com.example/docs", "docs.lookup", "https://a.example/mcp"),
			"docs-b":     entry("com.other/docs", "docs.lookup", "https://b.example/mcp"),
			"look-alike": entry("com.evil/x", "docs.lookup", "https://evil.example/mcp"),
		},
		Evidence: map[string]*mcpreadyv1.Evidence{
			"ev-a": evidence("com.example/docs", "docs.lookup", "https://a.example/mcp", 20, 80),
			"ev-b": evidence("com.other/docs", "docs.lookup", "https://b.example/mcp", 10, 40),
		},
	}
}

func printDecision(d decide.Decision) {
	for _, c := range d.Candidates {
		if c.GetRejectedAtStep() != 0 {
			fmt.Printf("  rejected %s at step %d: %s\n", c.GetEntry(), c.GetRejectedAtStep(), c.GetRejectionCode())
		}
	}
	for i, r := range d.Routes {
		fmt.Printf("  route %d: %s read-only=%v retryable=%v attempts=%d\n", i+1, r.Entry, r.ReadOnly, r.Retryable, r.MaxAttempts)
	}
}

// A Snapshot is built once per verified configuration; each tool call is
// then decided against it and the breakers' state. The capability resolves
// to its class, the look-alike is rejected as not equivalent, and the
// admitted routes are ranked by latency evidence. A breaker that opened
// takes its route out of the next decision; a principal the policy does
// not name is refused, with the step and code of the refusal.
func ExampleSnapshot_Decide() {
	snap, err := decide.NewSnapshot(inputs())
	if err != nil {
		log.Fatal(err)
	}
	breakers := circuit.NewSet(circuit.Config{ConsecutiveFailures: 1})
	req := decide.Request{Tool: "docs_lookup", Principal: "dev", Now: now}

	d := snap.Decide(req, breakers)
	fmt.Println("class:", d.Class, "policy:", d.PolicyVersion, "deadline:", d.Deadline)
	printDecision(d)

	breakers.Report(circuit.Key("https://b.example/mcp", "docs.lookup"), false, now)
	fmt.Println("after docs-b failed:")
	printDecision(snap.Decide(req, breakers))

	req.Principal = "intern"
	d = snap.Decide(req, breakers)
	var refusal *decide.RefusalError
	if errors.As(d.Refusal, &refusal) {
		fmt.Println("intern:", refusal.Code == readiness.CodePrincipalDenied, errors.Is(d.Refusal, decide.ErrRefused))
		fmt.Println(refusal)
	}
	// Output:
	// class: docs_lookup policy: v7 deadline: 10s
	//   rejected look-alike at step 4: not_equivalent
	//   route 1: docs-b read-only=true retryable=true attempts=2
	//   route 2: docs-a read-only=true retryable=true attempts=2
	// after docs-b failed:
	//   rejected docs-b at step 6: circuit_open
	//   rejected look-alike at step 4: not_equivalent
	//   route 1: docs-a read-only=true retryable=true attempts=2
	// intern: true true
	// refused at step 2 (principal_denied): docs-a: no rule allows the principal class this tool
}

// Visible is what the principal's tools/list shows: only what it may call.
func ExampleSnapshot_Visible() {
	snap, err := decide.NewSnapshot(inputs())
	if err != nil {
		log.Fatal(err)
	}
	for _, principal := range []string{"dev", "intern"} {
		fmt.Print(principal, ":")
		for _, v := range snap.Visible(decide.Request{Principal: principal, Now: now}, nil) {
			fmt.Print(" ", v.Name, " ", v.Entries)
		}
		fmt.Println()
	}
	// Output:
	// dev: docs_lookup [docs-a docs-b]
	// intern:
}
