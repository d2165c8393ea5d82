package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/mcpready/mcpready/agent/spool"
	"github.com/mcpready/mcpready/artifact"
	"github.com/mcpready/mcpready/controlplane/chainhead"
	"github.com/mcpready/mcpready/controlplane/ingest"
	"github.com/mcpready/mcpready/controlplane/receiptdb"
	"github.com/mcpready/mcpready/controlplane/receiptstore"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/internal/pgtest"
	"github.com/mcpready/mcpready/ledger/ledgertest"
	"github.com/mcpready/mcpready/sign"
)

// TestReceiptsMigrate: one agent's chain spread over two replicas'
// segment stores is migrated into the database (in any order); every
// receipt is there once, the head is the chain's last batch, so the agent
// continues on the database; a second run skips everything; a store
// holding a fork is refused.
func TestReceiptsMigrate(t *testing.T) {
	pg := pgtest.Start(t)
	dir := t.TempDir()
	agentKey, err := sign.WriteKeyPair(filepath.Join(dir, "agent"), sign.AlgorithmECDSAP256, []byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	rootKey, _ := sign.GenerateKey(sign.AlgorithmECDSAP256)
	id, _ := sign.KeyID(agentKey.Public())
	tp := &mcpreadyv1.TrustPolicy{Keys: []*mcpreadyv1.KeyGrant{{KeyId: id, PublicKey: string(mustRead(t, filepath.Join(dir, "agent.pub"))), Name: "agent-1", Kinds: []string{"ReceiptBatch"}, Scopes: []string{"agent-1/*"}}}}
	tpBundle, _, _ := sign.Sign(artifact.New(artifact.KindTrustPolicy, "example/trust", tp), rootKey)
	trust, err := sign.NewTrust(tpBundle, rootKey.Public(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	sp, err := spool.Open(filepath.Join(dir, "spool"), spool.Options{AgentID: "agent-1", Signer: agentKey, BatchSize: 2, BatchInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Close()
	for i := range 12 {
		r := ledgertest.Realistic(i, time.Now())
		r.Requested = fmt.Sprintf("call#%d", i)
		sp.Append(r)
	}
	sp.Flush()
	batches := pendingBatches(t, sp)
	heads := chainhead.NewMemory(chainhead.Options{})
	stores := []string{filepath.Join(dir, "a"), filepath.Join(dir, "b")}
	var svcs []*ingest.Service
	for _, d := range stores {
		st, err := receiptstore.Open(d, receiptstore.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		svc, err := ingest.New(ingest.Options{Store: st, Heads: heads, Trust: func() *sign.Trust { return trust }})
		if err != nil {
			t.Fatal(err)
		}
		svcs = append(svcs, svc)
	}
	for i, b := range batches[:5] { // the sixth stays with the agent
		if _, err := svcs[[]int{0, 0, 1, 1, 0}[i]].Ingest(nil, b.UploadRequest()); err != nil {
			t.Fatal(err)
		}
	}
	migrate := func(from ...string) (int, migrateSummary, string) {
		args := []string{"receipts", "migrate", "--to", pg.DSN, "-o", "json"}
		for _, f := range from {
			args = append(args, "--from", f)
		}
		code, out, errOut := runKeyCLI(t, args...)
		var sum migrateSummary
		if code == exitOK {
			if err := json.Unmarshal([]byte(out), &sum); err != nil {
				t.Fatalf("output %q: %v", out, err)
			}
		}
		return code, sum, errOut
	}
	// B first: its batches 3 and 4 arrive before 1, 2 and 5.
	code, sum, errOut := migrate(stores[1], stores[0])
	if code != exitOK || sum != (migrateSummary{Imported: 5, Receipts: 10}) {
		t.Fatalf("migrate: %d %+v %s", code, sum, errOut)
	}
	if code, sum, _ = migrate(stores[0], stores[1]); code != exitOK || sum != (migrateSummary{Skipped: 5}) {
		t.Fatalf("second migrate: %d %+v", code, sum)
	}
	db, err := receiptdb.Open(context.Background(), pg.DSN, receiptdb.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if h, _ := db.Get(context.Background(), "agent-1"); h.Sequence != 5 || h.Digest != batches[4].Digest {
		t.Fatalf("head after migrate %+v", h)
	}
	rs, _, _ := db.Query(context.Background(), receiptstore.Query{})
	if len(rs) != 10 {
		t.Fatalf("%d receipts in the database, want 10", len(rs))
	}
	// The agent's next batch continues the chain on the database.
	onDB, err := ingest.New(ingest.Options{Database: db, Trust: func() *sign.Trust { return trust }})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := onDB.Ingest(nil, batches[5].UploadRequest()); err != nil || res.Duplicate {
		t.Fatalf("batch 6 on the database: %+v %v", res, err)
	}

	// A store with another batch 2 (a fork) is refused, and bad flags are
	// usage errors.
	fork, _ := receiptstore.Open(filepath.Join(dir, "fork"), receiptstore.Options{})
	other := batches[1]
	other.BatchID, other.Bundle = "fork", append([]byte(nil), batches[0].Bundle...)
	other.Digest = artifact.Digest(other.Bundle)
	if _, err := fork.Append(&other, nil, nil); err != nil {
		t.Fatal(err)
	}
	fork.Close()
	if code, _, errOut := migrate(filepath.Join(dir, "fork")); code != exitError {
		t.Fatalf("fork: exit %d %s", code, errOut)
	}
	for _, args := range [][]string{
		{"receipts", "migrate", "--to", pg.DSN},
		{"receipts", "migrate", "--from", stores[0], "--to", "postgres://u@db.example/r?sslmode=disable"},
		{"receipts", "migrate", "--from", filepath.Join(dir, "missing"), "--to", pg.DSN},
	} {
		if code, _, _ := runKeyCLI(t, args...); code != exitUsage {
			t.Fatalf("%v: exit %d, want usage", args, code)
		}
	}
}
