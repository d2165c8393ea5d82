package lifecycle_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/mcpready/mcpready/artifact"
	"github.com/mcpready/mcpready/controlplane/lifecycle"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/internal/testpki"
)

func driftOf(name, version string) *mcpreadyv1.ReportDriftRequest {
	return &mcpreadyv1.ReportDriftRequest{EntryName: name, Observed: entry(version, "").Identity,
		Labels: []mcpreadyv1.DriftLabel{mcpreadyv1.DriftLabel_DRIFT_LABEL_VERSION_DRIFT}}
}

// TestDriftReportAttacks: an unsigned report (which the control plane
// used to act on, minting observer-signed entries for an endpoint the
// caller chose), one signed for another node or by another node's key, an
// old one, one about an earlier revision of the entry (replayed after the
// organisation re-qualified it), a flood and a candidate flood are each
// refused with their reason and change nothing.
func TestDriftReportAttacks(t *testing.T) {
	e := setupWith(t, func(o *lifecycle.Options) { o.ReportsPerMinute = 600; o.MaxCandidatesPerEntry = 2 })
	ctx := context.Background()
	e.applyEntry(t, "docs.lookup@2.4.1", versioned(entry("2.4.1", ""), "1"))
	refused := func(label string, req *mcpreadyv1.ReportDriftRequest, want error, code codes.Code) {
		t.Helper()
		_, err := e.lc.ReportDrift(ctx, req)
		if !errors.Is(err, want) || status.Code(err) != code {
			t.Fatalf("%s: %v (%v), want %v %v", label, err, status.Code(err), want, code)
		}
		if s := e.status(t, "docs.lookup@2.4.1"); s.State != qualified {
			t.Fatalf("%s: the entry is %v", label, s.State)
		}
	}
	plain := driftOf("docs.lookup@2.4.1", "6.6.6")
	plain.Node = &mcpreadyv1.Node{Id: "host-1"}
	plain.Observed.Endpoint = "https://attacker.example/mcp"
	refused("unsigned", plain, lifecycle.ErrUnsignedReport, codes.Unauthenticated)

	good := e.signed(t, driftOf("docs.lookup@2.4.1", "2.5.0"))
	mixed := e.signed(t, driftOf("docs.lookup@2.4.1", "2.5.0"))
	mixed.EntryName = "docs.lookup@2.4.1"
	refused("signed, with unsigned fields beside it", mixed, lifecycle.ErrUnsignedReport, codes.InvalidArgument)

	asOther := e.signed(t, driftOf("docs.lookup@2.4.1", "2.5.0"))
	asOther.Node.Id = "host-2"
	refused("another caller's node", asOther, lifecycle.ErrReportSigner, codes.PermissionDenied)

	forHost2 := driftOf("docs.lookup@2.4.1", "2.5.0")
	forHost2.Node = &mcpreadyv1.Node{Id: "host-2"}
	refused("the key of host-1 for host-2", e.signed(t, forHost2), lifecycle.ErrReportSigner, codes.PermissionDenied)

	byOrg := &mcpreadyv1.DriftReport{Provenance: &mcpreadyv1.Provenance{IssuedAt: timestamppb.New(e.clk.now())}, NodeId: "host-1", EntryName: "docs.lookup@2.4.1",
		Labels: plain.Labels, Observed: plain.Observed}
	refused("a key not granted DriftReport", &mcpreadyv1.ReportDriftRequest{Node: &mcpreadyv1.Node{Id: "host-1"},
		Report: testpki.Sign(t, artifact.New(artifact.KindDriftReport, "host-1/docs.lookup@2.4.1", byOrg), e.p.Org)}, lifecycle.ErrReportSigner, codes.PermissionDenied)

	e.clk.add(-time.Hour)
	old := e.signed(t, driftOf("docs.lookup@2.4.1", "2.5.0"))
	e.clk.add(time.Hour)
	refused("an hour old", old, lifecycle.ErrReportStale, codes.FailedPrecondition)

	// The genuine report suspends and creates a candidate that is never
	// routable and not presented as qualified by anyone.
	resp, err := e.lc.ReportDrift(ctx, good)
	if err != nil || resp.NewState != suspended {
		t.Fatalf("genuine report: %v %v", resp, err)
	}
	cspec, _ := e.latestSpec(t, resp.CandidateName)
	if cspec.State != candidate || cspec.Qualification != nil || cspec.GetProvenance().GetIssuer() != "drift-report:host-1" || cspec.DiscoverySource != "drift-report:host-1" {
		t.Fatalf("candidate: %v", cspec)
	}
	// The organisation re-qualifies; the same report, replayed, names the
	// earlier revision.
	e.applyEntry(t, "docs.lookup@2.4.1", versioned(entry("2.4.1", ""), "5"))
	refused("replayed after re-qualification", good, lifecycle.ErrReportRevision, codes.FailedPrecondition)

	// Candidate flood: distinct observed identities, bounded per entry.
	for i, v := range []string{"3.0.0", "3.0.1"} {
		_, err := e.lc.ReportDrift(ctx, e.signed(t, driftOf("docs.lookup@2.4.1", v)))
		if i == 0 && err != nil {
			t.Fatalf("second candidate: %v", err)
		}
		if i == 1 && (!errors.Is(err, lifecycle.ErrTooManyCandidates) || status.Code(err) != codes.ResourceExhausted) {
			t.Fatalf("third candidate: %v", err)
		}
	}
}

// TestDriftReportRate: a node past its rate is refused (ResourceExhausted).
func TestDriftReportRate(t *testing.T) {
	e := setupWith(t, func(o *lifecycle.Options) { o.ReportsPerMinute = 3 }) // a burst of 1
	ctx := context.Background()
	e.applyEntry(t, "x@1", entry("1", ""))
	if _, err := e.lc.ReportDrift(ctx, e.signed(t, driftOf("x@1", "2"))); err != nil {
		t.Fatal(err)
	}
	if _, err := e.lc.ReportDrift(ctx, e.signed(t, driftOf("x@1", "2"))); !errors.Is(err, lifecycle.ErrReportRate) || status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("past the rate: %v", err)
	}
}
