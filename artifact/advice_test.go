package artifact

import (
	"strings"
	"testing"

	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
)

// TestAdviseEvidenceGrantUnbound: a TrustPolicy whose key may sign
// Evidence (by name or "*") without evidenceIssuer or independence is
// advised about each missing field; a bound, a revoked or a non-Evidence
// grant is not. Before, nothing warned: such a grant bound no claim.
func TestAdviseEvidenceGrantUnbound(t *testing.T) {
	tp := &mcpreadyv1.TrustPolicy{Keys: []*mcpreadyv1.KeyGrant{
		{Name: "bound", Kinds: []string{"Evidence"}, EvidenceIssuer: "org/qa", Independence: "INDEPENDENT"},
		{Name: "loose", Kinds: []string{"Policy", "Evidence"}},
		{Name: "any", Kinds: []string{"*"}, EvidenceIssuer: "org/probe"},
		{Name: "gone", Kinds: []string{"Evidence"}, Revoked: true},
		{Name: "policy-only", Kinds: []string{"Policy"}},
	}}
	got := Advise(New(KindTrustPolicy, "org/trust", tp))
	var paths []string
	for _, a := range got {
		paths = append(paths, a.Path)
	}
	if want := "keys[1].evidenceIssuer keys[1].independence keys[2].independence"; strings.Join(paths, " ") != want {
		t.Fatalf("advised %q, want %q", paths, want)
	}
	if !strings.Contains(got[0].String(), `key "loose" may sign Evidence but binds no issuer`) {
		t.Fatalf("message: %s", got[0])
	}
	if a := Advise(New(KindPolicy, "org/p", &mcpreadyv1.Policy{})); a != nil {
		t.Fatalf("a Policy advised: %v", a)
	}
	if a := Advise(nil); a != nil {
		t.Fatal(a)
	}
}

// FuzzAdvise: Advise never panics on a parsed artifact, and every
// advisory names a key's evidenceIssuer or independence.
func FuzzAdvise(f *testing.F) {
	f.Add([]byte(`{"apiVersion":"mcpready.dev/v1","kind":"TrustPolicy","metadata":{"name":"org/t"},"spec":{"keys":[{"name":"k","kinds":["Evidence"]}]}}`))
	f.Add([]byte(`{"apiVersion":"mcpready.dev/v1","kind":"TrustPolicy","metadata":{"name":"org/t"},"spec":{"keys":[{"name":"k","kinds":["*"],"revoked":true}]}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		o, err := Parse(data)
		if err != nil {
			return
		}
		for _, a := range Advise(o) {
			if !strings.HasPrefix(a.Path, "keys[") || !(strings.HasSuffix(a.Path, ".evidenceIssuer") || strings.HasSuffix(a.Path, ".independence")) {
				t.Fatalf("advisory %v", a)
			}
		}
	})
}
