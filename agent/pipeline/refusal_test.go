package pipeline

import (
	"context"
	"testing"
	"time"

	"github.com/mcpready/mcpready/agent/circuit"
	"github.com/mcpready/mcpready/agent/decide"
	"github.com/mcpready/mcpready/agent/internal/mcptest"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/readiness"
)

// A refusal that lifts by itself (the agent's own bounds, an open circuit
// breaker) tells the AI agent the call is retryable; one that needs a
// change first (policy, registry) does not. Before, every refusal said
// retryable false.
func TestRefusalRetryable(t *testing.T) {
	up := mcptest.New(t, mcptest.Options{})
	pl, st, _ := setup(t, policy(), map[string]*mcpreadyv1.RegistryEntry{"a": entry("a", up.URL)})
	st.Circuits = circuit.NewSet(circuit.Config{ConsecutiveFailures: 1})
	st.Circuits.Report(circuit.Key(up.URL, "echo"), false, time.Now())
	for _, tc := range []struct {
		name      string
		req       Request
		code      readiness.Code
		retryable bool
	}{
		{"circuit open", request("a/echo"), readiness.CodeCircuitOpen, true},
		{"agent capacity", func() Request {
			r := request("a/echo")
			r.Refusal = &decide.RefusalError{Step: readiness.StepNone, Code: readiness.CodeAgentCapacity, Reason: "too many calls"}
			return r
		}(), readiness.CodeAgentCapacity, true},
		{"not in inventory", request("b/echo"), "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := pl.Call(context.Background(), st, tc.req, newFake(t))
			te, ok := ParseToolError(res.Answer)
			if !ok {
				t.Fatalf("no tool error: %+v", res.Answer)
			}
			if (tc.code != "" && te.Code != string(tc.code)) || te.Retryable != tc.retryable {
				t.Fatalf("tool error %+v, want code %q retryable %v", te, tc.code, tc.retryable)
			}
		})
	}
}
