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
	re := env.Sign(artifact.New(artifact.KindRegistryEntry, "srv/tool", &mcpreadyv1.RegistryEntry{
		Identity:  &mcpreadyv1.ToolIdentity{ServerName: "srv", ToolName: "tool"},
		Authority: &mcpreadyv1.Authority{TenantBoundary: "per-tenant credential"},
	}))
	if err := c.Apply(artifact.KindRegistryEntry, []*mcpreadyv1.Resource{{Name: "srv/tool", Version: "2", Bundle: re}}, nil, false); err != nil {
		t.Fatal(err)
	}
	w := c.Snapshot().Warnings()
	if len(w) != 1 || w[0].Kind != artifact.KindRegistryEntry || w[0].Name != "srv/tool" || !slices.Equal(w[0].Fields, []string{"authority.tenantBoundary"}) {
		t.Fatalf("Warnings = %v, want RegistryEntry srv/tool: authority.tenantBoundary", w)
	}
	if !strings.Contains(w[0].String(), "authority.tenantBoundary") {
		t.Errorf("warning text %q does not name the field", w[0])
	}
	if n := strings.Count(logs.String(), "not enforced"); n != 1 || !strings.Contains(logs.String(), "authority.tenantBoundary") {
		t.Fatalf("want one logged warning naming authority.tenantBoundary, got %d:\n%s", n, logs.String())
	}
	// Another install that does not change the entry does not log it again.
	pol := env.Sign(artifact.New(artifact.KindPolicy, "default", &mcpreadyv1.Policy{PolicyOwner: "team"}))
	if err := c.Apply(artifact.KindPolicy, []*mcpreadyv1.Resource{{Name: "default", Version: "3", Bundle: pol}}, nil, false); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(logs.String(), "not enforced"); n != 1 {
		t.Fatalf("unchanged entry warned again (%d warnings):\n%s", n, logs.String())
	}
}
