package pipeline

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

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
	ops := request("echo_any")
	ops.Caller.Principal = "ops"
	if res := pl.Call(context.Background(), st, ops, tr); res.Answer.IsError {
		t.Fatalf("another principal class: %+v", res.Answer)
	}
}
