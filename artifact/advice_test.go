package artifact

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

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

// A quota limit is counted only when positive and with a window: a limit
// without one, or one that is not positive, is advised.
func TestAdviseQuotaLimit(t *testing.T) {
	hour := durationpb.New(time.Hour)
	for _, c := range []struct {
		q    *mcpreadyv1.DeclaredQuota
		want string
	}{
		{&mcpreadyv1.DeclaredQuota{Limit: 100, Window: hour}, ""},
		{&mcpreadyv1.DeclaredQuota{Unit: "call"}, ""},
		{&mcpreadyv1.DeclaredQuota{Limit: 100}, "quota.limit"},
		{&mcpreadyv1.DeclaredQuota{Limit: 100, Window: durationpb.New(-time.Second)}, "quota.limit"},
		{&mcpreadyv1.DeclaredQuota{Limit: -1, Window: hour}, "quota.limit"},
		{&mcpreadyv1.DeclaredQuota{Window: hour}, "quota.limit"},
	} {
		got := Advise(New(KindDeclaration, "docs", &mcpreadyv1.Declaration{Quota: c.q}))
		if paths := advisedPaths(got); paths != c.want {
			t.Errorf("%v: advised %q, want %q", c.q, paths, c.want)
		}
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
// advisory names a Declaration's quota limit or partition key.
func FuzzAdvise(f *testing.F) {
	f.Add([]byte(`{"apiVersion":"mcpready.dev/v1","kind":"TrustPolicy","metadata":{"name":"org/t"},"spec":{"keys":[{"name":"k","kinds":["Evidence"]}]}}`))
	f.Add([]byte(`{"apiVersion":"mcpready.dev/v1","kind":"Declaration","metadata":{"name":"docs"},"spec":{"quota":{"partitionKeys":["account"]}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		o, err := Parse(data)
		if err != nil {
			return
		}
		for _, a := range Advise(o) {
			if o.Kind != KindDeclaration || (a.Path != "quota.limit" && !strings.HasPrefix(a.Path, "quota.partitionKeys[")) {
				t.Fatalf("advisory %v", a)
			}
		}
	})
}
