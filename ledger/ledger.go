// Package ledger is the receipt format: how execution receipts (see
// docs/architecture.md) are encoded and digested, how receipts travel in signed, hash-chained
// batches, and how those batches are checked. It is shared by the host
// agent (which seals batches), the control plane (which ingests, stores and
// exports them) and offline verifiers (package ledger/export).
//
// What it holds:
//   - Encode and Digest: the protobuf encoding every reader hashes as is,
//     and the digest a batch manifest lists per receipt;
//   - Batch: one signed batch as it is spooled, uploaded, stored and
//     exported (the Sigstore bundle of its manifest and the encoded
//     receipts beside it);
//   - Open and OpenSummary: a verified manifest checked against its
//     receipts; DecodeSummary: the fields the control plane indexes;
//   - Head and Head.Next: the hash-chain check (gap, fork, replay).
//
// It must not build or redact receipts (package agent/receipt does), sign
// or verify signatures (package sign; ledger/export verifies exports), do
// I/O or keep state: every function is pure, and the chain head of record
// lives with the caller (agent/spool, controlplane/chainhead).
package ledger

import (
	"crypto/rand"
	"encoding/base32"
	"encoding/binary"
	"fmt"
	mathrand "math/rand/v2"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/mcpready/mcpready/artifact"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
)

// Encode is the protobuf encoding of r that the spool stores, the batch
// lists the digest of, and every later reader hashes as is.
func Encode(r *mcpreadyv1.Receipt) ([]byte, error) {
	b, err := proto.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("receipt %s: %w", r.GetReceiptId(), err)
	}
	return b, nil
}

// Digest is artifact.Digest of an encoded receipt: the value listed in
// ReceiptBatch.receipt_digests.
func Digest(encoded []byte) string { return artifact.Digest(encoded) }

// DigestOfDigests is the digest over a list of receipt digests, in order
// (Evidence.receipts_digest).
func DigestOfDigests(digests []string) string {
	return artifact.Digest([]byte(strings.Join(digests, "\n")))
}

var idEncoding = base32.NewEncoding("0123456789ABCDEFGHJKMNPQRSTVWXYZ").WithPadding(base32.NoPadding)

var idState struct {
	sync.Mutex
	lastMs uint64
	seq    uint16
	rng    *mathrand.ChaCha8 // the random bits; seeded from crypto/rand
}

func init() {
	var seed [32]byte
	_, _ = rand.Read(seed[:]) // never fails (crypto/rand contract since Go 1.24)
	idState.rng = mathrand.NewChaCha8(seed)
}

// NewID returns a unique, time-ordered id for a receipt or a batch (26
// characters of Crockford base32: 48-bit milliseconds, a 16-bit in-process
// counter, 64 random bits). Ids sort by creation time; ids from one process
// also sort within a millisecond. The random bits come from a ChaCha8
// stream seeded with 256 bits from crypto/rand when the process starts: as
// unpredictable as crypto/rand's own output, without a getrandom call per
// id.
func NewID() string {
	ms := uint64(time.Now().UnixMilli())
	idState.Lock()
	if ms <= idState.lastMs {
		ms = idState.lastMs
		idState.seq++
		if idState.seq == 0 { // 65536 ids in one millisecond: borrow the next
			ms++
		}
	} else {
		idState.seq = 0
	}
	idState.lastMs = ms
	seq := idState.seq
	random := idState.rng.Uint64()
	idState.Unlock()
	var b [16]byte
	binary.BigEndian.PutUint64(b[0:8], ms<<16|uint64(seq))
	binary.BigEndian.PutUint64(b[8:16], random)
	var out [26]byte
	idEncoding.Encode(out[:], b[:])
	return string(out[:])
}
