package decide

import (
	"sort"
	"strings"
	"time"

	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
)

// evidenceItem is one accepted Evidence with its id, before it is matched to
// an exact registry entry.
type evidenceItem struct {
	id string
	ev *mcpreadyv1.Evidence
	evidenceRef
}

type evidenceList []evidenceItem

// indexEvidence keeps evidence from accepted issuers, with an observation
// time and an expiry (expires_at, or observed_at + max age), grouped by
// "<server>/<tool>". Evidence that names no server or tool subject is
// broader than any claim and is dropped.
func indexEvidence(p *mcpreadyv1.Policy, all map[string]*mcpreadyv1.Evidence) map[string]evidenceList {
	rules := p.GetEvidence()
	out := map[string]evidenceList{}
	for id, ev := range all {
		if issuers := rules.GetAcceptedIssuers(); len(issuers) > 0 && !contains(issuers, ev.GetProvenance().GetIssuer()) {
			continue
		}
		sub := ev.GetSubject()
		if sub.GetServerName() == "" || sub.GetToolName() == "" {
			continue
		}
		observed := ev.GetObservedAt()
		if observed == nil {
			observed = ev.GetWindowEnd()
		}
		if observed == nil {
			continue
		}
		var expires int64
		if ex := ev.GetExpiresAt(); ex != nil {
			expires = ex.AsTime().UnixNano()
		}
		if age, ok := maxAge(rules, ev); ok {
			if until := observed.AsTime().Add(age).UnixNano(); expires == 0 || until < expires {
				expires = until
			}
		}
		if expires == 0 {
			continue // no expiry at all: never decisive
		}
		it := evidenceItem{id: id, ev: ev, evidenceRef: evidenceRef{
			id:        id,
			principal: ev.GetPrincipalClass(),
			tenant:    ev.GetTenantClass(),
			observed:  observed.AsTime().UnixNano(),
			expires:   expires,
			tooSmall:  rules.GetMinSampleSize() > 0 && ev.GetSample().GetEligible() < rules.GetMinSampleSize(),
		}}
		if l := ev.GetLatency(); l != nil && (l.GetP50Ms() > 0 || l.GetP99Ms() > 0) {
			it.hasLatency = true
			it.p50 = msToDuration(l.GetP50Ms())
			it.p99 = msToDuration(l.GetP99Ms())
			if it.p99 < it.p50 {
				it.p99 = it.p50
			}
		}
		k := sub.GetServerName() + "/" + sub.GetToolName()
		out[k] = append(out[k], it)
	}
	return out
}

func msToDuration(ms float64) time.Duration {
	if ms <= 0 {
		return 0
	}
	return time.Duration(ms * float64(time.Millisecond))
}

// maxAge is the smallest policy max age among the layers the evidence
// reports rates for (all configured layers when it reports none). Keys are
// layer enum names, with or without the READINESS_LAYER_ prefix, any case.
func maxAge(rules *mcpreadyv1.EvidenceRules, ev *mcpreadyv1.Evidence) (time.Duration, bool) {
	var best time.Duration
	found := false
	for k, v := range rules.GetMaxAge() {
		layer := "READINESS_LAYER_" + strings.TrimPrefix(strings.ToUpper(k), "READINESS_LAYER_")
		relevant := len(ev.GetRates()) == 0
		for _, r := range ev.GetRates() {
			relevant = relevant || r.GetLayer().String() == layer
		}
		if d := v.AsDuration(); relevant && d > 0 && (!found || d < best) {
			best, found = d, true
		}
	}
	return best, found
}

// applicable keeps the evidence whose subject matches the exact entry. The
// server version and both schema digests must be equal (an empty subject
// field is unknown, not "any", so it matches only an entry that is also
// empty there): a new version or schema invalidates old evidence. The
// endpoint constrains when set. Sorted freshest first.
func (l evidenceList) applicable(re *mcpreadyv1.RegistryEntry) []evidenceRef {
	id := re.GetIdentity()
	var out []evidenceRef
	for _, it := range l {
		sub := it.ev.GetSubject()
		if sub.GetServerVersion() != id.GetServerVersion() || !same(sub.GetEndpoint(), id.GetEndpoint()) ||
			sub.GetInputSchemaDigest() != id.GetInputSchemaDigest() || sub.GetOutputSchemaDigest() != id.GetOutputSchemaDigest() {
			continue
		}
		out = append(out, it.evidenceRef)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].observed != out[j].observed {
			return out[i].observed > out[j].observed
		}
		return out[i].id < out[j].id
	})
	return out
}

// same: an optional evidence field constrains only when it is set.
func same(evidence, entry string) bool { return evidence == "" || evidence == entry }
