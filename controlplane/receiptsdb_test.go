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
	"github.com/mcpready/mcpready/internal/pgtest"
	"github.com/mcpready/mcpready/internal/testpki"
	"github.com/mcpready/mcpready/ledger/ledgertest"
	"github.com/mcpready/mcpready/sign"
)

// TestSharedAggregationByOneReplica: two replicas with observer keys on
// one etcd and one receipt database. The agent ships half its receipts to
// each; passive Evidence is computed once, by the elected replica, over
// both halves: every receipt is counted in exactly one emitted window and
// no window is emitted twice. (Per-replica aggregation, the only mode
// before, would emit each window twice with half the sample each.)
func TestSharedAggregationByOneReplica(t *testing.T) {
	p := testpki.New(t)
	pg := pgtest.Start(t)
	cli, m := etcdtest.Etcd(t)
	var rs []*controlplane.Server
	for range 2 {
		rs = append(rs, start(t, controlplane.Options{EtcdEndpoints: []string{m.ClientURL}, DataDir: t.TempDir(), Root: p.Root.Public(), ObserverKey: p.Observer,
			Receipts: &controlplane.ReceiptOptions{Store: pg.DSN, EvidenceWindow: 2 * time.Second}}))
	}
	adm := mcpreadyv1.NewAdminServiceClient(dial(t, rs[0].Addr()))
	if _, err := adm.Apply(context.Background(), &mcpreadyv1.ApplyRequest{Bundle: p.TrustPolicy}); err != nil {
		t.Fatal(err)
	}
	applyRealisticEntry(t, adm, p)
	sp, err := spool.Open(t.TempDir(), spool.Options{AgentID: "agent-1", Signer: p.Org, BatchSize: 5, BatchInterval: 10 * time.Millisecond, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Close()
	n := 0
	for _, r := range rs {
		for range 20 {
			rc := ledgertest.Realistic(n, time.Now())
			n++
			if err := sp.Append(rc); err != nil {
				t.Fatal(err)
			}
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			done <- shipper.Run(ctx, dial(t, r.Addr()), sp, shipper.Options{Node: &mcpreadyv1.Node{Id: "agent-1"}, MinBackoff: 10 * time.Millisecond, MaxBackoff: 100 * time.Millisecond, Logger: quiet})
		}()
		for deadline := time.Now().Add(15 * time.Second); sp.Stats().Depth > 0 && time.Now().Before(deadline); {
			time.Sleep(10 * time.Millisecond)
		}
		cancel()
		<-done
	}
	st := store.New(cli, store.Options{})
	deadline := time.Now().Add(30 * time.Second)
	for {
		counted, windows := int64(0), map[string]int{}
		latest, _, err := st.List(context.Background(), artifact.KindEvidence)
		if err != nil {
			t.Fatal(err)
		}
		for _, rec := range latest {
			hist, err := st.History(context.Background(), artifact.KindEvidence, rec.Name)
			if err != nil {
				t.Fatal(err)
			}
			for _, h := range hist {
				obj, err := sign.Peek(h.Bundle)
				if err != nil {
					t.Fatal(err)
				}
				ev := obj.Spec.(*mcpreadyv1.Evidence)
				counted += ev.GetReceiptCount()
				windows[rec.Name+"@"+ev.GetWindowStart().AsTime().String()]++
			}
		}
		for w, c := range windows {
			if c != 1 {
				t.Fatalf("window %s emitted %d times", w, c)
			}
		}
		if counted == int64(n) {
			return
		}
		if counted > int64(n) || time.Now().After(deadline) {
			t.Fatalf("evidence counts %d receipts, want %d", counted, n)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
