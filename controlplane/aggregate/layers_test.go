package aggregate

import (
	"strings"
	"testing"

	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/readiness"
)

const (
	success = mcpreadyv1.OutcomeClass_OUTCOME_CLASS_SUCCESS
	cold    = mcpreadyv1.CallWarmth_CALL_WARMTH_COLD_NEW_SESSION
	idle    = mcpreadyv1.CallWarmth_CALL_WARMTH_COLD_IDLE
	warm    = mcpreadyv1.CallWarmth_CALL_WARMTH_WARM
)

func warmth(w mcpreadyv1.CallWarmth) func(*mcpreadyv1.Receipt) {
	return func(r *mcpreadyv1.Receipt) { r.Warmth = w }
}

// Cold calls (new session or idle) and warm calls have their own latency
// distributions; the overall one covers both, and receipts that say
// neither (older agents) count in the overall one only. Before, cold and
// warm latencies were mixed into one.
func TestColdAndWarmLatencyApart(t *testing.T) {
	a, sk, _ := newAgg(t, nil)
	var rs []*mcpreadyv1.Receipt
	for i := 1; i <= 10; i++ {
		rs = append(rs, rc(success, 1, i, warmth(warm)))
	}
	rs = append(rs, rc(success, 1, 900, warmth(cold)), rc(success, 1, 1000, warmth(idle)), rc(success, 1, 50))
	a.Observe("agent-1", rs, digestsFor(rs))
	evs := flushAll(t, a, sk)
	if len(evs) != 1 {
		t.Fatalf("%d evidence", len(evs))
	}
	ev := evs[0]
	if c := ev.GetColdLatency(); c.GetCount() != 2 || c.GetP50Ms() != 900 || c.GetP99Ms() != 1000 {
		t.Errorf("cold latency %+v", c)
	}
	if w := ev.GetWarmLatency(); w.GetCount() != 10 || w.GetP50Ms() != 5 || w.GetP99Ms() != 10 {
		t.Errorf("warm latency %+v", w)
	}
	if l := ev.GetLatency(); l.GetCount() != 13 || l.GetP99Ms() != 1000 {
		t.Errorf("overall latency %+v", l)
	}
}

// The semantic-valid rate counts, over the results that passed result
// validity and met a validator, those every validator passed; results no
// validator applied to are excluded, results failing an earlier layer are
// not in it at all, and the validator versions are named. Before, the
// semantic outcome in receipts was not aggregated.
func TestSemanticValidRate(t *testing.T) {
	a, sk, _ := newAgg(t, nil)
	sem := func(outcome string) func(*mcpreadyv1.Receipt) {
		return func(r *mcpreadyv1.Receipt) { r.SemanticValidation, r.SemanticValidatorVersion = outcome, "fresh=v2" }
	}
	semFailed := func(r *mcpreadyv1.Receipt) {
		sem("failed:fresh")(r)
		r.Outcome, r.FailedLayer = mcpreadyv1.OutcomeClass_OUTCOME_CLASS_INVALID_RESULT, mcpreadyv1.ReadinessLayer_READINESS_LAYER_SEMANTIC
	}
	rs := []*mcpreadyv1.Receipt{
		rc(success, 1, 5, sem("passed")), rc(success, 1, 5, sem("passed")), rc(success, 1, 5, sem("passed")),
		rc(success, 1, 5, semFailed),
		rc(success, 1, 5, sem("failed:fresh")), // annotated, not withheld: still invalid
		rc(success, 1, 5, sem("error:fresh")),
		rc(success, 1, 5), rc(success, 1, 5), // no validator applies
		rc(mcpreadyv1.OutcomeClass_OUTCOME_CLASS_TOOL_ERROR, 1, 5),
		rc(mcpreadyv1.OutcomeClass_OUTCOME_CLASS_REFUSED, 0, 0),
	}
	a.Observe("agent-1", rs, digestsFor(rs))
	evs := flushAll(t, a, sk)
	s := evs[0].GetSemanticValid()
	if s.GetLayer() != mcpreadyv1.ReadinessLayer_READINESS_LAYER_SEMANTIC || s.GetSuccesses() != 3 || s.GetDenominator() != 6 || s.GetExcluded() != 2 || s.GetRate() != 0.5 {
		t.Fatalf("semantic-valid rate %+v, want 3/6 excluding 2", s)
	}
	if d := s.GetSuccessDefinition(); d == "" || !strings.Contains(d, "fresh=v2") {
		t.Fatalf("definition %q does not name the validator version", d)
	}
	for _, lr := range evs[0].GetRates() {
		if lr.GetLayer() == mcpreadyv1.ReadinessLayer_READINESS_LAYER_SEMANTIC {
			t.Fatal("the semantic rate is in rates, which routing confidence reads")
		}
	}
}

// Access refusals are counted per kind (401, 402, 403, 429, token
// failures) within each principal class's evidence, each principal class
// its own subject and the auth class labelled, never one rate across
// principals. Before, access had one rate per subject and no auth class.
func TestAccessRatesPerPrincipalClass(t *testing.T) {
	a, sk, _ := newAgg(t, nil)
	principal := func(p, auth string) func(*mcpreadyv1.Receipt) {
		return func(r *mcpreadyv1.Receipt) { r.PrincipalClass, r.AuthClass = p, auth }
	}
	refused := func(o mcpreadyv1.OutcomeClass, status string) func(*mcpreadyv1.Receipt) {
		return func(r *mcpreadyv1.Receipt) { r.Outcome, r.TransportStatus = o, status }
	}
	access := mcpreadyv1.OutcomeClass_OUTCOME_CLASS_ACCESS_NOT_READY
	rs := []*mcpreadyv1.Receipt{
		rc(success, 1, 5, principal("employee", "oauth:token_exchange")),
		rc(success, 1, 5, principal("employee", "oauth:token_exchange"), refused(access, "http 401")),
		rc(success, 1, 5, principal("employee", "oauth:token_exchange"), refused(access, "http 403")),
		rc(success, 1, 5, principal("employee", "oauth:token_exchange"), refused(access, "not sent")),
		rc(success, 1, 5, principal("employee", "oauth:token_exchange"), refused(mcpreadyv1.OutcomeClass_OUTCOME_CLASS_BILLING, "http 402")),
		rc(success, 1, 5, principal("employee", "oauth:token_exchange"), refused(mcpreadyv1.OutcomeClass_OUTCOME_CLASS_RATE_LIMITED, "http 429")),
		rc(success, 1, 5, principal("service", "oauth:client_credentials")),
		rc(success, 1, 5, principal("service", "oauth:client_credentials")),
		rc(mcpreadyv1.OutcomeClass_OUTCOME_CLASS_TRANSPORT_FAILURE, 1, 5, principal("service", "oauth:client_credentials")),
	}
	a.Observe("agent-1", rs, digestsFor(rs))
	evs := flushAll(t, a, sk)
	if len(evs) != 2 {
		t.Fatalf("%d evidence, want one per principal class", len(evs))
	}
	for _, ev := range evs {
		ar := ev.GetAccessRates()
		switch ev.GetPrincipalClass() {
		case "employee":
			if ev.GetAuthClass() != "oauth:token_exchange" || ar.GetDenominator() != 6 || ar.GetUnauthorized() != 1 || ar.GetForbidden() != 1 ||
				ar.GetPaymentRequired() != 1 || ar.GetRateLimited() != 1 || ar.GetTokenFailures() != 1 {
				t.Errorf("employee: auth %q access %+v", ev.GetAuthClass(), ar)
			}
		case "service":
			if ev.GetAuthClass() != "oauth:client_credentials" || ar.GetDenominator() != 2 || ar.GetUnauthorized()+ar.GetForbidden()+ar.GetTokenFailures() != 0 {
				t.Errorf("service: auth %q access %+v", ev.GetAuthClass(), ar)
			}
		default:
			t.Errorf("evidence for principal class %q", ev.GetPrincipalClass())
		}
	}
	// One principal class under two auth classes: two subjects.
	a2, sk2, _ := newAgg(t, nil)
	two := []*mcpreadyv1.Receipt{rc(success, 1, 5, principal("employee", "oauth:token_exchange")), rc(success, 1, 5, principal("employee", readiness.AuthBearer))}
	a2.Observe("agent-1", two, digestsFor(two))
	if evs := flushAll(t, a2, sk2); len(evs) != 2 || evs[0].GetSubject().GetSubjectId() == evs[1].GetSubject().GetSubjectId() {
		t.Fatalf("two auth classes folded into %d evidence", len(evs))
	}
}
