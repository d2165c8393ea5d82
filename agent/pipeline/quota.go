package pipeline

// Local quota budgets on the call path: Policy.cost.maxQuotaUnits per
// principal class and tool (and tenant, when the provider partitions its
// quota by tenant) in each quotaWindow, counted in package quota.

import (
	"fmt"
	"time"

	"github.com/mcpready/mcpready/agent/decide"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/readiness"
)

func quotaKey(c Caller, r *decide.Route) string {
	k := c.Principal + "\x00" + r.Identity.GetServerName() + "/" + r.Identity.GetToolName()
	if r.QuotaByTenant {
		k += "\x00" + c.Tenant
	}
	return k
}

// quotaFilter drops the routes whose budget is spent (step 7); with none
// left the call is refused (quota_exhausted). d's routes are shared, so a
// narrowed list is a new slice.
func (p *Pipeline) quotaFilter(d *decide.Decision, c Caller, now time.Time) *decide.RefusalError {
	if d.QuotaLimit <= 0 {
		return nil
	}
	var kept []decide.Route
	for i := range d.Routes {
		if p.quota.Used(quotaKey(c, &d.Routes[i]), d.QuotaWindow, now) < d.QuotaLimit {
			kept = append(kept, d.Routes[i])
		}
	}
	if len(kept) == 0 {
		return &decide.RefusalError{Step: readiness.StepBudget, Code: readiness.CodeQuotaExhausted,
			Reason: fmt.Sprintf("the local budget of %d quota units per %v for this principal and tool is spent", d.QuotaLimit, d.QuotaWindow)}
	}
	d.Routes = kept
	return nil
}

// chargeQuota charges one unit to the route that ran the call and records
// the effect. Charged when the call ends: calls in flight at once may
// overrun the budget by at most their number.
func (p *Pipeline) chargeQuota(rec *mcpreadyv1.Receipt, d *decide.Decision, c Caller, r *decide.Route, now time.Time) {
	if d.QuotaLimit <= 0 || r == nil || len(rec.GetAttempts()) == 0 {
		return
	}
	used := p.quota.Add(quotaKey(c, r), 1, d.QuotaWindow, now)
	rec.Quota = fmt.Sprintf("1 %s (%d/%d per %v)", r.QuotaUnit, used, d.QuotaLimit, d.QuotaWindow)
}
