package ledger

import (
	"errors"
	"fmt"
	"strconv"

	"google.golang.org/protobuf/proto"

	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
)

// ChainReason says why a batch does not continue its agent's chain.
type ChainReason string

// Chain and content reasons.
const (
	// ReasonGap: the batch's sequence skips one or more batches.
	ReasonGap ChainReason = "gap"
	// ReasonFork: the batch does not name the previous batch's digest, or a
	// different batch was already accepted at its sequence.
	ReasonFork ChainReason = "fork"
	// ReasonReplay: a batch at or before the chain head seen again.
	ReasonReplay ChainReason = "replay"
	// ReasonDigestMismatch: a receipt does not match its signed digest, a
	// receipt is missing or extra, or it does not decode.
	ReasonDigestMismatch ChainReason = "receipt-digest-mismatch"
	// ReasonBadName: metadata.name is not "<agent_id>/<sequence>".
	ReasonBadName ChainReason = "bad-name"
	// ReasonDuplicateReceipt: a receipt id appears twice.
	ReasonDuplicateReceipt ChainReason = "duplicate-receipt"
)

// ErrChain is wrapped by every *ChainError.
var ErrChain = errors.New("receipt chain broken")

// ChainError is a batch that breaks its agent's chain or whose receipts do
// not match their digests.
type ChainError struct {
	Reason   ChainReason
	AgentID  string
	Sequence uint64
	BatchID  string
	Detail   string
}

func (e *ChainError) Error() string {
	return fmt.Sprintf("batch %s (agent %s, sequence %d): %s: %s", e.BatchID, e.AgentID, e.Sequence, e.Reason, e.Detail)
}

// Unwrap makes errors.Is(err, ErrChain) true.
func (e *ChainError) Unwrap() error { return ErrChain }

// BatchName is the metadata.name of a signed ReceiptBatch:
// "<agent_id>/<sequence>", so a TrustPolicy can scope an agent key to the
// agent's own batches.
func BatchName(agentID string, sequence uint64) string {
	return agentID + "/" + strconv.FormatUint(sequence, 10)
}

func chainErr(b *mcpreadyv1.ReceiptBatch, r ChainReason, format string, args ...any) *ChainError {
	return &ChainError{Reason: r, AgentID: b.GetAgentId(), Sequence: b.GetSequence(), BatchID: b.GetBatchId(), Detail: fmt.Sprintf(format, args...)}
}

// Open checks a verified batch manifest against the encoded receipts that
// travelled beside it and decodes them: the signed name is
// "<agent_id>/<sequence>", the manifest inlines no receipts, there is one
// encoded receipt per listed digest and each hashes to its digest, every
// receipt decodes, and receipt ids are unique within the batch.
func Open(name string, b *mcpreadyv1.ReceiptBatch, encoded [][]byte) ([]*mcpreadyv1.Receipt, error) {
	return open(name, b, encoded, func(e []byte) (*mcpreadyv1.Receipt, error) {
		r := &mcpreadyv1.Receipt{}
		return r, proto.Unmarshal(e, r)
	})
}

// OpenSummary makes every check Open makes but returns each receipt's
// summary (DecodeSummary: only SummaryFields are set), which is what the
// control plane indexes and aggregates.
func OpenSummary(name string, b *mcpreadyv1.ReceiptBatch, encoded [][]byte) ([]*mcpreadyv1.Receipt, error) {
	return open(name, b, encoded, DecodeSummary)
}

func open(name string, b *mcpreadyv1.ReceiptBatch, encoded [][]byte, decode func([]byte) (*mcpreadyv1.Receipt, error)) ([]*mcpreadyv1.Receipt, error) {
	if want := BatchName(b.GetAgentId(), b.GetSequence()); name != want {
		return nil, chainErr(b, ReasonBadName, "signed name %q, want %q", name, want)
	}
	if b.GetSequence() == 0 {
		return nil, chainErr(b, ReasonBadName, "sequence 0 (sequences start at 1)")
	}
	if len(b.GetReceipts()) != 0 {
		return nil, chainErr(b, ReasonDigestMismatch, "manifest inlines %d receipts; receipts travel beside it", len(b.GetReceipts()))
	}
	if len(encoded) != len(b.GetReceiptDigests()) {
		return nil, chainErr(b, ReasonDigestMismatch, "%d receipts for %d signed digests", len(encoded), len(b.GetReceiptDigests()))
	}
	out := make([]*mcpreadyv1.Receipt, len(encoded))
	seen := make(map[string]struct{}, len(encoded))
	for i, e := range encoded {
		if d := Digest(e); d != b.ReceiptDigests[i] {
			return nil, chainErr(b, ReasonDigestMismatch, "receipt %d hashes to %s, signed digest is %s", i, d, b.ReceiptDigests[i])
		}
		r, err := decode(e)
		if err != nil {
			return nil, chainErr(b, ReasonDigestMismatch, "receipt %d does not decode: %v", i, err)
		}
		if _, dup := seen[r.GetReceiptId()]; dup {
			return nil, chainErr(b, ReasonDuplicateReceipt, "receipt %s appears twice", r.GetReceiptId())
		}
		seen[r.GetReceiptId()] = struct{}{}
		out[i] = r
	}
	return out, nil
}

// Head is the last accepted batch of one agent's chain. The zero value is an
// empty chain.
type Head struct {
	Sequence uint64
	// Digest is artifact.Digest of the last batch's signed bundle.
	Digest string
}

// Next checks that b directly continues h. seqDigest, when not nil, returns
// the digest of the accepted batch at an earlier sequence so a resend can be
// told apart from a fork; bundleDigest is the digest of b's signed bundle.
// It returns duplicate=true (and no error) for an exact resend.
func (h Head) Next(b *mcpreadyv1.ReceiptBatch, bundleDigest string, seqDigest func(seq uint64) (string, bool)) (duplicate bool, err error) {
	s := b.GetSequence()
	switch {
	case s <= h.Sequence:
		if seqDigest != nil {
			if d, ok := seqDigest(s); ok {
				if d == bundleDigest {
					return true, nil
				}
				return false, chainErr(b, ReasonFork, "a different batch was accepted at sequence %d", s)
			}
		}
		return false, chainErr(b, ReasonReplay, "sequence %d is at or before the chain head %d", s, h.Sequence)
	case s > h.Sequence+1 && h.Sequence > 0:
		return false, chainErr(b, ReasonGap, "sequence %d follows %d: %d batch(es) missing", s, h.Sequence, s-h.Sequence-1)
	case s > h.Sequence+1:
		return false, chainErr(b, ReasonGap, "first batch has sequence %d, want 1", s)
	case b.GetPrevBatchDigest() != h.Digest:
		return false, chainErr(b, ReasonFork, "prev_batch_digest %q, chain head is %q", b.GetPrevBatchDigest(), h.Digest)
	}
	return false, nil
}
