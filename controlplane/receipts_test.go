package controlplane_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/mcpready/mcpready/agent/shipper"
	"github.com/mcpready/mcpready/agent/spool"
	"github.com/mcpready/mcpready/controlplane"
	"github.com/mcpready/mcpready/controlplane/etcdembed"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/internal/testpki"
	"github.com/mcpready/mcpready/ledger/ledgertest"
)

// TestReceiptChainMovesBetweenReplicas: two replicas with their own data
// directories share one etcd; an agent's shipper reaches replica 1, then
// 2, then 1 again, and every batch is accepted (the chain head is shared).
func TestReceiptChainMovesBetweenReplicas(t *testing.T) {
	p := testpki.New(t)
	m, err := etcdembed.StartSingle(etcdembed.Options{Dir: t.TempDir(), LogLevel: "fatal"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	var rs []*controlplane.Server
	for range 2 {
		rs = append(rs, start(t, controlplane.Options{EtcdEndpoints: []string{m.ClientURL}, DataDir: t.TempDir(), Root: p.Root.Public(), Receipts: &controlplane.ReceiptOptions{}}))
	}
	if _, err := mcpreadyv1.NewAdminServiceClient(dial(t, rs[0].Addr())).Apply(context.Background(), &mcpreadyv1.ApplyRequest{Bundle: p.TrustPolicy}); err != nil {
		t.Fatal(err)
	}
	sp, err := spool.Open(t.TempDir(), spool.Options{AgentID: "agent-1", Signer: p.Org, BatchSize: 5, BatchInterval: 10 * time.Millisecond, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Close()
	n := 0
	for _, r := range []*controlplane.Server{rs[0], rs[1], rs[0]} {
		for range 12 {
			rc := ledgertest.Receipt("agent-1", time.Now())
			rc.Requested = fmt.Sprintf("tool#%d", n)
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
		deadline := time.Now().Add(15 * time.Second)
		for sp.Stats().Depth > 0 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		cancel()
		<-done
		if st := sp.Stats(); st.Depth > 0 {
			t.Fatalf("replica %s did not take the agent's batches: %+v", r.Addr(), st)
		}
	}
	seen := 0
	for _, r := range rs {
		c := mcpreadyv1.NewReceiptsServiceClient(dial(t, r.Addr()))
		q, err := c.QueryReceipts(context.Background(), &mcpreadyv1.QueryReceiptsRequest{AgentId: "agent-1"})
		if err != nil {
			t.Fatal(err)
		}
		seen += len(q.Receipts)
	}
	if seen != n {
		t.Fatalf("%d receipts stored across replicas, want %d", seen, n)
	}
}
