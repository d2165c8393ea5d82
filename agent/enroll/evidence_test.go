package enroll_test

import (
	"strings"
	"testing"
	"time"

	"github.com/mcpready/mcpready/agent/enroll"
	"github.com/mcpready/mcpready/artifact"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
)

func TestEvidenceRecordsFailedFixtures(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	q := &mcpreadyv1.RegistryEntry{Identity: &mcpreadyv1.ToolIdentity{ServerName: "acme", ServerVersion: "1", ToolName: "t"},
		Qualification: &mcpreadyv1.Qualification{Suite: enroll.Suite}}
	unqualified := &mcpreadyv1.RegistryEntry{Identity: &mcpreadyv1.ToolIdentity{ServerName: "acme", ToolName: "u"}}
	entries := []*artifact.Object{artifact.New(artifact.KindRegistryEntry, "acme/t", q), artifact.New(artifact.KindRegistryEntry, "acme/u", unqualified)}
	transcript := []enroll.Fixture{{Tool: "t", Name: "listed", Passed: true}, {Tool: "t", Name: "empty-arguments-rejected", Negative: true, Detail: "secret text"},
		{Tool: "u", Name: "listed", Passed: true}}
	out, err := enroll.Evidence(entries, transcript, "org", now, time.Hour)
	if err != nil || len(out) != 1 {
		t.Fatalf("%d evidence, %v (only qualified entries get one)", len(out), err)
	}
	ev := out[0].Spec.(*mcpreadyv1.Evidence)
	if out[0].Metadata.Name != enroll.EvidenceName("acme/t") || ev.GetSample().GetAttempted() != 2 || ev.GetRates()[0].GetSuccesses() != 1 ||
		len(ev.GetErrors()) != 1 || ev.GetErrors()[0].GetCode() != "fixture:empty-arguments-rejected" || !ev.GetExpiresAt().AsTime().Equal(now.Add(time.Hour)) {
		t.Fatalf("evidence %v", ev)
	}
	if err := out[0].Validate(); err != nil {
		t.Fatal(err)
	}
	b, _ := out[0].CanonicalJSON()
	if strings.Contains(string(b), "secret text") {
		t.Fatal("a fixture's detail (server text) reached the evidence")
	}
}
