package lifecycle_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/mcpready/mcpready/artifact"
	"github.com/mcpready/mcpready/controlplane/lifecycle"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/internal/testpki"
)

// TestDriftRefusalsCounted: each refused drift report is counted by
// reason, also a refusal after verification (another revision), which
// before was neither counted nor logged.
func TestDriftRefusalsCounted(t *testing.T) {
	reg := prometheus.NewRegistry()
	e := setupWith(t, func(o *lifecycle.Options) { o.Registerer = reg })
	ctx := context.Background()
	e.applyEntry(t, "docs.lookup@2.4.1", versioned(entry("2.4.1", ""), "1"))
	plain := driftOf("docs.lookup@2.4.1", "6.6.6")
	plain.Node = &mcpreadyv1.Node{Id: "host-1"}
	e.clk.add(-time.Hour)
	old := e.signed(t, driftOf("docs.lookup@2.4.1", "2.5.0"))
	e.clk.add(time.Hour)
	earlier := e.signed(t, driftOf("docs.lookup@2.4.1", "2.5.0"))
	// a new revision of the entry, in the same state (no lifecycle event)
	if _, _, err := e.w.Apply(ctx, testpki.Sign(t, artifact.New(artifact.KindRegistryEntry, "docs.lookup@2.4.1", versioned(entry("2.4.1", ""), "2")), e.p.Org)); err != nil {
		t.Fatal(err)
	}
	for _, req := range []*mcpreadyv1.ReportDriftRequest{plain, old, earlier} {
		if _, err := e.lc.ReportDrift(ctx, req); err == nil {
			t.Fatal("accepted")
		}
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP mcpready_controlplane_drift_reports_refused_total Drift reports refused, by reason (unsigned, signer, stale, revision, rate, candidates).
# TYPE mcpready_controlplane_drift_reports_refused_total counter
mcpready_controlplane_drift_reports_refused_total{reason="revision"} 1
mcpready_controlplane_drift_reports_refused_total{reason="stale"} 1
mcpready_controlplane_drift_reports_refused_total{reason="unsigned"} 1
`)); err != nil {
		t.Fatal(err)
	}
}
