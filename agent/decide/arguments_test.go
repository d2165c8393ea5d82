package decide

import (
	"errors"
	"testing"

	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/readiness"
)

// A registry entry's argumentContract.requiredArguments is enforced: a
// call that lacks one of them is not routed to that entry (step 4,
// arguments_missing), and a class falls back to a member whose contract
// the call meets. Keys are compared exactly, as MCP servers read them.
// Before, the field was accepted and ignored.
func TestRequiredArguments(t *testing.T) {
	strict := newRegEntry("com.example/docs", "lookup", "https://a.example", "eu")
	strict.ArgumentContract = &mcpreadyv1.ArgumentContract{RequiredArguments: []string{"query", "lang"}}
	loose := newRegEntry("com.other/docs", "lookup", "https://b.example", "eu")
	loose.ArgumentContract = &mcpreadyv1.ArgumentContract{RequiredArguments: []string{"query"}}
	s, err := NewSnapshot(Inputs{PolicyVersion: "1", Policy: &mcpreadyv1.Policy{
		Inventory:          []string{"*"},
		Evidence:           &mcpreadyv1.EvidenceRules{OnUnknown: mcpreadyv1.UnknownEvidenceAction_UNKNOWN_EVIDENCE_ACTION_ALLOW},
		Principals:         []*mcpreadyv1.PrincipalRule{{PrincipalClass: "*", Allow: []string{"*"}}},
		EquivalenceClasses: []*mcpreadyv1.EquivalenceClass{{Name: "docs_lookup", Members: []string{"com.example/docs/lookup", "com.other/docs/lookup"}, FallbackAllowed: true}},
	}, Entries: map[string]*mcpreadyv1.RegistryEntry{"strict": strict, "loose": loose}})
	if err != nil {
		t.Fatal(err)
	}
	routes := func(tool, args string) ([]string, error) {
		d := s.Decide(Request{Tool: tool, Principal: "p", Arguments: []byte(args), Now: t0}, nil)
		var out []string
		for _, r := range d.Routes {
			out = append(out, r.Entry)
		}
		return out, d.Refusal
	}
	if got, err := routes("com.example/docs/lookup", `{"query":"q","lang":"en"}`); err != nil || len(got) != 1 {
		t.Fatalf("contract met: %v %v", got, err)
	}
	for _, args := range []string{`{"query":"q"}`, `{"query":"q","Lang":"en"}`, `{}`, ``, `[1]`} {
		_, err := routes("com.example/docs/lookup", args)
		var re *RefusalError
		if !errors.As(err, &re) || re.Code != readiness.CodeArgumentsMissing || re.Step != readiness.StepSemantic {
			t.Errorf("%s: %v, want arguments_missing at step 4", args, err)
		}
	}
	if got, err := routes("com.example/docs/lookup", `{"query":"q","\u006cang":"en"}`); err != nil || len(got) != 1 {
		t.Fatalf("an escaped key is the key: %v %v", got, err)
	}
	// The class routes to the member whose contract the call meets.
	if got, err := routes("docs_lookup", `{"query":"q"}`); err != nil || len(got) != 1 || got[0] != "loose" {
		t.Fatalf("class call without lang: %v %v, want loose only", got, err)
	}
	if got, err := routes("docs_lookup", `{"query":"q","lang":"en"}`); err != nil || len(got) != 2 {
		t.Fatalf("class call with lang: %v %v, want both", got, err)
	}
	// A listing has no arguments: both are shown.
	if vs := s.Visible(Request{Principal: "p", Now: t0}, nil); len(vs) == 0 {
		t.Fatal("nothing listed")
	}
}
