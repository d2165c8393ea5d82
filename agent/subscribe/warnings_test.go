package subscribe

import (
	"bytes"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/mcpready/mcpready/agent/internal/cptest"
	"github.com/mcpready/mcpready/artifact"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
)

// TestInstallWarnsAboutUnenforcedFields: an installed artifact that sets a
// field mcpready does not enforce is listed in Snapshot.Warnings and logged
// once, when it is installed, naming the field path.
func TestInstallWarnsAboutUnenforcedFields(t *testing.T) {
	env := cptest.Start(t)
	var logs bytes.Buffer
	c, err := New(Options{Root: env.RootPub, Node: &mcpreadyv1.Node{Id: "n"}, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	tp := env.Sign(artifact.New(artifact.KindTrustPolicy, "default", &mcpreadyv1.TrustPolicy{}))
	if err := c.Apply(artifact.KindTrustPolicy, []*mcpreadyv1.Resource{{Name: "default", Version: "1", Bundle: tp}}, nil, false); err != nil {
		t.Fatal(err)
	}
	if w := c.Snapshot().Warnings(); len(w) != 0 {
		t.Fatalf("warnings for an artifact that sets nothing unenforced: %v", w)
	}
	pol := env.Sign(artifact.New(artifact.KindPolicy, "default", &mcpreadyv1.Policy{
		PolicyOwner: "team",
		Provenance:  &mcpreadyv1.Provenance{RetrievalDigest: "sha256:00"},
	}))
	if err := c.Apply(artifact.KindPolicy, []*mcpreadyv1.Resource{{Name: "default", Version: "2", Bundle: pol}}, nil, false); err != nil {
		t.Fatal(err)
	}
	w := c.Snapshot().Warnings()
	if len(w) != 1 || w[0].Kind != artifact.KindPolicy || w[0].Name != "default" || !slices.Equal(w[0].Fields, []string{"provenance.retrievalDigest"}) {
		t.Fatalf("Warnings = %v, want Policy default: provenance.retrievalDigest", w)
	}
	if !strings.Contains(w[0].String(), "provenance.retrievalDigest") {
		t.Errorf("warning text %q does not name the field", w[0])
	}
	if n := strings.Count(logs.String(), "not enforced"); n != 1 || !strings.Contains(logs.String(), "provenance.retrievalDigest") {
		t.Fatalf("want one logged warning naming provenance.retrievalDigest, got %d:\n%s", n, logs.String())
	}
	// Another install that does not change the policy does not log it again.
	re := env.Sign(artifact.New(artifact.KindRegistryEntry, "srv/tool", &mcpreadyv1.RegistryEntry{Identity: &mcpreadyv1.ToolIdentity{ServerName: "srv", ToolName: "tool"}}))
	if err := c.Apply(artifact.KindRegistryEntry, []*mcpreadyv1.Resource{{Name: "srv/tool", Version: "3", Bundle: re}}, nil, false); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(logs.String(), "not enforced"); n != 1 {
		t.Fatalf("unchanged policy warned again (%d warnings):\n%s", n, logs.String())
	}
}
