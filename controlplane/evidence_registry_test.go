package controlplane_test

import (
	"context"
	"testing"
	"time"

	"github.com/mcpready/mcpready/agent/shipper"
	"github.com/mcpready/mcpready/agent/spool"
	"github.com/mcpready/mcpready/artifact"
	"github.com/mcpready/mcpready/controlplane"
	"github.com/mcpready/mcpready/controlplane/store"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/internal/etcdtest"
	"github.com/mcpready/mcpready/internal/testpki"
	"github.com/mcpready/mcpready/ledger/ledgertest"
	"github.com/mcpready/mcpready/sign"
)

// applyRealisticEntry registers the identity ledgertest.Realistic's
// receipts select, so the aggregator folds them.
func applyRealisticEntry(t *testing.T, adm mcpreadyv1.AdminServiceClient, p *testpki.PKI) {
	t.Helper()
	sel := ledgertest.Realistic(0, time.Now()).GetSelected()
	e := &mcpreadyv1.RegistryEntry{Identity: &mcpreadyv1.ToolIdentity{ServerName: sel.ServerName, ServerVersion: sel.ServerVersion, ToolName: sel.ToolName,
		Endpoint: sel.Endpoint, InputSchemaDigest: sel.InputSchemaDigest, OutputSchemaDigest: sel.OutputSchemaDigest}, State: mcpreadyv1.LifecycleState_LIFECYCLE_STATE_QUALIFIED}
	if _, err := adm.Apply(context.Background(), &mcpreadyv1.ApplyRequest{Bundle: testpki.Sign(t, artifact.New(artifact.KindRegistryEntry, sel.Entry, e), p.Org)}); err != nil {
		t.Fatal(err)
	}
}

// Attack, end to end: an agent ships signed receipts naming a server the
// registry does not hold besides receipts for a registered entry; the
// control plane stores passive Evidence for the registered subject only.
// Before, it minted and stored Evidence for whatever the receipts named.
// The receipts' warmth, auth and input classes and semantic outcome reach
// the stored Evidence (the ingest summary carries them).
func TestPassiveEvidenceOnlyForRegisteredSubjects(t *testing.T) {
	p := testpki.New(t)
	cli, m := etcdtest.Etcd(t)
	// A window of some seconds: receipts shipped after their window's
	// evidence was emitted are late and never counted, and under -race on a
	// loaded machine a one-second window lost some (12 of 20, once in CI).
	// The receipts are stamped one window ahead (within the aggregator's
	// clock skew), so that shipping has at least a window and its grace.
	s := start(t, controlplane.Options{EtcdEndpoints: []string{m.ClientURL}, DataDir: t.TempDir(), Root: p.Root.Public(), ObserverKey: p.Observer,
		Receipts: &controlplane.ReceiptOptions{EvidenceWindow: 5 * time.Second}})
	adm := mcpreadyv1.NewAdminServiceClient(dial(t, s.Addr()))
	if _, err := adm.Apply(context.Background(), &mcpreadyv1.ApplyRequest{Bundle: p.TrustPolicy}); err != nil {
		t.Fatal(err)
	}
	applyRealisticEntry(t, adm, p) // after the server started: learnt from the store watch
	time.Sleep(200 * time.Millisecond)
	sp, err := spool.Open(t.TempDir(), spool.Options{AgentID: "agent-1", Signer: p.Org, BatchSize: 10, BatchInterval: 10 * time.Millisecond, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Close()
	for i := range 40 {
		rc := ledgertest.Realistic(i, time.Now().Add(5*time.Second))
		rc.Warmth, rc.AuthClass, rc.InputClass = mcpreadyv1.CallWarmth_CALL_WARMTH_WARM, "oauth:client_credentials", "bulk"
		rc.SemanticValidation, rc.SemanticValidatorVersion = "passed", "fresh=cel:0123456789ab"
		if i%2 == 1 {
			rc.Selected.ServerName, rc.Selected.Entry = "com.evil/fabricated", "fabricated"
		}
		if err := sp.Append(rc); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go shipper.Run(ctx, dial(t, s.Addr()), sp, shipper.Options{Node: &mcpreadyv1.Node{Id: "agent-1"}, MinBackoff: 10 * time.Millisecond, MaxBackoff: 100 * time.Millisecond, Logger: quiet})
	st := store.New(cli, store.Options{})
	for deadline := time.Now().Add(30 * time.Second); ; {
		latest, _, err := st.List(context.Background(), artifact.KindEvidence)
		if err != nil {
			t.Fatal(err)
		}
		counted, warm, valid := int64(0), int64(0), int64(0)
		for _, rec := range latest {
			obj, err := sign.Peek(rec.Bundle)
			if err != nil {
				t.Fatal(err)
			}
			ev := obj.Spec.(*mcpreadyv1.Evidence)
			if ev.GetSubject().GetServerName() != "com.example/docs-a" {
				t.Fatalf("evidence stored for unregistered subject %q", ev.GetSubject().GetServerName())
			}
			if ev.GetAuthClass() != "oauth:client_credentials" || ev.GetSubject().GetInputClass() != "bulk" {
				t.Fatalf("evidence auth class %q, input class %q: the receipts' did not reach the aggregator", ev.GetAuthClass(), ev.GetSubject().GetInputClass())
			}
			hist, _ := st.History(context.Background(), artifact.KindEvidence, rec.Name)
			for _, h := range hist {
				o, _ := sign.Peek(h.Bundle)
				e := o.Spec.(*mcpreadyv1.Evidence)
				counted += e.GetReceiptCount()
				warm += e.GetWarmLatency().GetCount()
				valid += e.GetSemanticValid().GetSuccesses()
			}
		}
		if counted == 20 {
			if warm != 20 || valid != 20 {
				t.Fatalf("warm latencies %d, semantic-valid %d, want 20 each: the receipts' fields did not reach the aggregator", warm, valid)
			}
			return
		}
		if counted > 20 || time.Now().After(deadline) {
			t.Fatalf("evidence counts %d receipts, want the 20 of the registered subject", counted)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// After an agent reports drift of a registered entry, the passive
// Evidence of the window the report fell in lists the drift in
// driftObserved (so it counts for no call). Before, passive evidence
// never listed drift.
func TestPassiveEvidenceListsReportedDrift(t *testing.T) {
	p := testpki.New(t)
	cli, m := etcdtest.Etcd(t)
	s := start(t, controlplane.Options{EtcdEndpoints: []string{m.ClientURL}, DataDir: t.TempDir(), Root: p.Root.Public(), ObserverKey: p.Observer,
		Receipts: &controlplane.ReceiptOptions{EvidenceWindow: 5 * time.Second}})
	ctx := context.Background()
	adm := mcpreadyv1.NewAdminServiceClient(dial(t, s.Addr()))
	if _, err := adm.Apply(ctx, &mcpreadyv1.ApplyRequest{Bundle: p.TrustPolicy}); err != nil {
		t.Fatal(err)
	}
	applyRealisticEntry(t, adm, p)
	entry := ledgertest.Realistic(0, time.Now()).GetSelected().GetEntry()
	cur, err := adm.Get(ctx, &mcpreadyv1.GetRequest{Kind: "RegistryEntry", Name: entry})
	if err != nil {
		t.Fatal(err)
	}
	observed := &mcpreadyv1.ToolIdentity{ServerName: "com.example/docs-a", ServerVersion: "9.9.9", ToolName: "lookup"}
	if _, err := adm.ReportDrift(ctx, testpki.DriftReport(t, p.Agent, "host-1", entry, cur.GetArtifacts()[0].GetDigest(),
		[]mcpreadyv1.DriftLabel{mcpreadyv1.DriftLabel_DRIFT_LABEL_VERSION_DRIFT}, observed, time.Now())); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond) // the suspended revision reaches the registry index
	sp, err := spool.Open(t.TempDir(), spool.Options{AgentID: "agent-1", Signer: p.Org, BatchSize: 10, BatchInterval: 10 * time.Millisecond, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Close()
	for i := range 4 {
		if err := sp.Append(ledgertest.Realistic(i, time.Now())); err != nil {
			t.Fatal(err)
		}
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go shipper.Run(sctx, dial(t, s.Addr()), sp, shipper.Options{Node: &mcpreadyv1.Node{Id: "agent-1"}, MinBackoff: 10 * time.Millisecond, MaxBackoff: 100 * time.Millisecond, Logger: quiet})
	st := store.New(cli, store.Options{})
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		latest, _, err := st.List(ctx, artifact.KindEvidence)
		if err != nil {
			t.Fatal(err)
		}
		for _, rec := range latest {
			obj, err := sign.Peek(rec.Bundle)
			if err != nil {
				t.Fatal(err)
			}
			ev := obj.Spec.(*mcpreadyv1.Evidence)
			if got := ev.GetDriftObserved(); len(got) != 1 || got[0] != mcpreadyv1.DriftLabel_DRIFT_LABEL_VERSION_DRIFT {
				t.Fatalf("passive evidence after a drift report lists drift %v, want [VERSION_DRIFT]", got)
			}
			return
		}
	}
	t.Fatal("no passive evidence within 30s")
}
