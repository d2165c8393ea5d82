package receipt

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/mcpready/mcpready/artifact"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/internal/canonjson"
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
	// ReasonDigestMismatch: a receipt does not match its listed digest, or
	// the lists differ in length.
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

// CheckContent checks a batch on its own: its signed name matches agent and
// sequence, every receipt matches its listed digest (recomputed from the
// decoded receipt), and receipt ids are unique within it.
func CheckContent(name string, b *mcpreadyv1.ReceiptBatch) error {
	return checkBatch(name, b, func(_ int, r *mcpreadyv1.Receipt) (string, error) { return Digest(r) })
}

// CheckSignedContent is CheckContent for a batch decoded from a verified
// DSSE payload (sign.Verified.Payload, a canonical in-toto statement): the
// receipt digests are taken over the receipts' canonical bytes inside the
// payload itself, which is what was signed, without re-serialising them.
func CheckSignedContent(payload []byte, name string, b *mcpreadyv1.ReceiptBatch) error {
	raw, err := canonjson.Elements(payload, "predicate", "spec", "receipts")
	if err != nil {
		return chainErr(b, ReasonDigestMismatch, "signed payload: %v", err)
	}
	if len(raw) != len(b.Receipts) {
		return chainErr(b, ReasonDigestMismatch, "signed payload holds %d receipts, batch %d", len(raw), len(b.Receipts))
	}
	return checkBatch(name, b, func(i int, _ *mcpreadyv1.Receipt) (string, error) { return artifact.Digest(raw[i]), nil })
}

func checkBatch(name string, b *mcpreadyv1.ReceiptBatch, digest func(int, *mcpreadyv1.Receipt) (string, error)) error {
	if want := BatchName(b.GetAgentId(), b.GetSequence()); name != want {
		return chainErr(b, ReasonBadName, "signed name %q, want %q", name, want)
	}
	if b.GetSequence() == 0 {
		return chainErr(b, ReasonBadName, "sequence 0 (sequences start at 1)")
	}
	if len(b.Receipts) != len(b.ReceiptDigests) {
		return chainErr(b, ReasonDigestMismatch, "%d receipts but %d digests", len(b.Receipts), len(b.ReceiptDigests))
	}
	seen := make(map[string]struct{}, len(b.Receipts))
	for i, r := range b.Receipts {
		if _, dup := seen[r.GetReceiptId()]; dup {
			return chainErr(b, ReasonDuplicateReceipt, "receipt %s appears twice", r.GetReceiptId())
		}
		seen[r.GetReceiptId()] = struct{}{}
		d, err := digest(i, r)
		if err != nil {
			return chainErr(b, ReasonDigestMismatch, "receipt %d: %v", i, err)
		}
		if d != b.ReceiptDigests[i] {
			return chainErr(b, ReasonDigestMismatch, "receipt %d (%s) digest %s, listed %s", i, r.GetReceiptId(), d, b.ReceiptDigests[i])
		}
	}
	return nil
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
