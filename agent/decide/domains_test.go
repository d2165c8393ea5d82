package decide

import (
	"slices"
	"testing"
	"time"

	"github.com/mcpready/mcpready/agent/circuit"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
)

// Three members of one class: a and b share the operator "acme" (b by its
// Declaration), c runs elsewhere.
func domainSnapshot(t testing.TB) *Snapshot {
	t.Helper()
	ent := func(server string, domains ...string) *mcpreadyv1.RegistryEntry {
		e := newRegEntry(server, "lookup", "https://"+server, "eu")
		e.FailureDomains = domains
		return e
	}
	s, err := NewSnapshot(Inputs{PolicyVersion: "1", Policy: &mcpreadyv1.Policy{
		Inventory:   []string{"*"},
		Evidence:    &mcpreadyv1.EvidenceRules{OnUnknown: mcpreadyv1.UnknownEvidenceAction_UNKNOWN_EVIDENCE_ACTION_ALLOW},
		SideEffects: []*mcpreadyv1.SideEffectRule{{Match: "*/lookup", Assigned: readOnly}},
		Principals:  []*mcpreadyv1.PrincipalRule{{PrincipalClass: "*", Allow: []string{"*"}}},
		EquivalenceClasses: []*mcpreadyv1.EquivalenceClass{{Name: "lookup", FallbackAllowed: true,
			Members: []string{"a/lookup", "b/lookup", "c/lookup"}}},
	}, Entries: map[string]*mcpreadyv1.RegistryEntry{
		"a": ent("a", "operator:acme", "cloud:aws/eu-west-1"), "b": ent("b"), "c": ent("c", "operator:other"),
	}, Declarations: map[string]*mcpreadyv1.Declaration{"b": {ServerName: "b", FailureDomains: []string{"operator:acme", "bad,name"}}}})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func entries(d Decision) []string {
	var out []string
	for _, r := range d.Routes {
		out = append(out, r.Entry)
	}
	return out
}

// The fallback after a route prefers another failure domain: a, then c
// (another operator), then b (acme again). Before, the order was a, b, c.
func TestFallbackPrefersOtherDomain(t *testing.T) {
	s := domainSnapshot(t)
	d := s.Decide(Request{Tool: "lookup", Principal: "p", Now: t0}, nil)
	if got := entries(d); !slices.Equal(got, []string{"a", "c", "b"}) {
		t.Fatalf("routes %v, want a c b", got)
	}
	if d.Routes[0].Domains != "cloud:aws/eu-west-1,operator:acme" || d.Routes[2].Domains != "operator:acme" {
		t.Fatalf("domains %q %q (a name with a comma is dropped)", d.Routes[0].Domains, d.Routes[2].Domains)
	}
}

// A failure marks every route sharing the failed route's domain suspect:
// they rank below the route in another domain until the suspicion ends.
func TestSuspectDomainRanksLower(t *testing.T) {
	s := domainSnapshot(t)
	set := circuit.NewSet(circuit.Config{BaseEjection: time.Minute})
	set.MarkSuspect([]string{"operator:acme"}, t0)
	if got := entries(s.Decide(Request{Tool: "lookup", Principal: "p", Now: t0.Add(time.Second)}, set)); !slices.Equal(got, []string{"c", "a", "b"}) {
		t.Fatalf("routes %v while acme is suspect, want c first", got)
	}
	if got := entries(s.Decide(Request{Tool: "lookup", Principal: "p", Now: t0.Add(2 * time.Minute)}, set)); got[0] != "a" && got[0] != "c" {
		t.Fatalf("routes %v after the suspicion ended", got)
	}
}

// SplitDomains yields Route.Domains' names in order, none for "", stops
// when the caller stops, and allocates nothing when ranged over.
func TestSplitDomains(t *testing.T) {
	if got := slices.Collect(SplitDomains("cloud:x,operator:acme")); !slices.Equal(got, []string{"cloud:x", "operator:acme"}) {
		t.Fatalf("split %q", got)
	}
	if got := slices.Collect(SplitDomains("")); len(got) != 0 {
		t.Fatalf("empty: %q", got)
	}
	for d := range SplitDomains("a,b,c") {
		if d != "a" {
			t.Fatalf("did not stop: %q", d)
		}
		break
	}
	n := 0
	if allocs := testing.AllocsPerRun(100, func() {
		for range SplitDomains("cloud:x,operator:acme") {
			n++
		}
	}); allocs != 0 {
		t.Fatalf("%v allocs", allocs)
	}
}
