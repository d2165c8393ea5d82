package spool_test

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"log"
	"os"
	"sync"
	"time"

	"github.com/mcpready/mcpready/agent/receipt"
	"github.com/mcpready/mcpready/agent/spool"
	"github.com/mcpready/mcpready/artifact"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/ledger"
	"github.com/mcpready/mcpready/sign"
)

// Receipts appended to the spool survive a restart. Here the agent is cut
// off from the control plane: a first batch is sealed but not acknowledged,
// one more receipt is appended, and the agent restarts. After the spool is
// opened again, both are still there; the batches are read back as the
// shipper reads them (Pending), checked as the control plane checks them
// (signature, manifest, chain), and leave the spool once acknowledged.
func Example() {
	dir, err := os.MkdirTemp("", "spool-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	key := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize)) // the agent key
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	// A long BatchInterval and the default BatchSize: only Flush seals here.
	opts := spool.Options{AgentID: "agent-eu-1", Signer: key, BatchInterval: time.Hour,
		Now: func() time.Time { return now }}

	sp, err := spool.Open(dir, opts)
	if err != nil {
		log.Fatal(err)
	}
	b := receipt.Builder{EmitterID: "agent-eu-1"}
	appendReceipt := func(tool string) {
		r := b.Start(now)
		r.Requested, r.AttemptCount = tool, 1
		if err := sp.Append(r); err != nil { // durable (fsync'd) when it returns
			log.Fatal(err)
		}
	}
	appendReceipt("docs_lookup")
	appendReceipt("search")
	if err := sp.Flush(); err != nil { // the background sealer would, by size and interval
		log.Fatal(err)
	}
	appendReceipt("tickets_create")
	st := sp.Stats()
	fmt.Println("before restart: depth", st.Depth, "unsealed", st.Unsealed, "pending batches", st.PendingBatches)
	if err := sp.Close(); err != nil {
		log.Fatal(err)
	}

	sp, err = spool.Open(dir, opts)
	if err != nil {
		log.Fatal(err)
	}
	defer sp.Close()
	st = sp.Stats()
	fmt.Println("after restart: depth", st.Depth, "unsealed", st.Unsealed, "pending batches", st.PendingBatches)
	if err := sp.Flush(); err != nil {
		log.Fatal(err)
	}
	batches, err := sp.Pending(0, 0)
	if err != nil {
		log.Fatal(err)
	}
	var prev string // the digest of the previous batch's bundle
	for _, bt := range batches {
		v, err := sign.VerifyWithKey(bt.Bundle, key.Public())
		if err != nil {
			log.Fatal(err)
		}
		m := v.Object.Spec.(*mcpreadyv1.ReceiptBatch)
		rs, err := ledger.Open(v.Object.Metadata.Name, m, bt.Receipts)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Print(v.Object.Metadata.Name, " chained:", m.GetPrevBatchDigest() == prev, " receipts:")
		for _, r := range rs {
			fmt.Print(" ", r.GetRequested())
		}
		fmt.Println()
		prev = artifact.Digest(bt.Bundle)
		if err := sp.Ack(bt.Sequence); err != nil {
			log.Fatal(err)
		}
	}
	fmt.Println("head:", sp.Head().Sequence, "depth after acks:", sp.Stats().Depth)
	// Output:
	// before restart: depth 3 unsealed 1 pending batches 1
	// after restart: depth 3 unsealed 1 pending batches 1
	// agent-eu-1/1 chained:true receipts: docs_lookup search
	// agent-eu-1/2 chained:true receipts: tickets_create
	// head: 2 depth after acks: 0
}

// The agent records receipts through a Writer: a state-changing call's
// receipt is durable before the call is answered (Record with durable),
// the others are queued and appended in groups by Run.
func ExampleWriter() {
	dir, err := os.MkdirTemp("", "spool-writer-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	sp, err := spool.Open(dir, spool.Options{AgentID: "agent-eu-1",
		Signer: ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize)), BatchInterval: time.Hour})
	if err != nil {
		log.Fatal(err)
	}
	defer sp.Close()
	w := spool.NewWriter(sp, spool.WriterOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); w.Run(ctx) }()

	b := receipt.Builder{EmitterID: "agent-eu-1"}
	// Before a call starts: can its receipt be recorded?
	fmt.Println("accepting:", w.Accepting(true))

	r := b.Start(time.Now())
	r.Requested, r.AttemptCount = "tickets_create", 1
	fmt.Println("durable:", w.Record(r, true), "spooled:", sp.Stats().Depth)

	r = b.Start(time.Now())
	r.Requested, r.AttemptCount = "docs_lookup", 1
	fmt.Println("queued:", w.Record(r, false))

	cancel() // shutting down: stop Run, then append what is still queued
	wg.Wait()
	w.Drain()
	fmt.Println("spooled:", sp.Stats().Depth)
	// Output:
	// accepting: <nil>
	// durable: <nil> spooled: 1
	// queued: <nil>
	// spooled: 2
}
