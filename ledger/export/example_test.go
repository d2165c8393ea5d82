package export_test

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
	"github.com/mcpready/mcpready/ledger/ledgertest"
	"github.com/mcpready/mcpready/sign"
)

// Verify checks an export offline, with nothing but the agents' public
// key: every batch's signature, every receipt against its signed digest,
// and the chain of batches. A batch dropped from the middle is named.
func ExampleVerify() {
	key, err := sign.GenerateKey(sign.AlgorithmECDSAP256)
	if err != nil {
		fmt.Println(err)
		return
	}
	batches, err := signedChain(key, "host-7", 3)
	if err != nil {
		fmt.Println(err)
		return
	}
	byKey := func(bundle []byte) (*sign.Verified, error) { return sign.VerifyWithKey(bundle, key.Public()) }

	var whole bytes.Buffer
	for _, b := range batches {
		_ = export.Write(&whole, b)
	}
	sums, err := export.Verify(&whole, byKey)
	fmt.Printf("%s: %d batches, %d receipts, %v\n", sums[0].AgentID, sums[0].Batches, sums[0].Receipts, err)

	var gap bytes.Buffer
	for _, b := range []ledger.Batch{batches[0], batches[2]} {
		_ = export.Write(&gap, b)
	}
	_, err = export.Verify(&gap, byKey)
	var f *export.Failure
	if errors.As(err, &f) {
		fmt.Printf("line %d, batch %s: %s\n", f.Line, f.BatchID, f.Reason)
	}
	// Output:
	// host-7: 3 batches, 6 receipts, <nil>
	// line 2, batch host-7-b3: gap
}

// signedChain signs n batches of two receipts each, chained as an agent
// chains them.
func signedChain(key crypto.Signer, agent string, n int) ([]ledger.Batch, error) {
	var out []ledger.Batch
	var head ledger.Head
	for seq := uint64(1); seq <= uint64(n); seq++ {
		m := &mcpreadyv1.ReceiptBatch{AgentId: agent, Sequence: seq, BatchId: fmt.Sprintf("%s-b%d", agent, seq),
			PrevBatchDigest: head.Digest, CreatedAt: timestamppb.New(time.Unix(1000, 0))}
		var receipts [][]byte
		for i := range 2 {
			r := ledgertest.Receipt(agent, time.Unix(1000, 0))
			r.ReceiptId = fmt.Sprintf("%s-%d-%d", agent, seq, i)
			e, _ := ledger.Encode(r)
			receipts = append(receipts, e)
			m.ReceiptDigests = append(m.ReceiptDigests, ledger.Digest(e))
		}
		bundle, _, err := sign.Sign(artifact.New(artifact.KindReceiptBatch, ledger.BatchName(agent, seq), m), key)
		if err != nil {
			return nil, err
		}
		out = append(out, ledger.Batch{BatchID: m.BatchId, AgentID: agent, Sequence: seq, Bundle: bundle, Receipts: receipts})
		head = ledger.Head{Sequence: seq, Digest: artifact.Digest(bundle)}
	}
	return out, nil
}
