package enroll_test

import (
	"context"
	"errors"
	"testing"

	"github.com/mcpready/mcpready/agent/enroll"
	"github.com/mcpready/mcpready/artifact"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
)

// registry is a stored registry as data (Place only reads).
type registry map[string]enroll.Stored

func (r registry) Entry(_ context.Context, name string) (enroll.Stored, bool, error) {
	s, ok := r[name]
	return s, ok, nil
}

func entry(name, version string) *artifact.Object {
	return artifact.New(artifact.KindRegistryEntry, name, &mcpreadyv1.RegistryEntry{Provenance: &mcpreadyv1.Provenance{Version: "1"},
		Identity: &mcpreadyv1.ToolIdentity{ServerName: "acme", ServerVersion: version, ToolName: "t"}})
}

func stored(version, supersededBy string, labels map[string]string) enroll.Stored {
	e := entry("x", version).Spec.(*mcpreadyv1.RegistryEntry)
	e.Region, e.WorkflowAllowlist = "eu", []string{"wf"}
	return enroll.Stored{Spec: e, Version: "4", Labels: labels, Status: &mcpreadyv1.RegistryStatus{SupersededBy: supersededBy}}
}

func TestPlace(t *testing.T) {
	ctx := context.Background()
	// Nothing stored: unchanged.
	fresh := entry("acme/t", "1")
	if prior, err := enroll.Place(ctx, registry{}, fresh); err != nil || prior || fresh.Metadata.Name != "acme/t" || fresh.Version() != "1" {
		t.Fatalf("new: %v %v %s", prior, err, fresh.Version())
	}
	// Followed through two drifts to the candidate pinning version 3; the
	// organisation's scoping is kept.
	reg := registry{"acme/t": stored("1", "acme/t+a", nil), "acme/t+a": stored("2", "acme/t+b", nil), "acme/t+b": stored("3", "", map[string]string{"region": "eu"})}
	reg["acme/t+b"].Spec.Supersedes = "acme/t+a"
	fresh = entry("acme/t", "3")
	if prior, err := enroll.Place(ctx, reg, fresh); err != nil || !prior || fresh.Metadata.Name != "acme/t+b" || fresh.Version() != "5" ||
		fresh.Metadata.Labels["region"] != "eu" {
		t.Fatalf("drifted: %v %v %s %s", prior, err, fresh.Metadata.Name, fresh.Version())
	}
	if e := fresh.Spec.(*mcpreadyv1.RegistryEntry); e.GetSupersedes() != "acme/t+a" || e.GetRegion() != "eu" || len(e.GetWorkflowAllowlist()) != 1 {
		t.Fatalf("scoping not kept: %v", e)
	}
	// A new identity no candidate pins, and a superseded-by cycle: refused, bounded.
	reg["acme/t+b"].Status.SupersededBy = "acme/t"
	fresh = entry("acme/t", "9")
	if _, err := enroll.Place(ctx, reg, fresh); !errors.Is(err, enroll.ErrIdentityChanged) || fresh.Metadata.Name != "acme/t" {
		t.Fatalf("unknown identity: %v %s", err, fresh.Metadata.Name)
	}
}

func TestRefuseNamesFailedFixtures(t *testing.T) {
	e := entry("acme/t", "1")
	tr := []enroll.Fixture{{Tool: "t", Name: "listed", Passed: true}, {Tool: "t", Name: "safe-call", Detail: "server text"}, {Tool: "u", Name: "safe-call"}}
	err := enroll.Refuse(e, tr)
	var re *enroll.RefusedError
	if !errors.As(err, &re) || !errors.Is(err, enroll.ErrRequalifyFailed) || len(re.Failed) != 1 || re.Failed[0].Detail != "" || err.Error() == "" {
		t.Fatalf("%v", err)
	}
	e.Spec.(*mcpreadyv1.RegistryEntry).State = mcpreadyv1.LifecycleState_LIFECYCLE_STATE_QUALIFIED
	if err := enroll.Refuse(e, tr); err != nil {
		t.Fatal(err)
	}
}
