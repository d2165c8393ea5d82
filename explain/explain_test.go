package explain_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/mcpready/mcpready/explain"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
)

// A candidate that was tried before a fallback is explained as tried, one
// that was never reached as not tried.
func TestExplainTriedCandidates(t *testing.T) {
	r := &mcpreadyv1.Receipt{
		ReceiptId: "r1", Requested: "docs_lookup",
		Candidates: []*mcpreadyv1.Candidate{
			{Entry: "a/lookup", ServerName: "a", ToolName: "lookup", Endpoint: "http://a"},
			{Entry: "b/lookup", ServerName: "b", ToolName: "lookup", Endpoint: "http://b", Selected: true},
			{Entry: "c/lookup", ServerName: "c", ToolName: "lookup", Endpoint: "http://c"},
		},
		Attempts: []*mcpreadyv1.Attempt{{Number: 1, Entry: "a/lookup"}, {Number: 2, Entry: "a/lookup"}, {Number: 3, Entry: "b/lookup"}},
	}
	var buf bytes.Buffer
	explain.Write(&buf, &mcpreadyv1.StoredReceipt{Receipt: r})
	for _, want := range []string{
		"a/lookup at http://a [a/lookup]: eligible, tried 2 time(s) without success.",
		"b/lookup at http://b [b/lookup]: selected.",
		"c/lookup at http://c [c/lookup]: eligible, not tried.",
	} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("explain lacks %q:\n%s", want, buf.String())
		}
	}
}

// The text form keeps the shape `mcpready explain` always printed: six
// paragraphs separated by blank lines, items indented by two spaces, and
// the same lines Of gives the console.
func TestWriteIsTheParagraphs(t *testing.T) {
	sr := &mcpreadyv1.StoredReceipt{Receipt: &mcpreadyv1.Receipt{ReceiptId: "r2", Requested: "docs_lookup",
		Candidates: []*mcpreadyv1.Candidate{{Entry: "a/x", ServerName: "a", ToolName: "x", RejectionCode: "stale_evidence", RejectedAtStep: 6}}}}
	paras := explain.Of(sr)
	if len(paras) != 6 {
		t.Fatalf("%d paragraphs, want 6", len(paras))
	}
	var buf bytes.Buffer
	if err := explain.Write(&buf, sr); err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(buf.String(), "\n\n"); got != 5 {
		t.Errorf("%d blank lines, want 5:\n%s", got, buf.String())
	}
	if !strings.Contains(buf.String(), "Decision under policy version (unknown):\n  - a/x at (no endpoint) [a/x]: rejected at step 6") {
		t.Errorf("decision paragraph:\n%s", buf.String())
	}
	if l := paras[2][1]; !l.Indented || !strings.HasPrefix(l.Text, "- a/x") {
		t.Errorf("candidate line %+v", l)
	}
}

// A workflow receipt is explained as the workflow: end state and who said
// so, each call with its route, and whether a fallback answered.
func TestExplainWorkflow(t *testing.T) {
	r := &mcpreadyv1.Receipt{ReceiptId: "w1", Requested: "mcpready.workflow.report", WorkflowId: "nightly-1", PrincipalClass: "employee",
		Workflow: &mcpreadyv1.WorkflowRecord{EndState: mcpreadyv1.WorkflowEndState_WORKFLOW_END_STATE_COMPLETED, CallsDropped: 2,
			Calls: []*mcpreadyv1.WorkflowCall{
				{ReceiptId: "r1", Requested: "docs_lookup", Outcome: mcpreadyv1.OutcomeClass_OUTCOME_CLASS_SUCCESS, Attempts: 2, Fallback: true, Contributed: true,
					Selected: &mcpreadyv1.Selection{Entry: "b/lookup", ServerName: "b", ToolName: "lookup"}},
				{ReceiptId: "r2", Requested: "nope", Outcome: mcpreadyv1.OutcomeClass_OUTCOME_CLASS_REFUSED},
			}}}
	var buf bytes.Buffer
	if err := explain.Write(&buf, &mcpreadyv1.StoredReceipt{Receipt: r}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"Workflow receipt w1",
		"Workflow nightly-1 of principal class \"employee\"",
		"ended completed at an unknown time (as its orchestrator reported).",
		"Calls of the workflow: 2 listed, 2 more past the agent's caps.",
		"  - receipt r1, \"docs_lookup\": b/lookup [b/lookup], success after 2 attempt(s) through a fallback route; contributed.",
		"  - receipt r2, \"nope\": no route (refused before one was selected), refused after 0 attempt(s) through the primary route; did not contribute.",
		"  Fallback used: 1 of 1 contributing call(s) answered through a fallback route.",
	} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("explain lacks %q:\n%s", want, buf.String())
		}
	}
	r.Workflow = &mcpreadyv1.WorkflowRecord{RefusalCode: "workflow_foreign"}
	r.ErrorMessage = "workflow nightly-1 belongs to another principal"
	buf.Reset()
	_ = explain.Write(&buf, &mcpreadyv1.StoredReceipt{Receipt: r})
	if !strings.Contains(buf.String(), "was refused at an unknown time: workflow_foreign: workflow nightly-1 belongs to another principal.") {
		t.Errorf("refused report:\n%s", buf.String())
	}
	r.Workflow = &mcpreadyv1.WorkflowRecord{EndState: mcpreadyv1.WorkflowEndState_WORKFLOW_END_STATE_ABANDONED, Expired: true}
	buf.Reset()
	_ = explain.Write(&buf, &mcpreadyv1.StoredReceipt{Receipt: r})
	if !strings.Contains(buf.String(), "ended abandoned at an unknown time (recorded by the agent: no call or report arrived for the idle timeout).") {
		t.Errorf("expired workflow:\n%s", buf.String())
	}
}

// The route's incident owner, when the receipt names one, is said next to
// where the call was routed.
func TestExplainIncidentOwner(t *testing.T) {
	r := &mcpreadyv1.Receipt{ReceiptId: "r1", Requested: "pay/charge",
		Selected: &mcpreadyv1.Selection{ServerName: "pay", ToolName: "charge", Endpoint: "http://pay", IncidentOwner: "payments-oncall"}}
	var buf bytes.Buffer
	explain.Write(&buf, &mcpreadyv1.StoredReceipt{Receipt: r})
	if !strings.Contains(buf.String(), "Incidents of this route go to payments-oncall.") {
		t.Errorf("explain does not name the owner:\n%s", buf.String())
	}
	r.Selected.IncidentOwner = ""
	buf.Reset()
	explain.Write(&buf, &mcpreadyv1.StoredReceipt{Receipt: r})
	if strings.Contains(buf.String(), "Incidents") {
		t.Errorf("explain names an owner the receipt does not:\n%s", buf.String())
	}
}
