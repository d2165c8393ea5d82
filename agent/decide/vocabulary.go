package decide

import (
	"fmt"
	"slices"
	"strings"

	"github.com/mcpready/mcpready/agent/idempotency"
)

// vocabulary is the form in which names of the policy's small vocabularies
// (retry conditions, independence levels) are compared: trimmed, lower
// case, "_" as "-".
func vocabulary(name string) string {
	return strings.ReplaceAll(strings.ToLower(strings.TrimSpace(name)), "_", "-")
}

// unknownNames lists the vocabulary names in the inputs that mean nothing
// to this agent. They are not errors (an unknown retry condition matches no
// failure; an unknown required independence admits no evidence: both fail
// safe), but an operator wants to know.
func unknownNames(in Inputs) []string {
	var out []string
	retry := func(where string, names []string) {
		for _, n := range names {
			if _, ok := retryNames[vocabulary(n)]; !ok {
				out = append(out, fmt.Sprintf("%s: unknown retry condition %q (matches no failure)", where, n))
			}
		}
	}
	retry("policy retry.retryableConditions", in.Policy.GetRetry().GetRetryableConditions())
	names := make([]string, 0, len(in.Declarations))
	for name := range in.Declarations {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		retry("declaration "+name+" retryableConditions", in.Declarations[name].GetRetryableConditions())
		for _, t := range in.Declarations[name].GetTools() {
			if h := t.GetIdempotencyKeyHeader(); h != "" && !idempotency.HeaderAllowed(h) {
				out = append(out, fmt.Sprintf("declaration %s tool %s: idempotencyKeyHeader %q is not a header the agent sets (the connection's own, an Mcp- header or not a token): the key travels in _meta only", name, t.GetName(), h))
			}
		}
	}
	if v := in.Policy.GetEvidence().GetRequiredIndependence(); v != "" {
		if _, ok := independenceLevel(v); !ok {
			out = append(out, fmt.Sprintf("policy evidence.requiredIndependence: unknown value %q (no evidence meets it)", v))
		}
	}
	for i, a := range in.Policy.GetApprovals() {
		if a.GetAboveValue() > 0 && a.GetValuePath() == "" && a.GetRequired() {
			out = append(out, fmt.Sprintf("policy approvals[%d]: aboveValue without valuePath (every matching call needs approval)", i))
		}
	}
	return out
}

// Warnings are the snapshot's inputs that this agent cannot interpret
// (see unknownNames), for the operator's log.
func (s *Snapshot) Warnings() []string { return s.warnings }
