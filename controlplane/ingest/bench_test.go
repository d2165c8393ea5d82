package ingest

import (
	"context"
	"crypto"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/mcpready/mcpready/agent/spool"
	"github.com/mcpready/mcpready/artifact"
	"github.com/mcpready/mcpready/controlplane/aggregate"
	"github.com/mcpready/mcpready/controlplane/chainhead"
	"github.com/mcpready/mcpready/controlplane/receiptdb"
	"github.com/mcpready/mcpready/controlplane/receiptstore"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/internal/etcdtest"
	"github.com/mcpready/mcpready/internal/pgtest"
	"github.com/mcpready/mcpready/ledger"
	"github.com/mcpready/mcpready/ledger/ledgertest"
	"github.com/mcpready/mcpready/sign"
)

// chain signs n consecutive batches of size receipts for agent.
func chain(b *testing.B, k crypto.Signer, agent string, n, size int) []*mcpreadyv1.UploadBatchesRequest {
	var out []*mcpreadyv1.UploadBatchesRequest
	head := ledger.Head{}
	at := time.Now()
	for s := 0; s < n; s++ {
		rb := &mcpreadyv1.ReceiptBatch{AgentId: agent, Sequence: head.Sequence + 1, BatchId: ledger.NewID(), PrevBatchDigest: head.Digest, CreatedAt: timestamppb.New(at)}
		req := &mcpreadyv1.UploadBatchesRequest{BatchId: rb.BatchId, Sequence: rb.Sequence}
		for i := 0; i < size; i++ {
			e, err := ledger.Encode(ledgertest.Realistic(s*size+i, at))
			if err != nil {
				b.Fatal(err)
			}
			req.Receipts = append(req.Receipts, e)
			rb.ReceiptDigests = append(rb.ReceiptDigests, ledger.Digest(e))
		}
		bundle, _, err := sign.Sign(artifact.New(artifact.KindReceiptBatch, ledger.BatchName(agent, rb.Sequence), rb), k)
		if err != nil {
			b.Fatal(err)
		}
		req.Bundle = bundle
		out = append(out, req)
		head = ledger.Head{Sequence: rb.Sequence, Digest: artifact.Digest(bundle)}
	}
	return out
}

// BenchmarkReceiptIngest measures the control plane's whole per-batch path
// for batches of the agent's default size (spool.DefaultBatchSize): verify the signed manifest against the trust
// policy, check every receipt against its signed digest and decode it,
// check the chain, store durably (fsync) and fold into passive evidence.
// receipts/s is wall time; receipts/cpu-s divides by the process CPU time
// (getrusage), i.e. throughput per fully used core (run with -cpu 1).
func BenchmarkReceiptIngest(b *testing.B) { benchIngest(b, nil) }

// BenchmarkReceiptIngestSharedHeads is BenchmarkReceiptIngest with chain
// heads shared in a real embedded etcd (a read and a CAS per batch), as a
// replica of the control plane runs it.
func BenchmarkReceiptIngestSharedHeads(b *testing.B) {
	cli, _ := etcdtest.Etcd(b)
	benchIngest(b, chainhead.New(cli, chainhead.Options{}))
}

// BenchmarkReceiptIngestDatabase is BenchmarkReceiptIngest in database
// mode: a throwaway PostgreSQL server on this machine (internal/pgtest)
// holds receipts and heads, each batch one transaction (head lock and
// compare, batch row, receipts by COPY, commit with fsync). Eight agents
// ship concurrently, as replicas see them. Besides wall-clock receipts/s
// it reports the CPU-seconds per 1,000 receipts of this process (the
// control plane) and of PostgreSQL separately. No aggregation: in
// database mode it runs on the elected replica, off the ingest path.
func BenchmarkReceiptIngestDatabase(b *testing.B) {
	const size, agents = spool.DefaultBatchSize, 8
	pg := pgtest.Start(b)
	db, err := receiptdb.Open(context.Background(), pg.DSN, receiptdb.Options{MaxConns: agents})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	root := key(b)
	tp := &mcpreadyv1.TrustPolicy{}
	keys := make([]crypto.Signer, agents)
	for a := range keys {
		keys[a] = key(b)
		tp.Keys = append(tp.Keys, grant(b, fmt.Sprintf("bench-%d", a), keys[a], fmt.Sprintf("bench-%d/*", a)))
	}
	bundle, _, err := sign.Sign(artifact.New(artifact.KindTrustPolicy, "bench/trust", tp), root)
	if err != nil {
		b.Fatal(err)
	}
	trust, err := sign.NewTrust(bundle, root.Public(), time.Now())
	if err != nil {
		b.Fatal(err)
	}
	svc, err := New(Options{Database: db, Trust: func() *sign.Trust { return trust }, AgentReceiptsPerSecond: -1})
	if err != nil {
		b.Fatal(err)
	}
	per := (b.N + agents - 1) / agents
	reqs := make([][]*mcpreadyv1.UploadBatchesRequest, agents)
	for a := range agents {
		reqs[a] = chain(b, keys[a], fmt.Sprintf("bench-%d", a), per, size)
	}
	runtime.GC()
	b.ResetTimer()
	start, cpu, pgCPU := time.Now(), ledgertest.CPUTime(), pg.CPUTime()
	var wg sync.WaitGroup
	for a := range agents {
		wg.Go(func() {
			for _, r := range reqs[a] {
				if _, err := svc.Ingest(nil, r); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	n := float64(agents * per * size)
	b.ReportMetric(n/time.Since(start).Seconds(), "receipts/s")
	b.ReportMetric((ledgertest.CPUTime()-cpu).Seconds()*1000/n, "cp-cpu-s/1k")
	b.ReportMetric((pg.CPUTime()-pgCPU).Seconds()*1000/n, "pg-cpu-s/1k")
}

func benchIngest(b *testing.B, heads Heads) {
	const size = spool.DefaultBatchSize
	p := newPKI(b)
	reqs := chain(b, p.agent, "agent-1", b.N, size)
	st, err := receiptstore.Open(b.TempDir(), receiptstore.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	svc, err := New(Options{Store: st, Trust: func() *sign.Trust { return p.trust }, Observer: benchAggregator(b), Heads: heads, AgentReceiptsPerSecond: -1})
	if err != nil {
		b.Fatal(err)
	}
	var bytes int
	for _, r := range reqs[0].Receipts {
		bytes += len(r)
	}
	b.SetBytes(int64(bytes + len(reqs[0].Bundle)))
	runtime.GC() // collect the setup's garbage outside the measurement
	b.ResetTimer()
	start, cpu := time.Now(), ledgertest.CPUTime()
	for i := 0; i < b.N; i++ {
		if _, err := svc.Ingest(nil, reqs[i]); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*size)/time.Since(start).Seconds(), "receipts/s")
	b.ReportMetric(float64(b.N*size)/(ledgertest.CPUTime()-cpu).Seconds(), "receipts/cpu-s")
}

type discard struct{}

func (discard) ApplyEvidence(context.Context, []byte) error { return nil }

func benchAggregator(b *testing.B) *aggregate.Aggregator {
	k, err := sign.GenerateKey(sign.AlgorithmECDSAP256)
	if err != nil {
		b.Fatal(err)
	}
	a, err := aggregate.New(aggregate.Options{Signer: k, Sink: discard{}, Subjects: aggregate.SubjectFunc(func(*mcpreadyv1.Selection) bool { return true })})
	if err != nil {
		b.Fatal(err)
	}
	return a
}

// BenchmarkIngestStages splits one default-size batch's ingest cost.
func BenchmarkIngestStages(b *testing.B) {
	p := newPKI(b)
	req := chain(b, p.agent, "agent-1", 1, spool.DefaultBatchSize)[0]
	bundle := req.Bundle
	b.Run("trust-verify", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, err := p.trust.Verify(bundle, time.Now()); err != nil {
				b.Fatal(err)
			}
		}
	})
	v, err := p.trust.Verify(bundle, time.Now())
	if err != nil {
		b.Fatal(err)
	}
	rb := v.Object.Spec.(*mcpreadyv1.ReceiptBatch)
	var rs []*mcpreadyv1.Receipt
	b.Run("receipts-open", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if rs, err = ledger.OpenSummary(v.Object.Metadata.Name, rb, req.Receipts); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("aggregate", func(b *testing.B) {
		a := benchAggregator(b)
		for i := 0; i < b.N; i++ {
			a.Observe("agent-1", rs, rb.ReceiptDigests)
		}
	})
	b.Run("store", func(b *testing.B) {
		st, err := receiptstore.Open(b.TempDir(), receiptstore.Options{})
		if err != nil {
			b.Fatal(err)
		}
		defer st.Close()
		for i := 0; i < b.N; i++ {
			if _, err := st.Append(&ledger.Batch{AgentID: "agent-1", Sequence: uint64(i + 1), BatchID: fmt.Sprint(i), Digest: "d", Bundle: bundle, Receipts: req.Receipts, Received: time.Now()}, rs, rb.ReceiptDigests); err != nil {
				b.Fatal(err)
			}
		}
	})
}
