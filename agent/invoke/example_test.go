package invoke_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/mcpready/mcpready/agent/circuit"
	"github.com/mcpready/mcpready/agent/decide"
	"github.com/mcpready/mcpready/agent/invoke"
	"github.com/mcpready/mcpready/agent/validate"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/readiness"
)

// snapshot is a small verified configuration: a read-only capability
// docs_lookup and a state-changing capability tickets_create, each served
// by two servers, callable by every principal.
func snapshot() *decide.Snapshot {
	entry := func(server, tool, endpoint string) *mcpreadyv1.RegistryEntry {
		return &mcpreadyv1.RegistryEntry{Identity: &mcpreadyv1.ToolIdentity{ServerName: server, ToolName: tool, Endpoint: endpoint},
			State: mcpreadyv1.LifecycleState_LIFECYCLE_STATE_QUALIFIED}
	}
	s, err := decide.NewSnapshot(decide.Inputs{
		Policy: &mcpreadyv1.Policy{
			Inventory: []string{"*"},
			SideEffects: []*mcpreadyv1.SideEffectRule{
				{Match: "*/lookup", Assigned: mcpreadyv1.SideEffectClass_SIDE_EFFECT_CLASS_READ_ONLY},
				{Match: "*/create", Assigned: mcpreadyv1.SideEffectClass_SIDE_EFFECT_CLASS_STATE_CHANGING},
			},
			Retry:    &mcpreadyv1.RetryRules{MaxAttempts: 2},
			Deadline: durationpb.New(5 * time.Second),
			EquivalenceClasses: []*mcpreadyv1.EquivalenceClass{
				{Name: "docs_lookup", FallbackAllowed: true, Members: []string{"a/lookup", "b/lookup"}},
				{Name: "tickets_create", FallbackAllowed: true, Members: []string{"a/create", "b/create"}},
			},
			Principals: []*mcpreadyv1.PrincipalRule{{PrincipalClass: "*", Allow: []string{"*"}}},
		},
		Entries: map[string]*mcpreadyv1.RegistryEntry{
			"docs-a": entry("a", "lookup", "https://a.example/mcp"), "docs-b": entry("b", "lookup", "https://b.example/mcp"),
			"tickets-a": entry("a", "create", "https://a.example/mcp"), "tickets-b": entry("b", "create", "https://b.example/mcp"),
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	return s
}

// upstream answers each entry with what the transport would have seen,
// classified as the agent's transport classifies it.
func upstream(seen map[string]validate.Observation) invoke.Attempt {
	return func(ctx context.Context, r decide.Route, n int) invoke.Outcome {
		var o *validate.Outcome
		if errors.As(validate.Classify(seen[r.Entry]), &o) {
			return *o
		}
		return invoke.Outcome{Class: mcpreadyv1.OutcomeClass_OUTCOME_CLASS_SUCCESS, Sent: true}
	}
}

func report(res invoke.Result) {
	fmt.Println("final:", res.Final.Class, "on", res.Route.Entry)
	for _, a := range res.Attempts {
		fmt.Printf("  attempt %d: %s %s (%s)\n", a.GetNumber(), a.GetEntry(), a.GetOutcome(), a.GetTransportStatus())
	}
	fmt.Println("  actions:", readiness.ActionStrings(res.Actions))
}

// Run executes a decision for a read-only capability: the first route
// answers 502 twice (a retry, then the policy's two attempts are spent),
// so the call falls back to the next route of the class, which answers.
// Every attempt is reported to the breakers.
func ExampleRun() {
	d := snapshot().Decide(decide.Request{Tool: "docs_lookup", Now: time.Now()}, nil)
	breakers := circuit.NewSet(circuit.Config{ConsecutiveFailures: 2})
	var waits []time.Duration
	opts := invoke.Options{
		Circuits: breakers,
		Budget:   invoke.NewBudget(0, 0),
		Sleep:    func(_ context.Context, d time.Duration) error { waits = append(waits, d); return nil },
		Jitter:   func(n int64) int64 { return n - 1 }, // the longest wait, for the example
	}

	res := invoke.Run(context.Background(), d, upstream(map[string]validate.Observation{
		"docs-a": {Sent: true, HTTPStatus: 502},
	}), opts)
	report(res)
	fmt.Println("  backoff:", waits)
	fmt.Println("  docs-a breaker:", breakers.State(d.Routes[0].CircuitKey, time.Now()))
	// Output:
	// final: OUTCOME_CLASS_SUCCESS on docs-b
	//   attempt 1: docs-a OUTCOME_CLASS_TRANSPORT_FAILURE (http 502)
	//   attempt 2: docs-a OUTCOME_CLASS_TRANSPORT_FAILURE (http 502)
	//   attempt 3: docs-b OUTCOME_CLASS_SUCCESS (sent)
	//   actions: [retry:docs-a fallback:docs-b]
	//   backoff: [100ms]
	//   docs-a breaker: open
}

// A state-changing call is never retried, and falls back only when the
// failed attempt cannot have had an effect. A 503 was refused before
// execution, so the next route is tried; a timeout after the request was
// sent is AMBIGUOUS and final.
func ExampleRun_stateChanging() {
	d := snapshot().Decide(decide.Request{Tool: "tickets_create", Now: time.Now()}, nil)

	report(invoke.Run(context.Background(), d, upstream(map[string]validate.Observation{
		"tickets-a": {Sent: true, HTTPStatus: 503},
	}), invoke.Options{}))

	report(invoke.Run(context.Background(), d, upstream(map[string]validate.Observation{
		"tickets-a": {Sent: true, TimedOut: true},
	}), invoke.Options{}))
	// Output:
	// final: OUTCOME_CLASS_SUCCESS on tickets-b
	//   attempt 1: tickets-a OUTCOME_CLASS_TRANSPORT_FAILURE (http 503)
	//   attempt 2: tickets-b OUTCOME_CLASS_SUCCESS (sent)
	//   actions: [fallback:tickets-b]
	// final: OUTCOME_CLASS_AMBIGUOUS on tickets-a
	//   attempt 1: tickets-a OUTCOME_CLASS_AMBIGUOUS (sent)
	//   actions: [ambiguous-no-retry]
}

// The retry budget is agent-wide: every call deposits a fraction of a
// token, every retry or hedge withdraws one, so retries stay a bounded
// share of calls however many upstreams fail.
func ExampleBudget() {
	b := invoke.NewBudget(0.2, 3) // 20% of calls, at most 3 retries in a burst
	for i := 0; i < 4; i++ {
		fmt.Print(b.Withdraw(), " ")
	}
	fmt.Println("tokens:", b.Tokens())
	for i := 0; i < 5; i++ { // five calls earn one retry
		b.Deposit()
	}
	fmt.Println("after 5 calls:", b.Tokens(), b.Withdraw(), b.Withdraw())
	// Output:
	// true true true false tokens: 0
	// after 5 calls: 1 true false
}
