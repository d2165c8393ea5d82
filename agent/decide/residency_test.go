package decide

import (
	"errors"
	"testing"

	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/readiness"
)

// The Declaration's dataResidency (where the provider keeps the data) is
// held to the policy's residency rules like the entry's region (where the
// server runs): a provider that keeps data in a region the policy does not
// allow, or denies, is rejected at step 3. Before, dataResidency was
// accepted and ignored, so a server running in an allowed region while
// storing the data elsewhere passed.
func TestDeclaredDataResidency(t *testing.T) {
	for _, tc := range []struct {
		allowed, denied, stored []string
		ok                      bool
	}{
		{[]string{"eu"}, nil, []string{"eu"}, true},
		{[]string{"eu"}, nil, nil, true}, // nothing declared: the entry's region decides
		{[]string{"eu"}, nil, []string{"eu", "us"}, false},
		{nil, []string{"us"}, []string{"us"}, false},
		{nil, []string{"us"}, []string{"eu"}, true},
		{nil, nil, []string{"anywhere"}, true},
	} {
		s, err := NewSnapshot(Inputs{PolicyVersion: "1", Policy: &mcpreadyv1.Policy{
			Inventory:  []string{"*"},
			Evidence:   &mcpreadyv1.EvidenceRules{OnUnknown: mcpreadyv1.UnknownEvidenceAction_UNKNOWN_EVIDENCE_ACTION_ALLOW},
			Principals: []*mcpreadyv1.PrincipalRule{{PrincipalClass: "*", Allow: []string{"*"}}},
			Residency:  &mcpreadyv1.ResidencyRules{AllowedRegions: tc.allowed, DeniedRegions: tc.denied},
		}, Entries: map[string]*mcpreadyv1.RegistryEntry{"docs": newRegEntry("com.example/docs", "lookup", "https://docs.example", "eu")},
			Declarations: map[string]*mcpreadyv1.Declaration{"com.example/docs": {ServerName: "com.example/docs", DataResidency: tc.stored}}})
		if err != nil {
			t.Fatal(err)
		}
		d := s.Decide(Request{Tool: "com.example/docs/lookup", Principal: "p", Now: t0}, nil)
		var re *RefusalError
		switch {
		case tc.ok && d.Refusal != nil:
			t.Errorf("allowed %v denied %v stored %v: %v", tc.allowed, tc.denied, tc.stored, d.Refusal)
		case !tc.ok && (!errors.As(d.Refusal, &re) || re.Code != readiness.CodeResidency || re.Step != readiness.StepResidency):
			t.Errorf("allowed %v denied %v stored %v: %v, want residency at step 3", tc.allowed, tc.denied, tc.stored, d.Refusal)
		}
	}
}

// What a Declaration says of its server's protocol versions and regions
// must include the entry's: protocolVersions are the versions the provider
// supports (an entry pinned to another is rejected at step 1), regions
// where the server runs (residency was decided on the entry's region,
// which the provider's own word would contradict: step 3). Before, both
// lists were accepted and ignored.
func TestDeclaredVersionsAndRegions(t *testing.T) {
	for _, tc := range []struct {
		decl *mcpreadyv1.Declaration
		code readiness.Code // "" admitted
		step readiness.Step
	}{
		{&mcpreadyv1.Declaration{}, "", 0},
		{&mcpreadyv1.Declaration{ProtocolVersions: []string{"2025-11-25", "2026-07-28"}, Regions: []string{"eu", "us"}}, "", 0},
		{&mcpreadyv1.Declaration{ProtocolVersions: []string{"2026-07-28"}}, readiness.CodeProtocolVersion, readiness.StepEligibility},
		{&mcpreadyv1.Declaration{Regions: []string{"us"}}, readiness.CodeResidency, readiness.StepResidency},
	} {
		in := fixture()
		tc.decl.ServerName = "com.example/docs"
		in.Declarations = map[string]*mcpreadyv1.Declaration{"com.example/docs": tc.decl}
		req := baseReq()
		req.Tool = "com.example/docs/docs.lookup"
		d := snap(t, in).Decide(req, nil)
		var re *RefusalError
		switch {
		case tc.code == "" && d.Refusal != nil:
			t.Errorf("%v: %v", tc.decl, d.Refusal)
		case tc.code != "" && (!errors.As(d.Refusal, &re) || re.Code != tc.code || re.Step != tc.step):
			t.Errorf("%v: %v, want %s at step %d", tc.decl, d.Refusal, tc.code, tc.step)
		}
	}
}

// The Policy's incidentOwners name who answers for a dependency: the
// first rule whose match covers "<server>/<tool>" gives the route's
// IncidentOwner (the receipt's selection and a failed call's tool error
// carry it). Before, the rules were accepted and ignored.
func TestIncidentOwner(t *testing.T) {
	in := fixture()
	in.Policy.IncidentOwners = []*mcpreadyv1.IncidentOwner{
		{Match: "com.other/*", Owner: "other-team"},
		{Match: "com.example/*", Owner: "docs-team@example.org"},
		{Match: "*", Owner: "platform"},
	}
	req := baseReq()
	req.Tool = "com.example/docs/docs.lookup"
	d := snap(t, in).Decide(req, nil)
	if d.Refusal != nil || d.Routes[0].IncidentOwner != "docs-team@example.org" {
		t.Fatalf("%v, owner %q", d.Refusal, d.Routes[0].IncidentOwner)
	}
	in.Policy.IncidentOwners = nil
	if d := snap(t, in).Decide(req, nil); d.Routes[0].IncidentOwner != "" {
		t.Fatalf("owner %q without rules", d.Routes[0].IncidentOwner)
	}
}
