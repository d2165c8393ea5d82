package decide

// Ranking the admitted candidates (step 8: latency last, with
// hysteresis) and building their Routes.

import (
	"time"
)

// Tier bits of an admitted candidate; a lower tier ranks first, so unknown
// evidence weighs most, then a half-open breaker, then a suspect failure
// domain, then deprecation.
const (
	tierDeprecated = 1 << iota
	// tierSuspect: a route sharing a failure domain with one that failed
	// recently (circuit.Set.MarkSuspect).
	tierSuspect
	tierHalfOpen
	tierUnknown
)

// admitted is one candidate that passed steps 1-7, kept pointer-free so
// ranking sorts it without write barriers.
type admitted struct {
	ci         int32 // index in group.cands
	ev         int32 // index in entry.evidence, -1 when unknown
	tier       int8  // tierDeprecated | tierHalfOpen | tierUnknown
	retryable  bool
	approval   bool // approval required for this call (static or by value)
	unpriced   bool // the declared price does not hold now (entry.unpriced)
	shares     bool // shares a failure domain with the first route (rank)
	attempts   int8 // MaxAttempts of the route (1 unless retryable)
	score      float64
	perAttempt time.Duration
	input      string // the call's input class for the route (inputClassOf)
}

// rank moves the best k admitted candidates, in order, to the front of
// adm: fresh evidence before unknown, closed before half-open, then latency
// score, then entry name. The group's current preferred entry takes first
// place unless the best challenger in the same tier beats its score by more
// than the hysteresis margin. Only the first k are ordered (selection, not a
// full sort: k is small).
func (s *Snapshot) rank(g *group, adm []admitted, k int) {
	k = min(k, len(adm))
	for i := 0; i < k; i++ {
		m := i
		for j := i + 1; j < len(adm); j++ {
			if better(&adm[j], &adm[m]) {
				m = j
			}
		}
		adm[i], adm[m] = adm[m], adm[i]
	}
	if p := g.preferred.Load(); p >= 0 && len(adm) > 1 {
		for i := 1; i < len(adm); i++ {
			if g.cands[adm[i].ci].e.idx == int(p) {
				if adm[i].tier == adm[0].tier && adm[0].score >= adm[i].score*(1-s.margin) {
					cur := adm[i]
					copy(adm[1:i+1], adm[:i])
					adm[0] = cur
				}
				break
			}
		}
	}
	if best := int32(g.cands[adm[0].ci].e.idx); g.preferred.Load() != best {
		g.preferred.Store(best)
	}
	// Fallbacks: a route in another failure domain than the first before
	// one that shares a domain with it (correlated failures).
	if first := g.cands[adm[0].ci].e; len(first.domains) > 0 && k > 1 {
		for i := 1; i < len(adm); i++ {
			adm[i].shares = s.sharesDomain(first, g.cands[adm[i].ci].e)
		}
		for i := 1; i < k; i++ {
			m := i
			for j := i + 1; j < len(adm); j++ {
				if xs, ys := adm[j].shares, adm[m].shares; (!xs && ys) || (xs == ys && better(&adm[j], &adm[m])) {
					m = j
				}
			}
			adm[i], adm[m] = adm[m], adm[i]
		}
	}
}

func better(x, y *admitted) bool {
	switch {
	case x.tier != y.tier:
		return x.tier < y.tier
	case x.score != y.score:
		return x.score < y.score
	}
	return x.ci < y.ci
}

// fill builds the Route of an admitted candidate.
func (s *Snapshot) fill(r *Route, g *group, a *admitted) {
	e := g.cands[a.ci].e
	id := e.spec.GetIdentity()
	r.Entry, r.Spec, r.Identity, r.CircuitKey = e.name, e.spec, id, e.circuitKey
	r.admitted, r.selected = e.admitted, e.selected
	if g.class {
		r.Class = g.name
	}
	r.ProviderSideEffect, r.ConsumerSideEffect, r.SideEffectConflict = e.providerSE, e.consumerSE, e.conflict
	r.ReadOnly, r.ApprovalRequired, r.Retryable = e.readOnly, a.approval, a.retryable
	r.Reversible = e.spec.GetRollbackSupported()
	r.Domains, r.Cost, r.Price, r.Priced = e.domainKey, e.cost, e.price, e.priced
	r.IncidentOwner, r.InputClass = e.owner, a.input
	if a.unpriced {
		r.Cost, r.Price, r.Priced = e.unpricedCost, 0, false
	}
	r.QuotaUnit, r.QuotaByTenant = e.quotaUnit, e.quotaByTenant
	r.ProviderQuota, r.ProviderWindow = e.providerQuota, e.providerWindow
	r.MaxAttempts, r.RetryOn = int(a.attempts), e.retryOn
	r.PerAttempt = a.perAttempt
	if e.readOnly {
		r.HedgeAfter = s.hedgeAfter
	}
	r.OutputSchemaDigest = id.GetOutputSchemaDigest()
	r.KeySupport, r.KeyHeader, r.KeyArgument, r.KeyRetention = e.keySupport, e.keyHeader, e.keyArgument, e.keyRetention
	r.HalfOpen = a.tier&tierHalfOpen != 0
	r.Deprecated = a.tier&tierDeprecated != 0
	r.Unknown = a.ev < 0
	if a.ev >= 0 {
		ev := &e.evidence[a.ev]
		r.EvidenceID, r.P50, r.P99 = ev.id, ev.p50, ev.p99
	}
}
