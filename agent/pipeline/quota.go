package pipeline

// Local quota budgets on the call path: Policy.cost.maxQuotaUnits per
// principal and tool (and tenant, when the provider partitions its quota
// by tenant) in each quotaWindow, counted in package quota. A principal is
// its name (Caller.Name), so two principals of one class have a budget
// each; a caller without a name counts under its class. Besides, the
// provider's declared quota (Declaration.quota.limit per quota.window) is
// one budget for the server on this host, all principals and tools
// together (per tenant when partitioned by tenant).

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/mcpready/mcpready/agent/decide"
	"github.com/mcpready/mcpready/agent/quota"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/readiness"
)

func quotaKey(c Caller, r *decide.Route) quota.Key {
	k := quota.Key{Principal: c.Name, Class: c.Principal, Server: r.Identity.GetServerName(), Tool: r.Identity.GetToolName()}
	if r.QuotaByTenant {
		k.Tenant = c.Tenant
	}
	return k
}

// providerKey names the count of the provider's declared quota: the
// server alone (and the tenant), which no policy budget's key is (those
// name a tool).
func providerKey(c Caller, r *decide.Route) quota.Key {
	k := quota.Key{Server: r.Identity.GetServerName()}
	if r.QuotaByTenant {
		k.Tenant = c.Tenant
	}
	return k
}

func providerQuota(r *decide.Route) bool { return r.ProviderQuota > 0 }

// anyProviderQuota reports whether a route has the provider's quota.
func anyProviderQuota(routes []decide.Route) bool {
	for i := range routes {
		if providerQuota(&routes[i]) {
			return true
		}
	}
	return false
}

// narrow returns the routes ok accepts: routes itself when it accepts them
// all (nothing allocated, the common case), else a new slice (a
// decision's routes are shared).
func narrow(routes []decide.Route, ok func(*decide.Route) bool) []decide.Route {
	for i := range routes {
		if ok(&routes[i]) {
			continue
		}
		kept := append(make([]decide.Route, 0, len(routes)-1), routes[:i]...)
		for j := i + 1; j < len(routes); j++ {
			if ok(&routes[j]) {
				kept = append(kept, routes[j])
			}
		}
		return kept
	}
	return routes
}

// quotaFilter drops the routes whose budget, the policy's or the
// provider's, is spent (step 7); with none left the call is refused
// (quota_exhausted), naming the budget that stopped the first route.
func (p *Pipeline) quotaFilter(d *decide.Decision, c Caller, now time.Time) *decide.RefusalError {
	if d.QuotaLimit <= 0 && !anyProviderQuota(d.Routes) {
		return nil
	}
	var reason string
	kept := narrow(d.Routes, func(r *decide.Route) bool {
		switch {
		case d.QuotaLimit > 0 && p.quota.Used(quotaKey(c, r), d.QuotaWindow, now) >= d.QuotaLimit:
			if reason == "" {
				reason = fmt.Sprintf("the local budget of %d quota units per %v for this principal and tool is spent", d.QuotaLimit, d.QuotaWindow)
			}
		case providerQuota(r) && p.quota.Used(providerKey(c, r), r.ProviderWindow, now) >= r.ProviderQuota:
			if reason == "" {
				reason = fmt.Sprintf("the provider's declared quota of %d units per %v for %s is spent on this host", r.ProviderQuota, r.ProviderWindow, r.Identity.GetServerName())
			}
		default:
			return true
		}
		return false
	})
	if len(kept) == 0 {
		return &decide.RefusalError{Step: readiness.StepBudget, Code: readiness.CodeQuotaExhausted, Reason: reason}
	}
	d.Routes = kept
	return nil
}

// chargeQuota charges one unit to the budgets of the route that ran the
// call and records the effect. Charged when the call ends: calls in flight
// at once may overrun a budget by at most their number. The clock is read
// only for a charge (most calls have no budget, and a reading is not
// free).
func (p *Pipeline) chargeQuota(rec *mcpreadyv1.Receipt, d *decide.Decision, c Caller, r *decide.Route) {
	if r == nil || len(rec.GetAttempts()) == 0 || (d.QuotaLimit <= 0 && !providerQuota(r)) {
		return
	}
	now := p.opts.Now()
	var parts []string
	if d.QuotaLimit > 0 {
		used := p.quota.Add(quotaKey(c, r), 1, d.QuotaWindow, now)
		parts = append(parts, fmt.Sprintf("%d/%d per %v", used, d.QuotaLimit, d.QuotaWindow))
	}
	if providerQuota(r) {
		used := p.quota.Add(providerKey(c, r), 1, r.ProviderWindow, now)
		parts = append(parts, fmt.Sprintf("the provider's %d/%d per %v", used, r.ProviderQuota, r.ProviderWindow))
	}
	rec.Quota = fmt.Sprintf("1 %s (%s)", r.QuotaUnit, strings.Join(parts, "; "))
}

// workflowWindow is the period of Policy.cost.maxCostPerWorkflow.
const workflowWindow = 24 * time.Hour

// micro converts a declared amount to the ledger's integer micro-units.
func micro(amount float64) int64 { return int64(math.Round(amount * 1e6)) }

func workflowKey(c Caller) quota.Key { return quota.Key{Workflow: c.Workflow} }

// costFilter drops the routes whose declared price would take the
// workflow past its ceiling, and unpriced routes unless the policy allows
// unknown prices (then they count as zero); with none left the call is
// refused (cost_ceiling). Calls without a workflow id are not counted.
func (p *Pipeline) costFilter(d *decide.Decision, c Caller, now time.Time) *decide.RefusalError {
	if d.WorkflowCostCeiling <= 0 || c.Workflow == "" {
		return nil
	}
	spent, ceiling := p.quota.Used(workflowKey(c), workflowWindow, now), micro(d.WorkflowCostCeiling)
	kept := narrow(d.Routes, func(r *decide.Route) bool {
		return (r.Priced || d.AllowUnknownPrice) && spent+micro(r.Price) <= ceiling
	})
	if len(kept) == 0 {
		return &decide.RefusalError{Step: readiness.StepBudget, Code: readiness.CodeCostCeiling,
			Reason: fmt.Sprintf("workflow %s has spent %g of its %g ceiling; the next call would pass it", c.Workflow, float64(spent)/1e6, d.WorkflowCostCeiling)}
	}
	d.Routes = kept
	return nil
}

// chargeCost adds the declared price of the route that ran to its
// workflow's spend and records it (reading the clock only then).
func (p *Pipeline) chargeCost(rec *mcpreadyv1.Receipt, d *decide.Decision, c Caller, r *decide.Route) {
	if d.WorkflowCostCeiling <= 0 || c.Workflow == "" || r == nil || len(rec.GetAttempts()) == 0 {
		return
	}
	spent := p.quota.Add(workflowKey(c), micro(r.Price), workflowWindow, p.opts.Now())
	rec.Cost = fmt.Sprintf("%s (workflow %g of %g)", r.Cost, float64(spent)/1e6, d.WorkflowCostCeiling)
}
