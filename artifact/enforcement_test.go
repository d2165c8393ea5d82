package artifact_test

import (
	"slices"
	"testing"

	"github.com/mcpready/mcpready/artifact"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
)

// TestEveryFieldClassified walks the proto descriptors of every kind's spec
// and fails on a field the enforcement table does not classify, or a row
// that names no field.
func TestEveryFieldClassified(t *testing.T) {
	for _, u := range artifact.Unclassified() {
		t.Error(u)
	}
	n := 0
	for _, k := range artifact.Kinds() {
		for _, f := range artifact.Enforcement(k) {
			n++
			if f.Status == artifact.Enforced && f.Where == "" {
				t.Errorf("%s %s: enforced, but the table does not say where", k, f.Path)
			}
		}
	}
	if n < 300 {
		t.Errorf("only %d fields walked; the descriptor walk lost some", n)
	}
}

func TestKnownUnenforcedFields(t *testing.T) {
	for _, c := range []struct {
		k    artifact.Kind
		path string
	}{
		{artifact.KindPolicy, "provenance.retrievalDigest"},
		{artifact.KindRegistryEntry, "authority.tenantBoundary"},
	} {
		r, ok := artifact.RuleFor(c.k, c.path)
		if !ok || r.Status != artifact.NotEnforced {
			t.Errorf("%s %s: %v, want not enforced", c.k, c.path, r.Status)
		}
	}
}

func TestUnenforcedNamesSetFields(t *testing.T) {
	p := &mcpreadyv1.Policy{
		SemanticValidation: map[string]string{"nonEmpty": "size(result) > 0"},
		Retry:              &mcpreadyv1.RetryRules{MaxAttempts: 2},
		IncidentOwners:     []*mcpreadyv1.IncidentOwner{{Match: "*", Owner: "a"}, {Match: "b/*", Owner: "b"}},
		Provenance:         &mcpreadyv1.Provenance{RetrievalDigest: "sha256:00"},
	}
	got := artifact.Unenforced(artifact.New(artifact.KindPolicy, "default", p))
	want := []string{"provenance.retrievalDigest"}
	if !slices.Equal(got, want) {
		t.Errorf("Unenforced = %q, want %q", got, want)
	}
	if got := artifact.Unenforced(artifact.New(artifact.KindPolicy, "default", &mcpreadyv1.Policy{Retry: &mcpreadyv1.RetryRules{MaxAttempts: 2}})); len(got) != 0 {
		t.Errorf("enforced fields only: Unenforced = %q, want none", got)
	}
	if got := artifact.Unenforced(nil); got != nil {
		t.Errorf("Unenforced(nil) = %q", got)
	}
}
