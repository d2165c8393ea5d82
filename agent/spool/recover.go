package spool

import (
	"fmt"
	"time"

	"github.com/mcpready/mcpready/artifact"
	"github.com/mcpready/mcpready/internal/recordio"
	"github.com/mcpready/mcpready/ledger"
)

// Record types: the first byte of every record.
const (
	recReceipt    = 'R' // one receipt; only read (files written before recGroup)
	recGroup      = 'G' // receipts appended together
	recBatch      = 'B'
	recAck        = 'A'
	recCheckpoint = 'C'
)

// checkpoint is the first record of every segment: the chain and seal
// state, so that older segments can be deleted.
func (s *Spool) checkpoint() []byte {
	var e recordio.Encoder
	e.B = append(e.B, recCheckpoint)
	e.Uvarint(s.head.Sequence)
	e.String(s.head.Digest)
	e.Uvarint(s.receiptCount)
	e.Uvarint(s.sealedThrough)
	e.Uvarint(s.ackedThrough)
	return e.B
}

// replay applies one record during recovery.
func (s *Spool) replay(seg *segMeta, p []byte, batches *[]ledger.Batch) error {
	if len(p) == 0 {
		return fmt.Errorf("%w: empty record", ErrCorrupt)
	}
	d := recordio.Decoder{B: p[1:]}
	switch p[0] {
	case recCheckpoint:
		s.head.Sequence = d.Uvarint()
		s.head.Digest = d.String()
		s.receiptCount = d.Uvarint()
		s.sealedThrough = d.Uvarint()
		s.ackedThrough = d.Uvarint()
	case recGroup:
		for n := d.Uvarint(); n > 0 && d.Err == nil; n-- {
			if data := d.Bytes(); d.Err == nil {
				s.replayReceipt(seg, data)
			}
		}
		d.End()
	case recReceipt: // one receipt, as written before groups
		s.replayReceipt(seg, p[1:])
	case recBatch:
		b := ledger.Batch{AgentID: s.opts.AgentID, Sequence: d.Uvarint()}
		through := d.Uvarint()
		n := d.Uvarint()
		b.BatchID = d.String()
		b.Sealed = time.Unix(0, int64(d.Uvarint()))
		b.Bundle = d.Bytes()
		for ; n > 0 && d.Err == nil; n-- {
			b.Receipts = append(b.Receipts, d.Bytes())
		}
		if d.End() == nil {
			*batches = append(*batches, b)
			seg.maxBSeq = b.Sequence
			b.Digest = artifact.Digest(b.Bundle)
			s.head = ledger.Head{Sequence: b.Sequence, Digest: b.Digest}
			// s.unsealed holds the receipts replayed so far that are not
			// sealed: indexes [receiptCount-len(unsealed), receiptCount).
			// That first index is not sealedThrough when replay starts at
			// a checkpoint whose earlier segment (holding receipts it
			// counted as unsealed) was deleted after they were sealed.
			first := s.receiptCount - uint64(len(s.unsealed))
			if through > first {
				s.unsealed = s.unsealed[min(through-first, uint64(len(s.unsealed))):]
			}
			s.sealedThrough = through
		}
	case recAck:
		s.markAcked(d.Uvarint())
	default:
		return fmt.Errorf("%w: record type %q", ErrCorrupt, p[0])
	}
	if d.Err != nil {
		return fmt.Errorf("%w: record %q: %w", ErrCorrupt, p[0], d.Err)
	}
	return nil
}

func (s *Spool) replayReceipt(seg *segMeta, data []byte) {
	idx := s.receiptCount
	s.receiptCount++
	seg.maxRIdx = int64(idx)
	if idx >= s.sealedThrough {
		s.unsealed = append(s.unsealed, unsealed{data: data, at: s.opts.Now()})
	}
}

func (s *Spool) markAcked(seq uint64) {
	if seq <= s.ackedThrough {
		return
	}
	s.acked[seq] = true
	for s.acked[s.ackedThrough+1] {
		delete(s.acked, s.ackedThrough+1)
		s.ackedThrough++
	}
}
