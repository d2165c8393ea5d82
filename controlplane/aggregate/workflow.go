package aggregate

// Workflow outcomes (readiness layer 7). A workflow receipt (one with
// Receipt.workflow, written by the agent when an orchestrator reports a
// workflow or the workflow idles out) lists the workflow's calls with the
// route that answered each, its outcome and attempts, and whether it
// contributed. They are folded per principal class, tenant class, region
// and window into workflow Evidence (Evidence.workflow), named
// "<prefix>/workflows/<principal>/<12 hex>", whose subject names no server
// or tool, so routing never uses it:
//
//   - completion rate: completed workflows / workflows (also the WORKFLOW
//     layer rate);
//   - tool contribution rate, per tool: calls that contributed to a
//     completed workflow / the tool's calls in the window's workflows; a
//     call contributes when it succeeded, its workflow completed, and the
//     report named it (or named none). A call that succeeded in a workflow
//     that failed or was abandoned is counted apart and never as a
//     contribution;
//   - recovery cost: attempts of every call of the completed workflows /
//     completed workflows;
//   - fallback divergence: completed workflows with a contributing call
//     answered through a fallback route / completed workflows.

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/mcpready/mcpready/artifact"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/ledger"
)

// workflowKey is one population of workflows in one window.
type workflowKey struct {
	principal, tenant, region string
	start                     int64 // window start, unix nanos
}

type toolKey struct{ server, tool string }

type toolAcc struct{ calls, contributing, succeededElsewhere int64 }

type workflowAcc struct {
	workflows, completed, attempts, viaFallback, dropped int64
	tools                                                map[toolKey]*toolAcc
	agents                                               map[string]struct{}
	digests                                              []string
	last                                                 time.Time
}

// observeWorkflow folds r in when it is a workflow receipt (reporting
// true; false leaves r to the request receipts' fold). A refused report
// ended no workflow and counts for nothing. Called with a.mu held.
func (a *Aggregator) observeWorkflow(agentID string, r *mcpreadyv1.Receipt, digest string) bool {
	wf := r.GetWorkflow()
	if wf == nil {
		return false
	}
	if wf.GetEndState() == mcpreadyv1.WorkflowEndState_WORKFLOW_END_STATE_UNSPECIFIED {
		return true
	}
	win := int64(a.opts.Window)
	at := receiptTime(r)
	start := at.UnixNano() - at.UnixNano()%win
	if start < a.emittedUntil {
		a.lateN++
		a.late.Inc()
		return true
	}
	k := workflowKey{r.GetPrincipalClass(), r.GetTenantClass(), r.GetRegion(), start}
	if !a.admitWorkflow(agentID, k) {
		a.refused.WithLabelValues(reasonWorkflowAgentBound).Inc()
		return true
	}
	if a.workflows == nil {
		a.workflows = map[workflowKey]*workflowAcc{}
	}
	w := a.workflows[k]
	if w == nil {
		w = &workflowAcc{tools: map[toolKey]*toolAcc{}, agents: map[string]struct{}{}}
		a.workflows[k] = w
	}
	w.agents[agentID] = struct{}{}
	if digest != "" {
		w.digests = append(w.digests, digest)
	}
	if at.After(w.last) {
		w.last = at
	}
	w.workflows++
	w.dropped += wf.GetCallsDropped()
	completed := wf.GetEndState() == mcpreadyv1.WorkflowEndState_WORKFLOW_END_STATE_COMPLETED
	fallback := false
	for _, c := range wf.GetCalls() {
		tk := toolKey{c.GetSelected().GetServerName(), c.GetSelected().GetToolName()}
		if tk.tool == "" {
			tk.tool = c.GetRequested() // refused before a route was selected
		}
		t := w.tools[tk]
		if t == nil {
			t = &toolAcc{}
			w.tools[tk] = t
		}
		t.calls++
		succeeded := c.GetOutcome() == mcpreadyv1.OutcomeClass_OUTCOME_CLASS_SUCCESS
		switch {
		case completed:
			w.attempts += int64(c.GetAttempts())
			if succeeded && c.GetContributed() {
				t.contributing++
				fallback = fallback || c.GetFallback()
			}
		case succeeded:
			t.succeededElsewhere++
		}
	}
	if completed {
		w.completed++
		if fallback {
			w.viaFallback++
		}
	}
	return true
}

// takeWorkflows removes the workflow windows that are due (all, or those
// starting at or before cutoff) and moves emittedUntil past them. Called
// with a.mu held.
func (a *Aggregator) takeWorkflows(all bool, cutoff int64) map[workflowKey]*workflowAcc {
	win := int64(a.opts.Window)
	ready := map[workflowKey]*workflowAcc{}
	for k, w := range a.workflows {
		if all || k.start <= cutoff {
			ready[k] = w
			delete(a.workflows, k)
			a.emittedUntil = max(a.emittedUntil, k.start+win)
		}
	}
	return ready
}

// workflowObjects are the Evidence objects of ready, oldest window first
// (a later window of a population supersedes an earlier one).
func (a *Aggregator) workflowObjects(ready map[workflowKey]*workflowAcc, now time.Time) []*artifact.Object {
	keys := make([]workflowKey, 0, len(ready))
	for k := range ready {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(x, y workflowKey) int { return cmp.Compare(x.start, y.start) })
	out := make([]*artifact.Object, 0, len(keys))
	for _, k := range keys {
		out = append(out, a.workflowEvidence(k, ready[k], now))
	}
	return out
}

func ratio(n, d int64) float64 {
	if d == 0 {
		return 0
	}
	return float64(n) / float64(d)
}

// WorkflowEvidenceName is the artifact name of the workflow evidence of a
// population: "<prefix>/workflows/<principal class>/<12 hex of its digest>".
func WorkflowEvidenceName(prefix, principal, tenant, region string) string {
	return EvidenceName(prefix, "workflows", principal, workflowSubject(principal, tenant, region))
}

func workflowSubject(principal, tenant, region string) string {
	return artifact.Digest([]byte(strings.Join([]string{"workflows", principal, tenant, region}, "\x00")))
}

// workflowEvidence builds the Evidence object of one workflow window.
func (a *Aggregator) workflowEvidence(k workflowKey, w *workflowAcc, now time.Time) *artifact.Object {
	start := time.Unix(0, k.start).UTC()
	end := start.Add(a.opts.Window)
	rates := &mcpreadyv1.WorkflowRates{Workflows: w.workflows, Completed: w.completed, CompletionRate: ratio(w.completed, w.workflows),
		AttemptsInCompleted: w.attempts, AttemptsPerSuccess: ratio(w.attempts, w.completed),
		CompletedViaFallback: w.viaFallback, FallbackDivergence: ratio(w.viaFallback, w.completed)}
	for tk, t := range w.tools {
		rates.Tools = append(rates.Tools, &mcpreadyv1.WorkflowToolRate{ServerName: tk.server, ToolName: tk.tool, Calls: t.calls,
			Contributing: t.contributing, ContributionRate: ratio(t.contributing, t.calls), SucceededInUnsuccessful: t.succeededElsewhere})
	}
	slices.SortFunc(rates.Tools, func(x, y *mcpreadyv1.WorkflowToolRate) int {
		return strings.Compare(x.ServerName+"\x00"+x.ToolName, y.ServerName+"\x00"+y.ToolName)
	})
	ev := &mcpreadyv1.Evidence{
		Provenance: &mcpreadyv1.Provenance{Issuer: a.opts.ObserverID, VerificationMethod: "sigstore-bundle-key", Version: evidenceVersion(start, now),
			IssuedAt: timestamppb.New(now), ExpiresAt: timestamppb.New(end.Add(a.opts.TTL))},
		Subject: &mcpreadyv1.Subject{SubjectId: "workflows/" + k.principal + "/" + k.tenant + "/" + k.region,
			PrincipalClass: k.principal, TenantClass: k.tenant, Region: k.region},
		Observer:       &mcpreadyv1.Observer{Id: a.opts.ObserverID, Software: "mcpready/aggregate", Independence: "consumer-passive"},
		Method:         mcpreadyv1.EvidenceMethod_EVIDENCE_METHOD_PASSIVE,
		TenantClass:    k.tenant,
		PrincipalClass: k.principal,
		Region:         k.region,
		Path:           "host-agent",
		WindowStart:    timestamppb.New(start),
		WindowEnd:      timestamppb.New(end),
		ObservedAt:     timestamppb.New(w.last),
		ExpiresAt:      timestamppb.New(end.Add(a.opts.TTL)),
		Sample:         &mcpreadyv1.Sample{Attempted: w.workflows, Eligible: w.workflows},
		Rates: []*mcpreadyv1.LayerRate{{Layer: mcpreadyv1.ReadinessLayer_READINESS_LAYER_WORKFLOW, Successes: w.completed, Denominator: w.workflows,
			SuccessDefinition: "the workflow's orchestrator reported it completed (an expired workflow is abandoned)", Rate: rates.CompletionRate}},
		ConfidenceMethod: "none: raw counts with denominators",
		ReceiptsDigest:   ledger.DigestOfDigests(w.digests),
		ReceiptCount:     int64(len(w.digests)),
		Coverage:         fmt.Sprintf("%d workflow receipts from %d agent(s) in a %s window", w.workflows, len(w.agents), a.opts.Window),
		BlindSpots:       []string{"workflow outcomes as orchestrators reported them", "no routing input: names no server or tool"},
		Workflow:         rates,
	}
	if w.dropped > 0 {
		ev.BlindSpots = append(ev.BlindSpots, fmt.Sprintf("%d calls past the agents' caps not counted per tool", w.dropped))
	}
	return artifact.New(artifact.KindEvidence, WorkflowEvidenceName(a.opts.NamePrefix, k.principal, k.tenant, k.region), ev)
}
