package artifact

import (
	"strings"
	"testing"

	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
)

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
// advisory names a Declaration's quota partition key.
func FuzzAdvise(f *testing.F) {
	f.Add([]byte(`{"apiVersion":"mcpready.dev/v1","kind":"TrustPolicy","metadata":{"name":"org/t"},"spec":{"keys":[{"name":"k","kinds":["Evidence"]}]}}`))
	f.Add([]byte(`{"apiVersion":"mcpready.dev/v1","kind":"Declaration","metadata":{"name":"docs"},"spec":{"quota":{"partitionKeys":["account"]}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		o, err := Parse(data)
		if err != nil {
			return
		}
		for _, a := range Advise(o) {
			if o.Kind != KindDeclaration || !strings.HasPrefix(a.Path, "quota.partitionKeys[") {
				t.Fatalf("advisory %v", a)
			}
		}
	})
}
