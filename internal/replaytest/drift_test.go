package replaytest_test

import (
	"strconv"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/mcpready/mcpready/artifact"
	"github.com/mcpready/mcpready/controlplane"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/internal/testpki"
)

// TestDriftReportReplay: a registry entry at versions 1..4 on a control
// plane with an observer key. Drift reports that name an older revision,
// lie outside the report window, have expired, are unsigned, are signed by
// a key not granted DriftReport, or name another node are refused with
// their reason, create nothing and are counted and logged. The genuine
// report suspends the entry (the observer signs version 5) and creates a
// candidate; replayed, it changes nothing; a flood is rate-limited; and
// the organisation's versions 1..4 replayed do not reverse the suspension,
// on the control plane or on the agent.
func TestDriftReportReplay(t *testing.T) {
	t.Parallel()
	e := startWith(t, func(e *env, o *controlplane.Options) { o.ObserverKey = e.pki.Observer })
	a := e.startAgent(t.TempDir())
	adm := mcpreadyv1.NewAdminServiceClient(e.dial(node)) // the agent's own certificate
	k, name := artifact.KindRegistryEntry, nameOf(artifact.KindRegistryEntry)
	vs := e.publish(k)
	a.waitHeld(k, name, vs[versions-1])
	observed := &mcpreadyv1.ToolIdentity{ServerName: "com.example/srv", ToolName: "t", Endpoint: "https://evil.example/mcp"}
	labels := []mcpreadyv1.DriftLabel{mcpreadyv1.DriftLabel_DRIFT_LABEL_VERSION_DRIFT}
	report := func(digestOf []byte, at time.Time) *mcpreadyv1.ReportDriftRequest {
		return testpki.DriftReport(t, e.pki.Agent, node, name, artifact.Digest(digestOf), labels, observed, at)
	}
	now := time.Now()
	expired := report(vs[versions-1], now)
	dr := &mcpreadyv1.DriftReport{Provenance: &mcpreadyv1.Provenance{IssuedAt: timestamppb.New(now), ExpiresAt: timestamppb.New(now.Add(-time.Second))},
		NodeId: node, EntryName: name, EntryDigest: artifact.Digest(vs[versions-1]), Labels: labels, Observed: observed}
	expired.Report = testpki.Sign(t, artifact.New(artifact.KindDriftReport, node+"/"+name, dr), e.pki.Agent)
	byOrg := report(vs[versions-1], now)
	byOrg.Report = testpki.Sign(t, artifact.New(artifact.KindDriftReport, node+"/"+name, &mcpreadyv1.DriftReport{Provenance: dr.Provenance, NodeId: node,
		EntryName: name, EntryDigest: dr.EntryDigest, Labels: labels, Observed: observed}), e.pki.Org)
	otherNode := testpki.DriftReport(t, e.pki.Agent, "host-2", name, dr.EntryDigest, labels, observed, now)
	otherNode.Node.Id = node // sent by host-1, about host-2
	type attack struct {
		label  string
		req    *mcpreadyv1.ReportDriftRequest
		code   codes.Code
		reason string // the refusal's reason label
	}
	var attacks []attack
	for i, b := range vs[:versions-1] {
		attacks = append(attacks, attack{"names version " + strconv.Itoa(i+1), report(b, now), codes.FailedPrecondition, "revision"})
	}
	attacks = append(attacks,
		attack{"issued an hour ago", report(vs[versions-1], now.Add(-time.Hour)), codes.FailedPrecondition, "stale"},
		attack{"issued in an hour", report(vs[versions-1], now.Add(time.Hour)), codes.FailedPrecondition, "stale"},
		attack{"expired", expired, codes.FailedPrecondition, "stale"},
		attack{"unsigned", &mcpreadyv1.ReportDriftRequest{Node: &mcpreadyv1.Node{Id: node}, EntryName: name, Labels: labels, Observed: observed}, codes.Unauthenticated, "unsigned"},
		attack{"signed by the org key", byOrg, codes.PermissionDenied, "signer"},
		attack{"about another node", otherNode, codes.PermissionDenied, "signer"},
	)
	entries := func() int {
		recs, _, err := e.hostile.List(ctx(t), k)
		if err != nil {
			t.Fatal(err)
		}
		return len(recs)
	}
	rev, n := e.etcdRevision(), entries()
	for _, at := range attacks {
		if _, err := adm.ReportDrift(ctx(t), at.req); status.Code(err) != at.code {
			t.Errorf("%s: %v, want %v", at.label, err, at.code)
		}
	}
	if r := e.etcdRevision(); r != rev || entries() != n {
		t.Fatalf("refused drift reports wrote (etcd revision %d, was %d; %d entries, was %d)", r, rev, entries(), n)
	}
	counted := map[string]float64{}
	for _, at := range attacks {
		counted[at.reason]++
	}
	for reason, want := range counted {
		if got := e.counter("mcpready_controlplane_drift_reports_refused_total", map[string]string{"reason": reason}); got != want {
			t.Errorf("drift reports refused for %s: counted %v, want %v", reason, got, want)
		}
		if got := e.logged("drift report refused", map[string]string{"reason": reason}); float64(got) != want {
			t.Errorf("drift reports refused for %s: logged %d, want %v", reason, got, want)
		}
	}
	// another node's id on the request: authz refuses it before the lifecycle
	if _, err := adm.ReportDrift(ctx(t), testpki.DriftReport(t, e.pki.Agent, "host-2", name, dr.EntryDigest, labels, observed, now)); status.Code(err) != codes.PermissionDenied {
		t.Errorf("a report for another node's id: %v", err)
	}
	if got := e.counter("mcpready_controlplane_rpc_refused_total", map[string]string{"method": "/mcpready.v1.AdminService/ReportDrift", "reason": "wrong-node"}); got != 1 {
		t.Errorf("wrong-node refusals counted: %v", got)
	}

	// the genuine report, then replayed
	genuine := report(vs[versions-1], now)
	resp, err := adm.ReportDrift(ctx(t), genuine)
	if err != nil || resp.GetNewState() != mcpreadyv1.LifecycleState_LIFECYCLE_STATE_SUSPENDED {
		t.Fatalf("the genuine report: %v, %v", resp, err)
	}
	a.wait("the suspension", func() bool {
		r := a.c.Snapshot().Get(k, name)
		return r != nil && r.Verified.Object.Spec.(*mcpreadyv1.RegistryEntry).GetState() == mcpreadyv1.LifecycleState_LIFECYCLE_STATE_SUSPENDED
	})
	suspended := a.c.Snapshot().Get(k, name).Bundle
	rev, n = e.etcdRevision(), entries()
	if again, err := adm.ReportDrift(ctx(t), genuine); err != nil || again.GetCandidateName() != resp.GetCandidateName() {
		t.Errorf("the genuine report replayed: %v, %v", again, err)
	}
	if r := e.etcdRevision(); r != rev || entries() != n {
		t.Fatalf("a replayed report wrote (etcd revision %d, was %d; %d entries, was %d)", r, rev, entries(), n)
	}
	limited := 0
	for range 15 {
		if _, err := adm.ReportDrift(ctx(t), genuine); status.Code(err) == codes.ResourceExhausted {
			limited++
		}
	}
	if limited == 0 || e.counter("mcpready_controlplane_drift_reports_refused_total", map[string]string{"reason": "rate"}) != float64(limited) {
		t.Errorf("a flood of 15 reports: %d rate-limited", limited)
	}

	// the organisation's versions do not reverse the suspension
	for i, b := range vs {
		if _, err := e.admin.Apply(ctx(t), &mcpreadyv1.ApplyRequest{Bundle: b}); status.Code(err) != codes.FailedPrecondition || !says(err, artifact.ReasonRollback) {
			t.Errorf("control plane, version %d over the suspension: %v", i+1, err)
		}
		a.refuses(k, "agent, version "+strconv.Itoa(i+1)+" over the suspension", func() { e.plant(k, name, b, false) }, "rollback", "RegistryEntry")
		if _, held := a.held(k, name); string(held) != string(suspended) {
			t.Fatalf("agent, version %d reversed the suspension", i+1)
		}
	}
}
