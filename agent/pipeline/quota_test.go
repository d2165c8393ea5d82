package pipeline

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/mcpready/mcpready/agent/decide"
	"github.com/mcpready/mcpready/agent/internal/mcptest"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/readiness"
)

// A principal's local quota budget per tool (maxQuotaUnits per
// quotaWindow): once tool a's two units are spent the class falls back to
// b, and once both are spent the call is refused at step 7
// (quota_exhausted) before any upstream sees it; another principal class
// has its own budget; receipts record the effect. Before, maxQuotaUnits
// was accepted and ignored.
func TestQuotaBudget(t *testing.T) {
	upA, upB := mcptest.New(t, mcptest.Options{}), mcptest.New(t, mcptest.Options{})
	p := policy()
	p.Cost = &mcpreadyv1.CostRules{MaxQuotaUnits: 2, QuotaWindow: durationpb.New(time.Hour)}
	p.Principals = append(p.Principals, &mcpreadyv1.PrincipalRule{PrincipalClass: "ops", Allow: []string{"*"}})
	pl, st, out := setup(t, p, map[string]*mcpreadyv1.RegistryEntry{"a": entry("a", upA.URL), "b": entry("b", upB.URL)})
	tr := newFake(t)
	var served []string
	for range 4 {
		res := pl.Call(context.Background(), st, request("echo_any"), tr)
		if res.Answer.IsError {
			t.Fatalf("call %d: %+v", len(served), res.Answer)
		}
		served = append(served, res.Route.Entry)
	}
	if strings.Join(served, ",") != "a,a,b,b" {
		t.Fatalf("served by %v, want a,a,b,b", served)
	}
	if q := out.recs[1].GetQuota(); q != "1 call (2/2 per 1h0m0s)" {
		t.Fatalf("receipt quota %q", q)
	}
	dialled := len(tr.dialled)
	res := pl.Call(context.Background(), st, request("echo_any"), tr)
	if te, ok := ParseToolError(res.Answer); !ok || te.Code != string(readiness.CodeQuotaExhausted) || te.Step != 7 || len(tr.dialled) != dialled {
		t.Fatalf("over budget: %+v", res.Answer)
	}
	// Budgets are per principal: another principal of the same class has
	// its own (before, it shared its class's spent budget), and so has one
	// of another class.
	other := request("echo_any")
	other.Caller.Name = other.Caller.Name + "-2"
	if res := pl.Call(context.Background(), st, other, tr); res.Answer.IsError {
		t.Fatalf("another principal of the same class: %+v", res.Answer)
	}
	ops := request("echo_any")
	ops.Caller.Name, ops.Caller.Principal = "o", "ops"
	if res := pl.Call(context.Background(), st, ops, tr); res.Answer.IsError {
		t.Fatalf("another principal class: %+v", res.Answer)
	}
}

// A workflow's declared spend is capped: at 0.02 EUR a call under a 0.05
// ceiling, the third call of workflow wf-1 is refused at step 7
// (cost_ceiling) before the upstream sees it; another workflow is not
// affected; receipts record the call's price and the workflow's spend.
// Before, there was no per-workflow ceiling.
func TestWorkflowCostCeiling(t *testing.T) {
	pm := newPayment(t, payOpts{noStore: true, cost: &mcpreadyv1.CostRules{MaxCostPerWorkflow: 0.05}})
	charge := func(wf string) Result {
		return pm.pl.Call(context.Background(), pm.st, Request{Requested: "test/charge", Tool: "test/charge",
			Caller: Caller{Name: "c", Principal: "dev", Workflow: wf}, Arguments: []byte(`{"amount":1}`)}, pm.tr)
	}
	for i := range 2 {
		if res := charge("wf-1"); res.Answer.IsError {
			t.Fatalf("call %d: %+v", i, res.Answer)
		}
	}
	if c := pm.out.recs[1].GetCost(); c != "0.02 EUR (workflow 0.04 of 0.05)" {
		t.Fatalf("receipt cost %q", c)
	}
	res := charge("wf-1")
	if te, ok := ParseToolError(res.Answer); !ok || te.Code != string(readiness.CodeCostCeiling) || te.Step != 7 || pm.ledger.Calls() != 2 {
		t.Fatalf("third call: %+v (%s)", res.Answer, pm.ledger)
	}
	if res := charge("wf-2"); res.Answer.IsError {
		t.Fatalf("another workflow: %+v", res.Answer)
	}
	// An unpriced tool under the ceiling is UNKNOWN, not free: refused
	// unless the policy allows unknown prices.
	for _, allow := range []bool{false, true} {
		rules := &mcpreadyv1.CostRules{MaxCostPerWorkflow: 0.05}
		if allow {
			rules.OnUnknownPrice = mcpreadyv1.UnknownEvidenceAction_UNKNOWN_EVIDENCE_ACTION_ALLOW
		}
		free := newPayment(t, payOpts{noStore: true, cost: rules, unpriced: true})
		res := free.pl.Call(context.Background(), free.st, Request{Requested: "test/charge", Tool: "test/charge",
			Caller: Caller{Name: "c", Principal: "dev", Workflow: "wf-1"}, Arguments: []byte(`{"amount":1}`)}, free.tr)
		if te, _ := ParseToolError(res.Answer); (te.Code == string(readiness.CodeCostCeiling)) == allow {
			t.Fatalf("unpriced, allow %v: %+v", allow, res.Answer)
		}
	}
}

// A provider that partitions its quota by tenant (Declaration
// quota.partitionKeys: tenant) gets a local budget per tenant too: once
// tenant t1 of class dev has spent its unit, t2 of the same class still
// has its own; without the partition key the class shares one budget.
func TestQuotaPartitionedByTenant(t *testing.T) {
	for _, partitioned := range []bool{true, false} {
		q := &mcpreadyv1.DeclaredQuota{Unit: "charge"}
		if partitioned {
			q.PartitionKeys = []string{"tenant"}
		}
		pm := newPayment(t, payOpts{noStore: true, quota: q, cost: &mcpreadyv1.CostRules{MaxQuotaUnits: 1, QuotaWindow: durationpb.New(time.Hour)}})
		charge := func(tenant string) Result {
			return pm.pl.Call(context.Background(), pm.st, Request{Requested: "test/charge", Tool: "test/charge",
				Caller: Caller{Name: "c", Principal: "dev", Tenant: tenant}, Arguments: []byte(`{"amount":1}`)}, pm.tr)
		}
		if res := charge("t1"); res.Answer.IsError || res.Receipt.GetQuota() != "1 charge (1/1 per 1h0m0s)" {
			t.Fatalf("t1 first: %+v, quota %q", res.Answer, res.Receipt.GetQuota())
		}
		refusedWith(t, charge("t1"), readiness.CodeQuotaExhausted)
		res := charge("t2")
		if te, _ := ParseToolError(res.Answer); (te.Code == string(readiness.CodeQuotaExhausted)) == partitioned {
			t.Fatalf("partitioned %v: t2 %+v", partitioned, res.Answer)
		}
		want := 1 // t1's charge
		if partitioned {
			want = 2 // and t2's
		}
		if pm.ledger.Calls() != want {
			t.Fatalf("partitioned %v: %s, want %d calls", partitioned, pm.ledger, want)
		}
	}
}

// narrow keeps the accepted routes in order, returns the decision's own
// slice when it keeps them all and a new one (the shared slice untouched)
// when it drops any.
func TestNarrow(t *testing.T) {
	routes := []decide.Route{{Entry: "a"}, {Entry: "b"}, {Entry: "c"}}
	entries := func(rs []decide.Route) (s string) {
		for _, r := range rs {
			s += r.Entry
		}
		return s
	}
	for drop, want := range map[string]string{"": "abc", "a": "bc", "b": "ac", "c": "ab", "ac": "b", "abc": ""} {
		got := narrow(routes, func(r *decide.Route) bool { return !strings.Contains(drop, r.Entry) })
		if entries(got) != want || entries(routes) != "abc" || (drop == "") != (len(got) > 0 && &got[0] == &routes[0]) {
			t.Fatalf("drop %q: %q, routes %q", drop, entries(got), entries(routes))
		}
	}
}

// A provider's declared quota (Declaration quota.limit per quota.window)
// is kept on the host for the server as a whole: all principals and all
// its endpoints together. Once its two units are spent the next call, of
// any principal, is refused at step 7 (quota_exhausted) before an upstream
// sees it, with the provider's quota named; the receipts record it beside
// the policy's own budget. Partitioned by tenant, each tenant has its own.
// Before, quota.limit was accepted and ignored.
func TestDeclaredQuota(t *testing.T) {
	q := &mcpreadyv1.DeclaredQuota{Unit: "charge", Limit: 2, Window: durationpb.New(time.Hour)}
	pm := newPayment(t, payOpts{noStore: true, twin: true, quota: q, cost: &mcpreadyv1.CostRules{MaxQuotaUnits: 5, QuotaWindow: durationpb.New(time.Minute)}})
	charge := func(name, tenant string) Result {
		return pm.pl.Call(context.Background(), pm.st, Request{Requested: "test/charge", Tool: "test/charge",
			Caller: Caller{Name: name, Principal: "dev", Tenant: tenant}, Arguments: []byte(`{"amount":1}`)}, pm.tr)
	}
	if res := charge("alice", "t1"); res.Answer.IsError || res.Receipt.GetQuota() != "1 charge (1/5 per 1m0s; the provider's 1/2 per 1h0m0s)" {
		t.Fatalf("first: %+v, quota %q", res.Answer, res.Receipt.GetQuota())
	}
	if res := charge("bob", "t2"); res.Answer.IsError {
		t.Fatalf("second, another principal: %+v", res.Answer)
	}
	res := charge("carol", "t3")
	refusedWith(t, res, readiness.CodeQuotaExhausted)
	if te, _ := ParseToolError(res.Answer); !strings.Contains(te.Reason, "provider") {
		t.Errorf("refusal %q does not name the provider's quota", te.Reason)
	}
	if n := pm.ledger.Calls() + pm.twin.Calls(); n != 2 {
		t.Fatalf("%d calls reached the upstreams, want 2", n)
	}

	// Partitioned by tenant: t1's spent units leave t2 its own.
	q = &mcpreadyv1.DeclaredQuota{Limit: 1, Window: durationpb.New(time.Hour), PartitionKeys: []string{"tenant"}}
	pm = newPayment(t, payOpts{noStore: true, quota: q})
	if res := charge("alice", "t1"); res.Answer.IsError || res.Receipt.GetQuota() != "1 call (the provider's 1/1 per 1h0m0s)" {
		t.Fatalf("t1: %+v, quota %q", res.Answer, res.Receipt.GetQuota())
	}
	refusedWith(t, charge("bob", "t1"), readiness.CodeQuotaExhausted)
	if res := charge("alice", "t2"); res.Answer.IsError {
		t.Fatalf("t2: %+v", res.Answer)
	}
}
