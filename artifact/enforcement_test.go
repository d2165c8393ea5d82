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
		{artifact.KindRegistryEntry, "authority.tenantBoundary"},
	} {
		r, ok := artifact.RuleFor(c.k, c.path)
		if !ok || r.Status != artifact.NotEnforced {
			t.Errorf("%s %s: %v, want not enforced", c.k, c.path, r.Status)
		}
	}
}

func TestUnenforcedNamesSetFields(t *testing.T) {
	e := &mcpreadyv1.RegistryEntry{
		SideEffect: mcpreadyv1.SideEffectClass_SIDE_EFFECT_CLASS_READ_ONLY,
		Authority:  &mcpreadyv1.Authority{Scopes: []string{"read"}, TenantBoundary: "per-tenant credential"},
		Provenance: &mcpreadyv1.Provenance{RetrievalDigest: artifact.Digest([]byte("x")), SourceUri: "https://x/"},
	}
	got := artifact.Unenforced(artifact.New(artifact.KindRegistryEntry, "docs", e))
	want := []string{"authority.tenantBoundary"}
	if !slices.Equal(got, want) {
		t.Errorf("Unenforced = %q, want %q", got, want)
	}
	e.Authority.TenantBoundary = ""
	if got := artifact.Unenforced(artifact.New(artifact.KindRegistryEntry, "docs", e)); len(got) != 0 {
		t.Errorf("enforced fields only: Unenforced = %q, want none", got)
	}
	if got := artifact.Unenforced(nil); got != nil {
		t.Errorf("Unenforced(nil) = %q", got)
	}
}
