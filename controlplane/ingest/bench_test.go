package ingest

import (
	"context"
	"crypto"
	"fmt"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/mcpready/mcpready/agent/receipt"
	"github.com/mcpready/mcpready/agent/receipt/receipttest"
	"github.com/mcpready/mcpready/artifact"
	"github.com/mcpready/mcpready/controlplane/aggregate"
	"github.com/mcpready/mcpready/controlplane/receiptstore"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/sign"
)

// chain signs n consecutive batches of size receipts for agent.
func chain(b *testing.B, k crypto.Signer, agent string, n, size int) [][]byte {
	var out [][]byte
	head := receipt.Head{}
	at := time.Now()
	for s := 0; s < n; s++ {
		rb := &mcpreadyv1.ReceiptBatch{AgentId: agent, Sequence: head.Sequence + 1, BatchId: receipt.NewID(), PrevBatchDigest: head.Digest, CreatedAt: timestamppb.New(at)}
		for i := 0; i < size; i++ {
			r := receipttest.Realistic(s*size+i, at)
			d, err := receipt.Digest(r)
			if err != nil {
				b.Fatal(err)
			}
			rb.Receipts = append(rb.Receipts, r)
			rb.ReceiptDigests = append(rb.ReceiptDigests, d)
		}
		bundle, _, err := sign.Sign(artifact.New(artifact.KindReceiptBatch, receipt.BatchName(agent, rb.Sequence), rb), k)
		if err != nil {
			b.Fatal(err)
		}
		out = append(out, bundle)
		head = receipt.Head{Sequence: rb.Sequence, Digest: artifact.Digest(bundle)}
	}
	return out
}

// BenchmarkReceiptIngest measures verify + chain check + durable store
// (+ aggregation when an Observer is wired) of 256-receipt batches.
func BenchmarkReceiptIngest(b *testing.B) {
	const size = 256
	p := newPKI(b)
	bundles := chain(b, p.agent, "agent-1", b.N, size)
	st, err := receiptstore.Open(b.TempDir(), receiptstore.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	svc, err := New(Options{Store: st, Trust: func() *sign.Trust { return p.trust }, Observer: benchAggregator(b)})
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(bundles[0])))
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		if _, err := svc.Ingest(nil, &mcpreadyv1.UploadBatchesRequest{Bundle: bundles[i]}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*size)/time.Since(start).Seconds(), "receipts/s")
}

type discard struct{}

func (discard) ApplyEvidence(context.Context, []byte) error { return nil }

func benchAggregator(b *testing.B) *aggregate.Aggregator {
	k, err := sign.GenerateKey(sign.AlgorithmECDSAP256)
	if err != nil {
		b.Fatal(err)
	}
	a, err := aggregate.New(aggregate.Options{Signer: k, Sink: discard{}})
	if err != nil {
		b.Fatal(err)
	}
	return a
}

// BenchmarkIngestStages splits one 256-receipt batch's ingest cost.
func BenchmarkIngestStages(b *testing.B) {
	p := newPKI(b)
	bundle := chain(b, p.agent, "agent-1", 1, 256)[0]
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
	b.Run("receipt-digests", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if err := receipt.CheckSignedContent(v.Payload, v.Object.Metadata.Name, rb); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("aggregate", func(b *testing.B) {
		a := benchAggregator(b)
		for i := 0; i < b.N; i++ {
			a.Observe("agent-1", rb.Receipts, rb.ReceiptDigests)
		}
	})
	b.Run("store", func(b *testing.B) {
		st, err := receiptstore.Open(b.TempDir(), receiptstore.Options{})
		if err != nil {
			b.Fatal(err)
		}
		defer st.Close()
		for i := 0; i < b.N; i++ {
			if _, err := st.Append(&receiptstore.Batch{AgentID: "agent-1", Sequence: uint64(i + 1), BatchID: fmt.Sprint(i), Digest: "d", Bundle: bundle, Batch: rb, Received: time.Now()}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
