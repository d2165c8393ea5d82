package ledger_test

import (
	"bytes"
	"crypto"
	"errors"
	"fmt"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/mcpready/mcpready/artifact"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/ledger"
	"github.com/mcpready/mcpready/ledger/export"
	"github.com/mcpready/mcpready/sign"
)

// seal makes the next signed batch of agent after head from receipts, as
// the agent's spool does: encode each receipt, list its digest in the
// manifest, name the previous batch's bundle digest, sign the manifest
// under the name "<agent>/<sequence>".
func seal(key crypto.Signer, agent string, head ledger.Head, receipts ...*mcpreadyv1.Receipt) (ledger.Batch, *mcpreadyv1.ReceiptBatch, error) {
	m := &mcpreadyv1.ReceiptBatch{AgentId: agent, Sequence: head.Sequence + 1, BatchId: ledger.NewID(),
		PrevBatchDigest: head.Digest, CreatedAt: timestamppb.Now()}
	b := ledger.Batch{BatchID: m.BatchId, AgentID: agent, Sequence: m.Sequence}
	for _, r := range receipts {
		enc, err := ledger.Encode(r)
		if err != nil {
			return b, nil, err
		}
		b.Receipts = append(b.Receipts, enc)
		m.ReceiptDigests = append(m.ReceiptDigests, ledger.Digest(enc))
	}
	bundle, _, err := sign.Sign(artifact.New(artifact.KindReceiptBatch, ledger.BatchName(agent, m.Sequence), m), key)
	if err != nil {
		return b, nil, err
	}
	b.Bundle, b.Digest = bundle, artifact.Digest(bundle)
	return b, m, nil
}

func receiptFor(tool string) *mcpreadyv1.Receipt {
	return &mcpreadyv1.Receipt{ReceiptId: ledger.NewID(), EmitterId: "agent-1", Requested: tool, EmittedAt: timestamppb.New(time.Unix(1700000000, 0)),
		Selected: &mcpreadyv1.Selection{ServerName: "com.example/docs", ToolName: tool}}
}

// Build a chain of three batches and check each one as a receiver does:
// Open checks the receipts against the signed digests, Head.Next that the
// batch continues the chain. A batch that skips a sequence is a gap.
func Example_chain() {
	key, _ := sign.GenerateKey(sign.AlgorithmECDSAP256)
	var sender, receiver ledger.Head
	for i := 1; i <= 3; i++ {
		b, m, err := seal(key, "agent-1", sender, receiptFor(fmt.Sprintf("lookup-%d", i)))
		if err != nil {
			fmt.Println(err)
			return
		}
		sender = ledger.Head{Sequence: b.Sequence, Digest: b.Digest}
		rs, err := ledger.Open(ledger.BatchName(m.AgentId, m.Sequence), m, b.Receipts)
		if err != nil {
			fmt.Println(err)
			return
		}
		dup, err := receiver.Next(m, b.Digest, nil)
		fmt.Printf("batch %d: %d receipt(s), duplicate=%v, err=%v\n", b.Sequence, len(rs), dup, err)
		receiver = sender
	}
	_, gap, _ := seal(key, "agent-1", ledger.Head{Sequence: 4, Digest: sender.Digest})
	_, err := receiver.Next(gap, "sha256:whatever", nil)
	var ce *ledger.ChainError
	fmt.Println(errors.Is(err, ledger.ErrChain), errors.As(err, &ce) && ce.Reason == ledger.ReasonGap)
	// Output:
	// batch 1: 1 receipt(s), duplicate=false, err=<nil>
	// batch 2: 1 receipt(s), duplicate=false, err=<nil>
	// batch 3: 1 receipt(s), duplicate=false, err=<nil>
	// true true
}

// Export two batches as JSON lines and verify the export offline with
// the agent's public key: signatures, receipt digests and the chain.
func Example_verifyExport() {
	key, _ := sign.GenerateKey(sign.AlgorithmECDSAP256)
	var out bytes.Buffer
	var head ledger.Head
	for i := 1; i <= 2; i++ {
		b, _, err := seal(key, "agent-1", head, receiptFor("lookup"), receiptFor("search"))
		if err != nil {
			fmt.Println(err)
			return
		}
		head = ledger.Head{Sequence: b.Sequence, Digest: b.Digest}
		if err := export.Write(&out, b); err != nil {
			fmt.Println(err)
			return
		}
	}
	sums, err := export.Verify(&out, func(bundle []byte) (*sign.Verified, error) { return sign.VerifyWithKey(bundle, key.Public()) })
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, s := range sums {
		fmt.Printf("%s: %d batches, %d receipts, sequences %d-%d\n", s.AgentID, s.Batches, s.Receipts, s.FirstSeq, s.LastSeq)
	}
	// Output:
	// agent-1: 2 batches, 4 receipts, sequences 1-2
}

// DecodeSummary decodes only the fields the control plane indexes
// (SummaryFields) and validates the rest as proto.Unmarshal would.
func ExampleDecodeSummary() {
	r := receiptFor("lookup")
	r.ArgumentsDigest = "sha256:not-in-the-summary"
	enc, _ := ledger.Encode(r)
	s, err := ledger.DecodeSummary(enc)
	fmt.Println(s.GetSelected().GetToolName(), s.GetEmittedAt().AsTime().Unix(), s.GetArgumentsDigest() == "", err)
	// Output:
	// lookup 1700000000 true <nil>
}
