package explain

import (
	"fmt"
	"strings"
	"time"

	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
)

// workflow explains a workflow receipt (Receipt.workflow): how the
// workflow ended and who said so, each call with the route that answered
// it, and whether a fallback route answered a contributing call.
func workflow(sr *mcpreadyv1.StoredReceipt) []Paragraph {
	r := sr.GetReceipt()
	wf := r.GetWorkflow()
	var out []Paragraph
	para := func(lines ...string) {
		p := Paragraph{}
		for _, l := range lines {
			p = append(p, Line{Text: strings.TrimPrefix(l, "  "), Indented: strings.HasPrefix(l, "  ")})
		}
		out = append(out, p)
	}
	para(fmt.Sprintf("Workflow receipt %s (agent %s, batch %s).", r.GetReceiptId(), or(sr.GetAgentId(), r.GetEmitterId()), or(sr.GetBatchId(), "unknown")))
	when := "at an unknown time"
	if t := r.GetEndedAt(); t != nil {
		when = "at " + t.AsTime().UTC().Format(time.RFC3339Nano)
	}
	who := fmt.Sprintf("principal class %q, tenant class %q in region %q", r.GetPrincipalClass(), r.GetTenantClass(), r.GetRegion())
	if code := wf.GetRefusalCode(); code != "" {
		para(fmt.Sprintf("A report of workflow %s by %s was refused %s: %s%s.", or(r.GetWorkflowId(), "(none named)"), who, when, code, prefixed(": ", r.GetErrorMessage())),
			"  The workflow's end state was not recorded by this report.")
	} else {
		state := EnumWord(wf.GetEndState().String(), "WORKFLOW_END_STATE_")
		by := "as its orchestrator reported"
		if wf.GetExpired() {
			by = "recorded by the agent: no call or report arrived for the idle timeout"
		}
		opened := ""
		if t := wf.GetOpenedAt(); t != nil {
			opened = ", opened at " + t.AsTime().UTC().Format(time.RFC3339Nano)
		}
		para(fmt.Sprintf("Workflow %s of %s%s ended %s %s (%s).", r.GetWorkflowId(), who, opened, state, when, by))
	}
	calls := []string{fmt.Sprintf("Calls of the workflow: %d listed%s.", len(wf.GetCalls()), countNote(wf.GetCallsDropped(), " more past the agent's caps"))}
	contributing, viaFallback := 0, 0
	for _, c := range wf.GetCalls() {
		s := c.GetSelected()
		route := "no route (refused before one was selected)"
		if s.GetToolName() != "" {
			route = fmt.Sprintf("%s/%s [%s]", s.GetServerName(), s.GetToolName(), or(s.GetEntry(), "?"))
		}
		via := "the primary route"
		if c.GetFallback() {
			via = "a fallback route"
		}
		contributed := "did not contribute"
		if c.GetContributed() {
			contributed = "contributed"
			contributing++
			if c.GetFallback() {
				viaFallback++
			}
		}
		calls = append(calls, fmt.Sprintf("  - receipt %s, %q: %s, %s after %d attempt(s) through %s; %s.", c.GetReceiptId(), c.GetRequested(), route,
			OutcomeWord(c.GetOutcome()), c.GetAttempts(), via, contributed))
	}
	if len(wf.GetCalls()) > 0 {
		calls = append(calls, fmt.Sprintf("  Fallback used: %d of %d contributing call(s) answered through a fallback route.", viaFallback, contributing))
	}
	para(calls...)
	para(fmt.Sprintf("Recorded by %s %s; receipt digest %s.", or(r.GetEmitterId(), "?"), r.GetEmitterVersion(), or(sr.GetDigest(), "?")))
	return out
}

func countNote(n int64, what string) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(", %d%s", n, what)
}
