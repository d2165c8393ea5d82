package aggregate

// The measures of a window besides the per-layer rates: latency
// reservoirs (overall, cold, warm), the semantic-valid rate and the
// access refusals by kind.

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"

	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
)

// reservoir is a bounded latency sample (reservoir sampling past its
// bound) and how many latencies it saw.
type reservoir struct {
	samples []float64
	seen    int64
}

func (r *reservoir) add(ms float64, bound int) {
	r.seen++
	if len(r.samples) < bound {
		r.samples = append(r.samples, ms)
	} else if j := rand.Int64N(r.seen); j < int64(len(r.samples)) {
		r.samples[j] = ms
	}
}

func (r *reservoir) summary() *mcpreadyv1.Latency {
	lat := slices.Clone(r.samples)
	slices.Sort(lat)
	return &mcpreadyv1.Latency{P50Ms: percentile(lat, .50), P90Ms: percentile(lat, .90), P95Ms: percentile(lat, .95), P99Ms: percentile(lat, .99), Count: r.seen}
}

func percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(p*float64(len(sorted))+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// maxVersions bounds the validator versions a semantic rate names.
const maxVersions = 8

// semanticCount counts the semantic verdicts of results that passed
// result validity.
type semanticCount struct {
	valid, checked, unchecked int64
	versions                  map[string]struct{}
}

// add counts r, a receipt whose result passed result validity: its
// semantic_validation is "" (no validator applied), "passed", or
// "failed:<key>" / "error:<key>" (withheld or annotated alike).
func (s *semanticCount) add(r *mcpreadyv1.Receipt) {
	v := r.GetSemanticValidation()
	if v == "" {
		s.unchecked++
		return
	}
	s.checked++
	if v == "passed" {
		s.valid++
	}
	if ver := r.GetSemanticValidatorVersion(); ver != "" && len(s.versions) < maxVersions {
		if s.versions == nil {
			s.versions = map[string]struct{}{}
		}
		s.versions[ver] = struct{}{}
	}
}

func (s *semanticCount) rate() *mcpreadyv1.LayerRate {
	vs := make([]string, 0, len(s.versions))
	for v := range s.versions {
		vs = append(vs, v)
	}
	sort.Strings(vs)
	def := "every applicable semantic validator passed"
	if len(vs) > 0 {
		def += fmt.Sprintf(" (validator versions %s)", strings.Join(vs, "; "))
	}
	lr := &mcpreadyv1.LayerRate{Layer: mcpreadyv1.ReadinessLayer_READINESS_LAYER_SEMANTIC, Successes: s.valid, Denominator: s.checked,
		Excluded: s.unchecked, SuccessDefinition: def}
	if s.checked > 0 {
		lr.Rate = float64(s.valid) / float64(s.checked)
	}
	return lr
}

// accessLayer is the index of the access layer in layers.
const accessLayer = 2

// accessCount counts calls that reached the access layer and the
// refusals there by kind.
type accessCount struct {
	reached, unauthorized, paymentRequired, forbidden, rateLimited, tokenFailures int64
}

func (a *accessCount) rates() *mcpreadyv1.PassiveAccessRates {
	return &mcpreadyv1.PassiveAccessRates{Denominator: a.reached, Unauthorized: a.unauthorized, PaymentRequired: a.paymentRequired,
		Forbidden: a.forbidden, RateLimited: a.rateLimited, TokenFailures: a.tokenFailures}
}

// add counts r, a receipt that reached the access layer, and the
// kind of its refusal when refused there: by HTTP status, else by outcome
// (ACCESS_NOT_READY without an HTTP refusal is the agent's own: no token
// could be obtained or presented).
func (a *accessCount) add(r *mcpreadyv1.Receipt, refused bool) {
	a.reached++
	if !refused {
		return
	}
	switch status := strings.TrimPrefix(r.GetTransportStatus(), "http "); {
	case status == "401":
		a.unauthorized++
	case status == "402" || r.GetOutcome() == mcpreadyv1.OutcomeClass_OUTCOME_CLASS_BILLING:
		a.paymentRequired++
	case status == "403":
		a.forbidden++
	case status == "429" || r.GetOutcome() == mcpreadyv1.OutcomeClass_OUTCOME_CLASS_RATE_LIMITED:
		a.rateLimited++
	case r.GetOutcome() == mcpreadyv1.OutcomeClass_OUTCOME_CLASS_ACCESS_NOT_READY:
		a.tokenFailures++
	}
}
