package decide

import (
	"errors"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/readiness"
)

// Under a cost ceiling a tool without a usable declared price has an
// UNKNOWN cost, handled as the policy says: refused (cost_unknown, the
// default) or admitted with its cost recorded as unknown. Before, a
// missing price passed the ceiling unremarked.
func TestUnknownPrice(t *testing.T) {
	for _, tc := range []struct {
		name    string
		pricing *mcpreadyv1.DeclaredPricing
		action  mcpreadyv1.UnknownEvidenceAction
		code    readiness.Code
		cost    string
	}{
		{"no price, default", nil, 0, readiness.CodeCostUnknown, ""},
		{"not a number", &mcpreadyv1.DeclaredPricing{Amount: "cheap", Currency: "USD"}, mcpreadyv1.UnknownEvidenceAction_UNKNOWN_EVIDENCE_ACTION_DENY, readiness.CodeCostUnknown, ""},
		{"no price, allow", nil, mcpreadyv1.UnknownEvidenceAction_UNKNOWN_EVIDENCE_ACTION_ALLOW, "", "unknown"},
		{"priced", &mcpreadyv1.DeclaredPricing{Amount: "0.005", Currency: "USD"}, 0, "", "0.005 USD"},
		{"too dear", &mcpreadyv1.DeclaredPricing{Amount: "0.5", Currency: "USD"}, 0, readiness.CodeCost, ""},
		// A price per something other than a call is not a price per call:
		// 0.005 USD per 1k tokens passed a 0.01 USD per call ceiling.
		{"per call", &mcpreadyv1.DeclaredPricing{Amount: "0.005", Currency: "USD", Unit: "Per_Call"}, 0, "", "0.005 USD"},
		{"per request", &mcpreadyv1.DeclaredPricing{Amount: "0.005", Currency: "USD", Unit: "request"}, 0, "", "0.005 USD"},
		{"per 1k tokens", &mcpreadyv1.DeclaredPricing{Amount: "0.005", Currency: "USD", Unit: "1k-tokens"}, 0, readiness.CodeCostUnknown, ""},
		{"per month, allow", &mcpreadyv1.DeclaredPricing{Amount: "20", Currency: "USD", Unit: "month"}, mcpreadyv1.UnknownEvidenceAction_UNKNOWN_EVIDENCE_ACTION_ALLOW, "", "unknown"},
	} {
		req := baseReq()
		req.Tool = "com.example/docs/docs.lookup"
		if r, ok := decideCost(t, tc.name, tc.pricing, tc.action, req, tc.code); ok && r.Cost != tc.cost {
			t.Errorf("%s: cost %q, want %q", tc.name, r.Cost, tc.cost)
		}
	}
}

// decideCost decides req under a ceiling of 0.01 USD per call with the
// provider's pricing and the unknown-price action, checks a refusal is
// code at step 7 (none when code is ""), and returns the first route when
// the call was admitted.
func decideCost(t *testing.T, name string, pricing *mcpreadyv1.DeclaredPricing, action mcpreadyv1.UnknownEvidenceAction, req Request, code readiness.Code) (Route, bool) {
	t.Helper()
	in := fixture()
	in.Policy.Cost = &mcpreadyv1.CostRules{MaxCostPerCall: 0.01, Currency: "USD", OnUnknownPrice: action}
	in.Declarations = map[string]*mcpreadyv1.Declaration{"com.example/docs": {ServerName: "com.example/docs", Pricing: pricing}}
	d := snap(t, in).Decide(req, nil)
	var re *RefusalError
	switch {
	case code != "":
		if !errors.As(d.Refusal, &re) || re.Code != code || re.Step != readiness.StepBudget {
			t.Errorf("%s: %v, want %s at step 7", name, d.Refusal, code)
		}
	case d.Refusal != nil:
		t.Errorf("%s: refused %v", name, d.Refusal)
	default:
		return d.Routes[0], true
	}
	return Route{}, false
}

// A declared price holds only within its effectiveFrom..effectiveUntil:
// outside it the cost is UNKNOWN, handled as the policy says (refused as
// cost_unknown, or admitted with cost "unknown" and no price for the
// budgets). Before, the window was accepted and ignored, so an expired
// price kept passing the ceiling and being charged to budgets.
func TestPriceEffectiveWindow(t *testing.T) {
	req := baseReq()
	req.Tool = "com.example/docs/docs.lookup"
	now := req.Now
	pricing := &mcpreadyv1.DeclaredPricing{Amount: "0.005", Currency: "USD",
		EffectiveFrom: timestamppb.New(now.Add(-time.Hour)), EffectiveUntil: timestamppb.New(now.Add(time.Hour))}
	for _, tc := range []struct {
		name   string
		at     time.Time
		action mcpreadyv1.UnknownEvidenceAction
		code   readiness.Code
		cost   string
		priced bool
	}{
		{"within", now, 0, "", "0.005 USD", true},
		{"before", now.Add(-2 * time.Hour), 0, readiness.CodeCostUnknown, "", false},
		{"after", now.Add(time.Hour), 0, readiness.CodeCostUnknown, "", false},
		{"after, unknown allowed", now.Add(2 * time.Hour), mcpreadyv1.UnknownEvidenceAction_UNKNOWN_EVIDENCE_ACTION_ALLOW, "", "unknown", false},
	} {
		r := req
		r.Now = tc.at
		if route, ok := decideCost(t, tc.name, pricing, tc.action, r, tc.code); ok && (route.Cost != tc.cost || route.Priced != tc.priced) {
			t.Errorf("%s: cost %q priced %v, want %q %v", tc.name, route.Cost, route.Priced, tc.cost, tc.priced)
		}
	}
}
