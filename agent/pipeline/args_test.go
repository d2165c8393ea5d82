package pipeline

import (
	"context"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"testing"

	"github.com/mcpready/mcpready/agent/internal/mcptest"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/readiness"
)

// Arguments that name a key twice are refused before the decision: the
// agent reads the last value (approval by value saw a charge of 5), an
// upstream that keeps the first value, or that matches keys ignoring case
// as encoding/json does, charges 500. Before, each of these ran without a
// human being asked.
func TestAmbiguousArgumentsRefused(t *testing.T) {
	pm := newPayment(t, payOpts{noStore: true, approvals: []*mcpreadyv1.ApprovalRule{{Match: "*/charge", Required: true, AboveValue: 100, ValuePath: "amount"}}})
	charge := func(args string) Result {
		return pm.pl.Call(context.Background(), pm.st, Request{Requested: "test/charge", Tool: "test/charge",
			Caller: Caller{Name: "c", Principal: "dev", Elicit: true}, Arguments: []byte(args)}, pm.tr)
	}
	for _, args := range []string{
		`{"amount":500,"amount":5}`,
		`{"amount":5,"Amount":500}`,
		`{"amount":5,"\u0041mount":500}`,
		`{"amount":5,"note":{"to":"a","TO":"b"}}`,
	} {
		res := charge(args)
		te, ok := ParseToolError(res.Answer)
		if !ok || te.Code != string(readiness.CodeArgumentsAmbiguous) {
			t.Errorf("%s: answer %+v, want %s", args, res.Answer, readiness.CodeArgumentsAmbiguous)
			continue
		}
		rec := res.Receipt
		if rec == nil || rec.GetOutcome() != mcpreadyv1.OutcomeClass_OUTCOME_CLASS_REFUSED || rec.GetArgumentsDigest() == "" {
			t.Errorf("%s: receipt %v", args, rec)
		}
	}
	if len(pm.tr.asked) != 0 || pm.ledger.Calls() != 0 {
		t.Fatalf("asked %v, upstream charged %d times", pm.tr.asked, pm.ledger.Calls())
	}
	// A value that spells another key is not ambiguous.
	if res := charge(`{"amount":5,"key":"Amount"}`); res.Answer.IsError || pm.ledger.Calls() != 1 {
		t.Fatalf("plain charge: %+v, %d calls", res.Answer, pm.ledger.Calls())
	}
}

// An argument that is a name the policy reads but for its case is refused
// before the decision: the approval prompt and the receipt's kept
// arguments read "amount" exactly and did not show {"AMOUNT":1000000},
// while a provider decoding into a struct reads it as amount, so a human
// approved a charge without seeing its amount (found by the case-folding
// audit). The names: the redaction allow-list and value-rule paths.
func TestCaseVariantOfAReadArgumentRefused(t *testing.T) {
	pm := newPayment(t, payOpts{noStore: true, approvals: []*mcpreadyv1.ApprovalRule{{Match: "*/charge", Required: true, AboveValue: 100, ValuePath: "total"}}})
	pm.pl.opts.Builder.Redaction.KeepArguments = []string{"amount"}
	pm.tr.approve = true
	charge := func(args string) Result {
		return pm.pl.Call(context.Background(), pm.st, Request{Requested: "test/charge", Tool: "test/charge",
			Caller: Caller{Name: "c", Principal: "dev", Elicit: true}, Arguments: []byte(args)}, pm.tr)
	}
	for _, args := range []string{`{"AMOUNT":1000000}`, `{"amount":5,"Total":1000000}`, `{"amount":5,"\u0054otal":1000000}`} {
		te, ok := ParseToolError(charge(args).Answer)
		if !ok || te.Code != string(readiness.CodeArgumentsAmbiguous) {
			t.Errorf("%s: %+v, want %s", args, te, readiness.CodeArgumentsAmbiguous)
		}
	}
	if len(pm.tr.prompts) != 0 || pm.ledger.Calls() != 0 {
		t.Fatalf("asked %q, upstream charged %d times", pm.tr.prompts, pm.ledger.Calls())
	}
	if res := charge(`{"amount":5}`); res.Answer.IsError || pm.ledger.Calls() != 1 {
		t.Fatalf("a plain charge: %s, %d calls", res.Answer.Content[0].(*mcp.TextContent).Text, pm.ledger.Calls())
	}
}

// The route's incident owner (Policy incidentOwners) is recorded in the
// receipt's selection and named in a failed call's tool error, so that
// whoever reads either knows whom the failure concerns.
func TestIncidentOwnerRecorded(t *testing.T) {
	pm := newPayment(t, payOpts{noStore: true, owners: []*mcpreadyv1.IncidentOwner{{Match: "test/*", Owner: "payments-oncall"}}})
	charge := func() Result {
		return pm.pl.Call(context.Background(), pm.st, Request{Requested: "test/charge", Tool: "test/charge",
			Caller: Caller{Name: "c", Principal: "dev", Elicit: true}, Arguments: []byte(`{"amount":5}`)}, pm.tr)
	}
	if res := charge(); res.Answer.IsError || res.Receipt.GetSelected().GetIncidentOwner() != "payments-oncall" {
		t.Fatalf("answer %+v, selection %v", res.Answer, res.Receipt.GetSelected())
	}
	pm.up.SetFault(mcptest.FaultServerError, "tools/call")
	res := charge()
	te, ok := ParseToolError(res.Answer)
	if !ok || te.Owner != "payments-oncall" || res.Receipt.GetSelected().GetIncidentOwner() != "payments-oncall" {
		t.Fatalf("failed call: %+v, selection %v", te, res.Receipt.GetSelected())
	}
}
