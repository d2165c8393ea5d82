package subscribe

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/mcpready/mcpready/agent/internal/cptest"
	"github.com/mcpready/mcpready/artifact"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/nodelabel"
)

// TestNacksCounted: every NACK is counted by type and reason on the
// agent itself (before, only a control plane that is honest about it
// counted them), a mis-scoped update (a Declaration scoped to another
// region) as out-of-scope.
func TestNacksCounted(t *testing.T) {
	env := cptest.Start(t)
	reg := prometheus.NewRegistry()
	c := trustedClient(t, env, Options{Registerer: reg, Node: &mcpreadyv1.Node{Id: "n", Labels: map[string]string{string(nodelabel.Region): "eu-west"}}})
	k := artifact.KindPolicy
	v2 := env.Sign(sample(k, "org/p", "2", "", time.Time{}))
	res := func(b []byte) []*mcpreadyv1.Resource { return []*mcpreadyv1.Resource{{Name: "org/p", Bundle: b}} }
	if _, err := c.applyResponse(k.TypeURL(), res(v2), nil, nil, false); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := c.applyResponse(k.TypeURL(), res(env.Sign(sample(k, "org/p", "1", "", time.Time{}))), nil, nil, false); err == nil {
			t.Fatal("rollback accepted")
		}
	}
	if _, err := c.applyResponse(k.TypeURL(), nil, []string{"org/p"}, nil, false); err == nil {
		t.Fatal("unsigned removal accepted")
	}
	if _, err := c.applyResponse("type.example/x", nil, nil, nil, false); err == nil {
		t.Fatal("unknown type accepted")
	}
	us := sample(artifact.KindDeclaration, "srv", "1", "", time.Time{})
	us.Metadata.Labels = map[string]string{string(nodelabel.ScopeRegion): "us-east"}
	if _, err := c.applyResponse(artifact.KindDeclaration.TypeURL(), []*mcpreadyv1.Resource{{Name: "srv", Bundle: env.Sign(us)}}, nil, nil, false); !errors.Is(err, ErrOutOfScope) {
		t.Fatalf("a Declaration scoped to another region: %v", err)
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP mcpready_agent_discovery_nacks_total Discovery responses this agent refused (NACKed), by resource type (unknown for a type that is not one) and reason (e.g. rollback, expired, key-revoked, tombstone, unsigned-removal).
# TYPE mcpready_agent_discovery_nacks_total counter
mcpready_agent_discovery_nacks_total{reason="out-of-scope",type_url="type.mcpready.dev/mcpready.v1.Declaration"} 1
mcpready_agent_discovery_nacks_total{reason="rollback",type_url="type.mcpready.dev/mcpready.v1.Policy"} 2
mcpready_agent_discovery_nacks_total{reason="unknown-kind",type_url="unknown"} 1
mcpready_agent_discovery_nacks_total{reason="unsigned-removal",type_url="type.mcpready.dev/mcpready.v1.Policy"} 1
`)); err != nil {
		t.Fatal(err)
	}
}
