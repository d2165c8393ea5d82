package ledger

import (
	"encoding/json"
	"time"

	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
)

// Batch is one signed receipt batch as it moves: sealed in the agent's
// spool, uploaded, stored by the control plane and exported. The manifest
// (a ReceiptBatch listing one digest per receipt) is signed; the encoded
// receipts travel beside it, not inside it.
//
// Its JSON form is one line of a receipt export (package ledger/export):
// the fields with a JSON name, nothing else. The other fields are local to
// the stage holding the batch and are never exported.
type Batch struct {
	BatchID  string `json:"batchId"`
	AgentID  string `json:"agentId"`
	Sequence uint64 `json:"sequence"`
	// Bundle is the Sigstore bundle of the signed manifest, exactly as
	// signed (single-line canonical JSON, embedded byte for byte in an
	// export).
	Bundle json.RawMessage `json:"bundle"`
	// Receipts are the protobuf-encoded receipts (Encode), exactly as
	// spooled, in the order of the manifest's receipt_digests.
	Receipts [][]byte `json:"receipts"`

	// Digest is artifact.Digest(Bundle), the link the next batch names
	// (prev_batch_digest), when the holder has computed it.
	Digest string `json:"-"`
	// Sealed is when the agent sealed the batch (agent/spool).
	Sealed time.Time `json:"-"`
	// Received is when the control plane stored it (controlplane/receiptstore).
	Received time.Time `json:"-"`
}

// UploadRequest is b as an agent uploads it (ReceiptsService.UploadBatches),
// without the node, which travels once per stream.
func (b *Batch) UploadRequest() *mcpreadyv1.UploadBatchesRequest {
	return &mcpreadyv1.UploadBatchesRequest{BatchId: b.BatchID, Sequence: b.Sequence, Bundle: b.Bundle, Receipts: b.Receipts}
}

// ExportResponse is b as ReceiptsService.ExportBatches streams it.
func (b *Batch) ExportResponse() *mcpreadyv1.ExportBatchesResponse {
	return &mcpreadyv1.ExportBatchesResponse{BatchId: b.BatchID, AgentId: b.AgentID, Sequence: b.Sequence, Bundle: b.Bundle, Receipts: b.Receipts}
}

// FromExport is the batch an ExportBatches response carries.
func FromExport(m *mcpreadyv1.ExportBatchesResponse) Batch {
	return Batch{BatchID: m.GetBatchId(), AgentID: m.GetAgentId(), Sequence: m.GetSequence(), Bundle: m.GetBundle(), Receipts: m.GetReceipts()}
}
