package aggregate

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/protobuf/types/known/timestamppb"

	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/ledger"
	"github.com/mcpready/mcpready/sign"
)

const timeout = mcpreadyv1.OutcomeClass_OUTCOME_CLASS_TIMEOUT // success: layers_test.go

func wfCall(tool string, outcome mcpreadyv1.OutcomeClass, attempts int32, fallback, contributed bool) *mcpreadyv1.WorkflowCall {
	return &mcpreadyv1.WorkflowCall{ReceiptId: ledger.NewID(), Requested: tool, Outcome: outcome, Attempts: attempts, Fallback: fallback, Contributed: contributed,
		Selected: &mcpreadyv1.Selection{ServerName: "com.example/docs", ToolName: tool}}
}

func wfReceipt(state mcpreadyv1.WorkflowEndState, calls ...*mcpreadyv1.WorkflowCall) *mcpreadyv1.Receipt {
	return &mcpreadyv1.Receipt{ReceiptId: ledger.NewID(), Requested: "mcpready.workflow.report", WorkflowId: ledger.NewID(),
		PrincipalClass: "employee", TenantClass: "acme", Region: "eu", Outcome: success, EndedAt: timestamppb.New(t0.Add(time.Minute)),
		Workflow: &mcpreadyv1.WorkflowRecord{EndState: state, Calls: calls}}
}

// workflowEvidenceOf flushes a and returns the one workflow Evidence.
func workflowEvidenceOf(t *testing.T, a *Aggregator, sk *sink) (*mcpreadyv1.Evidence, string) {
	t.Helper()
	if _, err := a.Flush(context.Background(), true); err != nil {
		t.Fatal(err)
	}
	var found *mcpreadyv1.Evidence
	var name string
	for _, b := range sk.bundles {
		v, err := sign.VerifyWithKey(b, a.opts.Signer.Public())
		if err != nil {
			t.Fatal(err)
		}
		if ev := v.Object.Spec.(*mcpreadyv1.Evidence); ev.GetWorkflow() != nil {
			if found != nil {
				t.Fatal("two workflow evidences for one population and window")
			}
			found, name = ev, v.Object.Metadata.Name
		}
	}
	if found == nil {
		t.Fatal("no workflow evidence")
	}
	return found, name
}

// TestWorkflowFigures: completion rate, tool contribution rate, recovery
// cost and fallback divergence, each with its denominator; a tool call
// that succeeded in a failed (or abandoned) workflow never counts as a
// contribution, and a refused report counts for nothing.
func TestWorkflowFigures(t *testing.T) {
	key, _ := sign.GenerateKey(sign.AlgorithmEd25519)
	sk := &sink{}
	reg := NewRegistrySubjects()
	reg.Set("lookup", &mcpreadyv1.RegistryEntry{Identity: identity()})
	a, err := New(Options{Signer: key, Sink: SinkFunc(sk.ApplyEvidence), Subjects: reg, Now: func() time.Time { return t0.Add(10 * time.Minute) }})
	if err != nil {
		t.Fatal(err)
	}
	const (
		completed = mcpreadyv1.WorkflowEndState_WORKFLOW_END_STATE_COMPLETED
		failed    = mcpreadyv1.WorkflowEndState_WORKFLOW_END_STATE_FAILED
		abandoned = mcpreadyv1.WorkflowEndState_WORKFLOW_END_STATE_ABANDONED
	)
	refused := wfReceipt(mcpreadyv1.WorkflowEndState_WORKFLOW_END_STATE_UNSPECIFIED)
	refused.Workflow.RefusalCode, refused.Outcome = "workflow_foreign", mcpreadyv1.OutcomeClass_OUTCOME_CLASS_REFUSED
	rs := []*mcpreadyv1.Receipt{
		// completed after a timed-out search (3 attempts) and a search answered by a fallback
		wfReceipt(completed, wfCall("search", timeout, 3, false, true), wfCall("search", success, 2, true, true), wfCall("fetch", success, 1, false, true)),
		// completed on the primary route; the report named only fetch as contributing
		wfReceipt(completed, wfCall("search", success, 1, false, false), wfCall("fetch", success, 1, false, true)),
		// the tool succeeded, the workflow failed
		wfReceipt(failed, wfCall("search", success, 1, false, true), wfCall("fetch", success, 1, false, true)),
		// expired
		wfReceipt(abandoned, wfCall("search", success, 1, true, true)),
		refused,
		rc(success, 1, 10), // a request receipt: per-tool evidence, not workflow evidence
	}
	a.Observe("agent-1", rs, nil)
	ev, name := workflowEvidenceOf(t, a, sk)
	w := ev.GetWorkflow()
	if w.GetWorkflows() != 4 || w.GetCompleted() != 2 || w.GetCompletionRate() != 0.5 {
		t.Errorf("completion %d/%d = %v, want 2/4", w.GetCompleted(), w.GetWorkflows(), w.GetCompletionRate())
	}
	if w.GetAttemptsInCompleted() != 8 || w.GetAttemptsPerSuccess() != 4 {
		t.Errorf("recovery cost %d attempts, %v per success; want 8 and 4", w.GetAttemptsInCompleted(), w.GetAttemptsPerSuccess())
	}
	if w.GetCompletedViaFallback() != 1 || w.GetFallbackDivergence() != 0.5 {
		t.Errorf("fallback divergence %d, %v; want 1 and 0.5", w.GetCompletedViaFallback(), w.GetFallbackDivergence())
	}
	tools := map[string]*mcpreadyv1.WorkflowToolRate{}
	for _, tr := range w.GetTools() {
		tools[tr.GetToolName()] = tr
	}
	// search: 6 calls; contributed only the fallback answer of the first
	// workflow (the timeout did not succeed, the second was not named, the
	// failed and abandoned workflows' successes never count).
	if s := tools["search"]; s.GetCalls() != 5 || s.GetContributing() != 1 || s.GetSucceededInUnsuccessful() != 2 || s.GetContributionRate() != 0.2 {
		t.Errorf("search %v", s)
	}
	if f := tools["fetch"]; f.GetCalls() != 3 || f.GetContributing() != 2 || f.GetSucceededInUnsuccessful() != 1 {
		t.Errorf("fetch %v", f)
	}
	if r := ev.GetRates(); len(r) != 1 || r[0].GetLayer() != mcpreadyv1.ReadinessLayer_READINESS_LAYER_WORKFLOW || r[0].GetSuccesses() != 2 || r[0].GetDenominator() != 4 {
		t.Errorf("layer rates %v", r)
	}
	if ev.GetSubject().GetServerName() != "" || ev.GetSubject().GetToolName() != "" || !strings.HasPrefix(name, "passive/workflows/employee/") ||
		name != WorkflowEvidenceName("passive", "employee", "acme", "eu") {
		t.Errorf("workflow evidence %s names a routable subject %v", name, ev.GetSubject())
	}
	if len(sk.bundles) != 2 {
		t.Errorf("%d evidences, want the tool's and the workflows'", len(sk.bundles))
	}
}

// TestWorkflowLate: a workflow receipt after its window was emitted is late.
func TestWorkflowLate(t *testing.T) {
	key, _ := sign.GenerateKey(sign.AlgorithmEd25519)
	sk := &sink{}
	a, _ := New(Options{Signer: key, Sink: SinkFunc(sk.ApplyEvidence), Subjects: NewRegistrySubjects(), Now: func() time.Time { return t0.Add(10 * time.Minute) }})
	a.Observe("agent-1", []*mcpreadyv1.Receipt{wfReceipt(mcpreadyv1.WorkflowEndState_WORKFLOW_END_STATE_COMPLETED)}, []string{"sha256:aa"})
	if n, err := a.Flush(context.Background(), false); n != 1 || err != nil {
		t.Fatalf("flushed %d, %v", n, err)
	}
	a.Observe("agent-1", []*mcpreadyv1.Receipt{wfReceipt(mcpreadyv1.WorkflowEndState_WORKFLOW_END_STATE_COMPLETED)}, nil)
	if a.Late() != 1 {
		t.Errorf("late %d, want 1", a.Late())
	}
}

// Attack: a compromised agent asserts a fresh principal class, tenant
// class or region on each workflow receipt (the workflow key is what the
// agent says), minting one workflow Evidence per receipt, and floods one
// population with receipts. It contributes to at most
// MaxWorkflowKeysPerAgent workflow populations and
// MaxWorkflowReceiptsPerAgent workflow receipts per window; the rest are
// refused as workflow-agent-bound, and another agent is unaffected.
// Before, workflow receipts were folded before any per-agent bound: the
// flood below minted 1,000 workflow Evidence objects.
func TestWorkflowContributionBounded(t *testing.T) {
	reg := prometheus.NewRegistry()
	a, sk, now := newAgg(t, func(o *Options) {
		o.Registry = reg
		o.MaxWorkflowKeysPerAgent, o.MaxWorkflowReceiptsPerAgent = 3, 40
	})
	var flood []*mcpreadyv1.Receipt
	for i := range 1000 {
		flood = append(flood, wfReceipt(mcpreadyv1.WorkflowEndState_WORKFLOW_END_STATE_COMPLETED, wfCall("lookup", success, 1, false, true)))
		flood[i].TenantClass = "tenant-0" // 500 populations, then 500 receipts in one
		if i < 500 {
			flood[i].TenantClass = fmt.Sprintf("tenant-%d", i)
		}
	}
	a.Observe("agent-evil", flood, digestsFor(flood))
	honest := []*mcpreadyv1.Receipt{wfReceipt(mcpreadyv1.WorkflowEndState_WORKFLOW_END_STATE_COMPLETED, wfCall("lookup", success, 1, false, true))}
	honest[0].TenantClass = "tenant-499"
	a.Observe("agent-honest", honest, digestsFor(honest))
	evs := flushAll(t, a, sk)
	var workflows int64
	tenants := map[string]int64{}
	for _, ev := range evs {
		if ev.GetWorkflow() == nil {
			continue
		}
		workflows += ev.GetWorkflow().GetWorkflows()
		tenants[ev.GetTenantClass()] += ev.GetWorkflow().GetWorkflows()
	}
	if len(tenants) != 4 || workflows != 41 || tenants["tenant-499"] != 1 {
		t.Fatalf("%d workflow evidence (%d workflows, %d of the honest tenant's); want 3 populations and 40 receipts from the flooding agent, and the honest one's", len(tenants), workflows, tenants["tenant-499"])
	}
	if n := testutil.ToFloat64(a.refused.WithLabelValues(reasonWorkflowAgentBound)); n != 960 {
		t.Fatalf("refused over the workflow bound %v, want 960", n)
	}
	// The next window starts a fresh budget.
	later := wfReceipt(mcpreadyv1.WorkflowEndState_WORKFLOW_END_STATE_COMPLETED, wfCall("lookup", success, 1, false, true))
	later.TenantClass, later.EndedAt.Seconds = "tenant-7", later.EndedAt.Seconds+600
	sk.bundles = nil
	*now = now.Add(10 * time.Minute) // the next window has begun
	a.Observe("agent-evil", []*mcpreadyv1.Receipt{later}, []string{"sha256:2"})
	if evs := flushAll(t, a, sk); len(evs) != 1 || evs[0].GetTenantClass() != "tenant-7" {
		t.Fatalf("next window: %v", evs)
	}
}
