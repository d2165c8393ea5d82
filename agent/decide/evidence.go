package decide

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/readiness"
)

// evidenceItem is one accepted Evidence with its id, before it is matched to
// an exact registry entry.
type evidenceItem struct {
	id string
	ev *mcpreadyv1.Evidence
	evidenceRef
	// needIndependentIssuer: the policy requires more than provider
	// independence, so the issuer must not be the provider itself.
	needIndependentIssuer bool
}

type evidenceList []evidenceItem

// indexEvidence keeps evidence from accepted issuers and methods, with an
// observation time and an expiry (expires_at, or observed_at + max age),
// grouped by "<server>/<tool>". Evidence that names no server or tool subject is
// broader than any claim and is dropped. Evidence below the policy's
// required independence or minimum confidence is kept, marked unfit with
// the reason (it never counts, but it says why a candidate has none).
func indexEvidence(p *mcpreadyv1.Policy, all map[string]*mcpreadyv1.Evidence) map[string]evidenceList {
	rules := p.GetEvidence()
	required, requiredKnown := independenceLevel(rules.GetRequiredIndependence())
	out := map[string]evidenceList{}
	for id, ev := range all {
		if issuers := rules.GetAcceptedIssuers(); len(issuers) > 0 && !contains(issuers, ev.GetProvenance().GetIssuer()) {
			continue
		}
		if methods := rules.GetAcceptedMethods(); len(methods) > 0 && !slices.Contains(methods, ev.GetMethod()) {
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
		principal, ok1 := condition(ev.GetPrincipalClass(), sub.GetPrincipalClass())
		tenant, ok2 := condition(ev.GetTenantClass(), sub.GetTenantClass())
		region, ok3 := condition(ev.GetRegion(), sub.GetRegion())
		if !ok1 || !ok2 || !ok3 {
			continue // observed under conditions no request meets
		}
		it := evidenceItem{id: id, ev: ev, evidenceRef: evidenceRef{
			id:        id,
			principal: principal,
			tenant:    tenant,
			region:    region,
			auth:      ev.GetAuthClass(),
			input:     sub.GetInputClass(),
			observed:  observed.AsTime().UnixNano(),
			expires:   expires,
			tooSmall:  rules.GetMinSampleSize() > 0 && ev.GetSample().GetEligible() < rules.GetMinSampleSize(),
		}}
		if required > levelAny {
			stated, ok := independenceLevel(ev.GetObserver().GetIndependence())
			switch {
			case !requiredKnown:
				it.unfit = rejection{readiness.CodeEvidenceNotIndependent, fmt.Sprintf("evidence %s: the policy's required independence %q is not a known level", id, rules.GetRequiredIndependence())}
			case !ok || stated < required:
				it.unfit = rejection{readiness.CodeEvidenceNotIndependent, fmt.Sprintf("evidence %s: observer independence %q does not meet the required %q", id, ev.GetObserver().GetIndependence(), rules.GetRequiredIndependence())}
			}
			it.needIndependentIssuer = required > levelProvider
		}
		if drift := driftLabels(ev.GetDriftObserved()); drift != "" && it.unfit.code == "" {
			it.unfit = rejection{readiness.CodeEvidenceDrift, fmt.Sprintf("evidence %s observed drift (%s) during its window: it describes more than one definition", id, drift)}
		}
		if floor := rules.GetMinConfidence(); floor > 0 && it.unfit.code == "" {
			if c, why := confidence(ev); c < floor {
				it.unfit = rejection{readiness.CodeEvidenceLowConfidence, fmt.Sprintf("evidence %s: confidence %.3f (%s) is below the policy minimum %g", id, c, why, floor)}
			}
		}
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

// driftLabels names the drift an evidence observed ("" for none).
func driftLabels(labels []mcpreadyv1.DriftLabel) string {
	var names []string
	for _, l := range labels {
		if l != mcpreadyv1.DriftLabel_DRIFT_LABEL_UNSPECIFIED {
			names = append(names, readiness.DriftName(l))
		}
	}
	return strings.Join(names, ", ")
}

// condition is the value an evidence condition stated both at the top
// level and in the subject holds the request to: whichever is set; false
// when both are set and differ (then no request meets it).
func condition(top, subject string) (string, bool) {
	switch {
	case top == "":
		return subject, true
	case subject == "" || subject == top:
		return top, true
	}
	return "", false
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
// endpoint, the protocol version (or the subject's list of them) and the
// registry record version (the entry's provenance version) constrain when
// set. Evidence that must be independent is unfit
// when its issuer is the provider: the Declaration's issuer, owner or
// operator, or the RegistryEntry's owner. Sorted freshest first.
func (l evidenceList) applicable(re *mcpreadyv1.RegistryEntry, decl *mcpreadyv1.Declaration) []evidenceRef {
	id := re.GetIdentity()
	provider := []string{decl.GetProvenance().GetIssuer(), decl.GetOwner(), decl.GetOperator(), re.GetProvenance().GetOwner()}
	var out []evidenceRef
	for _, it := range l {
		sub := it.ev.GetSubject()
		if sub.GetServerVersion() != id.GetServerVersion() || !same(sub.GetEndpoint(), id.GetEndpoint()) ||
			sub.GetInputSchemaDigest() != id.GetInputSchemaDigest() || sub.GetOutputSchemaDigest() != id.GetOutputSchemaDigest() {
			continue
		}
		if !same(it.ev.GetProtocolVersion(), id.GetProtocolVersion()) || !same(sub.GetRegistryRecordVersion(), re.GetProvenance().GetVersion()) {
			continue
		}
		if pvs := sub.GetProtocolVersions(); len(pvs) > 0 && !contains(pvs, id.GetProtocolVersion()) {
			continue
		}
		ref := it.evidenceRef
		if iss := it.ev.GetProvenance().GetIssuer(); it.needIndependentIssuer && ref.unfit.code == "" && iss != "" && contains(provider, iss) {
			ref.unfit = rejection{readiness.CodeEvidenceNotIndependent, fmt.Sprintf("evidence %s is issued by the provider (%q), not by an independent observer", it.id, iss)}
		}
		out = append(out, ref)
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

// Independence levels of an observer relative to the provider.
const (
	levelAny = iota - 1 // required: nothing
	levelProvider
	levelConsumer
	levelThirdParty
)

// independenceNames maps Observer.independence and
// Policy.evidence.required_independence values (lower case, '_' as '-') to
// levels.
var independenceNames = map[string]int{
	"": levelAny, "any": levelAny, "none": levelAny,
	"self": levelProvider, "provider": levelProvider, "first-party": levelProvider,
	"same-organisation": levelProvider, "same-organization": levelProvider,
	"consumer": levelConsumer, "consumer-passive": levelConsumer, "consumer-synthetic": levelConsumer,
	"second-party": levelConsumer, "independent": levelConsumer,
	"third-party": levelThirdParty, "independent-third-party": levelThirdParty,
}

// independenceLevel is the level of an independence value; ok is false for
// an unknown value (which then meets no requirement, and as a requirement
// admits no evidence).
func independenceLevel(v string) (int, bool) {
	l, ok := independenceNames[vocabulary(v)]
	if !ok {
		return levelThirdParty + 1, false
	}
	return l, true
}

// wilsonZ is the normal quantile of a two-sided 95% interval.
const wilsonZ = 1.959963984540054

// confidence is the evidence's confidence: the 95% Wilson score lower
// bound of the weakest success rate it reports (successes over denominator
// per layer; layers with no denominator are skipped), and how it was
// derived. Evidence with no rate, or with a rate whose counts are
// inconsistent, has confidence 0. The evidence's own confidence_method is
// not trusted.
func confidence(ev *mcpreadyv1.Evidence) (float64, string) {
	best, why := math.Inf(1), "no success rate reported"
	for _, r := range ev.GetRates() {
		n, k := r.GetDenominator(), r.GetSuccesses()
		if n <= 0 {
			continue
		}
		layer := strings.ToLower(strings.TrimPrefix(r.GetLayer().String(), "READINESS_LAYER_"))
		if k < 0 || k > n {
			return 0, fmt.Sprintf("inconsistent %s counts %d/%d", layer, k, n)
		}
		if lb := wilsonLower(k, n); lb < best {
			best, why = lb, fmt.Sprintf("95%% Wilson lower bound of the %s success rate %d/%d", layer, k, n)
		}
	}
	if math.IsInf(best, 1) {
		return 0, why
	}
	return best, why
}

// wilsonLower is the lower bound of the Wilson score interval for k
// successes in n trials (n > 0).
func wilsonLower(k, n int64) float64 {
	p, nf, z2 := float64(k)/float64(n), float64(n), wilsonZ*wilsonZ
	centre := p + z2/(2*nf)
	margin := wilsonZ * math.Sqrt(p*(1-p)/nf+z2/(4*nf*nf))
	return min(p, max(0, (centre-margin)/(1+z2/nf))) // rounding never lifts it above p
}
