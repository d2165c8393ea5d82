package decide

// The hard filters, steps 1-7 of the decision order: admit, the one
// admission function of calls and listings.

import (
	"fmt"
	"math"
	"time"

	"github.com/mcpready/mcpready/agent/circuit"
	"github.com/mcpready/mcpready/readiness"
)

// admit is the one admission function: it runs steps 1-7 for one candidate
// of a call or of a listing (Visible), returns the failing step
// (readiness.StepNone when admitted) and fills a for admitted candidates.
func (s *Snapshot) admit(c *cand, x *call, h Health, a *admitted) (readiness.Step, rejection) {
	e, req, now, deadline := c.e, x.req, x.now, x.deadline
	// 1 eligibility.
	if rj := e.static[readiness.StepEligibility]; rj.code != "" {
		return readiness.StepEligibility, rj
	}
	if rj, bad := s.expiry(e, now); bad {
		return readiness.StepEligibility, rj
	}
	if req.Drift != nil && req.Drift.Drifted(e.name) {
		return readiness.StepEligibility, rejDrift
	}
	if len(e.workflows) > 0 && !contains(e.workflows, req.Workflow) {
		return readiness.StepEligibility, rejWorkflow
	}
	if req.ProtocolVersion != "" && len(s.protocols) > 0 && !contains(s.protocols, req.ProtocolVersion) {
		return readiness.StepEligibility, rejClientProtocol
	}
	// 2 trust and authority.
	if rj := e.static[readiness.StepTrust]; rj.code != "" {
		return readiness.StepTrust, rj
	}
	if rj, bad := s.authorise(c, req, x.gr); bad {
		return readiness.StepTrust, rj
	}
	if req.Access != nil {
		if rj, ok := req.Access.Check(e.server, &e.access, req.Now); !ok {
			return readiness.StepTrust, rejection{rj.Code, rj.Detail}
		}
	}
	// 3 security and residency.
	if rj := e.static[readiness.StepResidency]; rj.code != "" {
		return readiness.StepResidency, rj
	}
	if s.sameRegion && (e.region == "" || e.region != req.Region) {
		return readiness.StepResidency, rejSameRegion
	}
	// 4 semantic suitability.
	if !c.member {
		return readiness.StepSemantic, rejNotEquivalent
	}
	if len(e.required) > 0 && !x.listing {
		if rj, bad := missingArgument(e, req.Arguments); bad {
			return readiness.StepSemantic, rj
		}
	}
	// 5 side-effect safety.
	a.approval = e.approval || (len(e.valueRules) > 0 && x.aboveValue(e))
	if a.approval && !req.ApprovalAvailable {
		return readiness.StepSideEffect, rejApproval
	}
	if s.requireKey && e.stateChanging && !req.IdempotencyKey && !(req.AllocateKey && e.keySupport) {
		return readiness.StepSideEffect, rejIdempotency
	}
	// 6 current health.
	if h != nil {
		var st circuit.State
		if x.brk != nil {
			st = x.brk[e.idx].State(req.Now)
		} else {
			st = h.State(e.circuitKey, req.Now)
		}
		switch st {
		case circuit.Open:
			return readiness.StepHealth, rejCircuit
		case circuit.HalfOpen:
			a.tier |= tierHalfOpen
		}
		if len(e.domains) > 0 && s.suspect(h, e, x) {
			a.tier |= tierSuspect
		}
	}
	ev, rj, unknown := s.freshEvidence(e, req, a.input, now)
	if unknown {
		if s.denyUnknown {
			return readiness.StepHealth, rj
		}
		a.tier |= tierUnknown
	}
	if e.deprecated != 0 && e.deprecated <= now {
		a.tier |= tierDeprecated
	}
	a.ev = int32(ev)
	// 7 deadline and cost.
	if rj := e.static[readiness.StepBudget]; rj.code != "" {
		return readiness.StepBudget, rj
	}
	if a.unpriced = e.unpriced(now); a.unpriced && e.unpricedRej.code != "" {
		return readiness.StepBudget, e.unpricedRej
	}
	a.retryable = e.readOnly || (e.keyed && (req.IdempotencyKey || (req.AllocateKey && e.keySupport)))
	a.attempts = 1
	a.perAttempt = e.perAttemptOne
	if a.retryable && !e.retryOn.None() {
		a.attempts = int8(s.maxAttempts)
		a.perAttempt = e.perAttemptRetry
	}
	if a.perAttempt <= 0 {
		budget := deadline
		if e.declaredTotal > 0 {
			budget = min(budget, e.declaredTotal)
		}
		a.perAttempt = budget / time.Duration(a.attempts)
	}
	a.perAttempt = min(a.perAttempt, deadline)
	a.score = math.Inf(1)
	if ev >= 0 {
		if r := &e.evidence[ev]; r.hasLatency {
			if r.p50 > a.perAttempt {
				return readiness.StepBudget, rejection{readiness.CodeDeadlineBudget, fmt.Sprintf("observed p50 %v exceeds the per-attempt budget %v", r.p50, a.perAttempt)}
			}
			// Latency score: the mean of p50 and p99, so the median and
			// the tail both count.
			a.score = float64(r.p50+r.p99) / 2
		}
	}
	return 0, rejection{}
}

// expiry checks the time-dependent eligibility facts of an entry: its
// provenance expiry and the declared end of life of its server.
func (s *Snapshot) expiry(e *entry, now int64) (rejection, bool) {
	switch {
	case e.expires != 0 && e.expires <= now:
		return e.expiresRej, true
	case e.endOfLife != 0 && e.endOfLife <= now:
		return e.endOfLifeRej, true
	}
	return rejection{}, false
}

// call is the per-request context of one Decide. It holds no interfaces so
// that escape analysis keeps it (and the request) on the stack.
type call struct {
	req      *Request
	gr       grant
	brk      []*circuit.Breaker // nil: ask Health
	now      int64
	deadline time.Duration
	// listing: a tools/list admission (value rules do not apply: there are
	// no arguments); args are the call's arguments, decoded once when a
	// value rule needs them (argsDone).
	listing  bool
	args     any
	argsDone bool
	// suspect: bits of the suspect failure domains (suspectDone once asked).
	suspect     uint64
	suspectDone bool
}

// grant is the principal rules that apply to one request: those for its
// principal class (and "*") whose tenant classes admit its tenant.
// tenantExcluded: the principal has rules, but none for this tenant.
type grant struct {
	rules          []int
	tenantExcluded bool
}

func (s *Snapshot) grantFor(principal, tenant string, buf []int) grant {
	rules, known := s.principals[principal]
	if !known {
		rules = s.wildcardRules
	}
	g := grant{rules: buf[:0]}
	for _, ri := range rules {
		if t := s.rules[ri].tenants; len(t) > 0 && !contains(t, tenant) {
			continue
		}
		g.rules = append(g.rules, ri)
	}
	g.tenantExcluded = len(rules) > 0 && len(g.rules) == 0
	return g
}

// authorise applies the principal rules (precomputed verdicts) and the
// entry's tenant classes.
func (s *Snapshot) authorise(c *cand, req *Request, g grant) (rejection, bool) {
	if len(c.e.tenants) > 0 && !contains(c.e.tenants, req.Tenant) {
		return rejEntryTenant, true
	}
	allowed := false
	for _, ri := range g.rules {
		switch c.verdict[ri] {
		case -1:
			return rejPrincipalDenied, true
		case 1:
			allowed = true
		}
	}
	switch {
	case allowed:
		return rejection{}, false
	case g.tenantExcluded:
		return rejRuleTenant, true
	}
	return rejPrincipalNotAllowed, true
}

// freshEvidence picks the freshest evidence applicable to the request's
// principal, tenant, region, auth class and input class that counts (fit
// and not expired). input is the call's class for this entry: evidence
// speaks only for its own class, evidence naming none only for calls in
// none, and anyInputClass (a listing's) takes every class. unknown is
// true when none does; rj then says why the freshest applicable one did
// not.
func (s *Snapshot) freshEvidence(e *entry, req *Request, input string, now int64) (int, rejection, bool) {
	why := -1
	auth, authKnown := "", false
	for i := range e.evidence {
		ev := &e.evidence[i]
		if (ev.principal != "" && ev.principal != req.Principal) || (ev.tenant != "" && ev.tenant != req.Tenant) ||
			(ev.region != "" && ev.region != req.Region) || (ev.input != input && input != anyInputClass) || ev.tooSmall {
			continue
		}
		if ev.auth != "" {
			if !authKnown && req.AuthClass != nil {
				auth = req.AuthClass(e.server, e.spec.GetIdentity().GetEndpoint())
			}
			authKnown = true
			if ev.auth != auth {
				continue
			}
		}
		if ev.unfit.code == "" && now < ev.expires {
			return i, rejection{}, false
		}
		if why < 0 {
			why = i
		}
	}
	if why >= 0 {
		ev := &e.evidence[why]
		if ev.unfit.code != "" {
			return -1, ev.unfit, true
		}
		return -1, rejection{readiness.CodeEvidenceExpired, fmt.Sprintf("evidence %s expired at %s", ev.id, time.Unix(0, ev.expires).UTC().Format(time.RFC3339))}, true
	}
	return -1, rejNoEvidence, true
}
