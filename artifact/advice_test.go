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
	if paths, want := advisedPaths(got), "keys[1].evidenceIssuer keys[1].independence keys[2].independence"; paths != want {
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

// TestAdviseQuotaPartitionKeys: a Declaration's quota partition key other
// than "tenant" (the one the agent reads, matched exactly) is advised
// about. Before, it was accepted and silently ignored.
func TestAdviseQuotaPartitionKeys(t *testing.T) {
	d := &mcpreadyv1.Declaration{Quota: &mcpreadyv1.DeclaredQuota{Unit: "call", PartitionKeys: []string{"tenant", "account", "Tenant"}}}
	got := Advise(New(KindDeclaration, "docs", d))
	if paths, want := advisedPaths(got), "quota.partitionKeys[1] quota.partitionKeys[2]"; paths != want {
		t.Fatalf("advised %q, want %q", paths, want)
	}
	if !strings.Contains(got[0].String(), `partition key "account" is not read`) {
		t.Fatalf("message: %s", got[0])
	}
	d.Quota.PartitionKeys = []string{"tenant"}
	if a := Advise(New(KindDeclaration, "docs", d)); a != nil {
		t.Fatalf("tenant advised: %v", a)
	}
}

// advisedPaths joins the advisories' paths.
func advisedPaths(as []Advisory) string {
	var paths []string
	for _, a := range as {
		paths = append(paths, a.Path)
	}
	return strings.Join(paths, " ")
}

// FuzzAdvise: Advise never panics on a parsed artifact, and every
// advisory names a key's evidenceIssuer or independence, or a
// Declaration's quota partition key.
func FuzzAdvise(f *testing.F) {
	f.Add([]byte(`{"apiVersion":"mcpready.dev/v1","kind":"TrustPolicy","metadata":{"name":"org/t"},"spec":{"keys":[{"name":"k","kinds":["Evidence"]}]}}`))
	f.Add([]byte(`{"apiVersion":"mcpready.dev/v1","kind":"TrustPolicy","metadata":{"name":"org/t"},"spec":{"keys":[{"name":"k","kinds":["*"],"revoked":true}]}}`))
	f.Add([]byte(`{"apiVersion":"mcpready.dev/v1","kind":"Declaration","metadata":{"name":"docs"},"spec":{"quota":{"partitionKeys":["account"]}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		o, err := Parse(data)
		if err != nil {
			return
		}
		for _, a := range Advise(o) {
			if strings.HasPrefix(a.Path, "quota.partitionKeys[") && o.Kind == KindDeclaration {
				continue
			}
			if !strings.HasPrefix(a.Path, "keys[") || !(strings.HasSuffix(a.Path, ".evidenceIssuer") || strings.HasSuffix(a.Path, ".independence")) {
				t.Fatalf("advisory %v", a)
			}
		}
	})
}
