package subscribe

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/mcpready/mcpready/agent/internal/cptest"
	"github.com/mcpready/mcpready/artifact"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
)

// TestNacksCounted: every NACK is counted by type and reason on the
// agent itself (before, only a control plane that is honest about it
// counted them).
func TestNacksCounted(t *testing.T) {
	env := cptest.Start(t)
	reg := prometheus.NewRegistry()
	c := trustedClient(t, env, Options{Registerer: reg})
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
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP mcpready_agent_discovery_nacks_total Discovery responses this agent refused (NACKed), by resource type (unknown for a type that is not one) and reason (e.g. rollback, expired, key-revoked, tombstone, unsigned-removal).
# TYPE mcpready_agent_discovery_nacks_total counter
mcpready_agent_discovery_nacks_total{reason="rollback",type_url="type.mcpready.dev/mcpready.v1.Policy"} 2
mcpready_agent_discovery_nacks_total{reason="unknown-kind",type_url="unknown"} 1
mcpready_agent_discovery_nacks_total{reason="unsigned-removal",type_url="type.mcpready.dev/mcpready.v1.Policy"} 1
`)); err != nil {
		t.Fatal(err)
	}
}
