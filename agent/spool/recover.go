package spool

import (
	"fmt"
	"time"

	"github.com/mcpready/mcpready/artifact"
	"github.com/mcpready/mcpready/internal/recordio"
	"github.com/mcpready/mcpready/internal/seglog"
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

// replay applies one record, at p, during recovery.
func (s *Spool) replay(p seglog.Pos, payload []byte, batches *[]pendingBatch) error {
	if len(payload) == 0 {
		return fmt.Errorf("%w: empty record", ErrCorrupt)
	}
	seg := s.meta(p.Segment)
	d := recordio.Decoder{B: payload[1:]}
	switch payload[0] {
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
		s.replayReceipt(seg, payload[1:])
	case recBatch:
		b, through, err := s.decodeBatch(payload)
		if err != nil {
			return err
		}
		*batches = append(*batches, pendingBatch{seq: b.Sequence, receipts: len(b.Receipts), sealed: b.Sealed, pos: p})
		seg.maxBSeq = b.Sequence
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
	case recAck:
		s.markAcked(d.Uvarint())
	default:
		return fmt.Errorf("%w: record type %q", ErrCorrupt, payload[0])
	}
	if d.Err != nil {
		return fmt.Errorf("%w: record %q: %w", ErrCorrupt, payload[0], d.Err)
	}
	return nil
}

// decodeBatch decodes a batch record (sealOnce writes them), and the
// receipt index it seals through. The batch's slices share payload.
func (s *Spool) decodeBatch(payload []byte) (ledger.Batch, uint64, error) {
	if len(payload) == 0 || payload[0] != recBatch {
		return ledger.Batch{}, 0, fmt.Errorf("%w: not a batch record", ErrCorrupt)
	}
	d := recordio.Decoder{B: payload[1:]}
	b := ledger.Batch{AgentID: s.opts.AgentID, Sequence: d.Uvarint()}
	through := d.Uvarint()
	n := d.Uvarint()
	b.BatchID = d.String()
	b.Sealed = time.Unix(0, int64(d.Uvarint()))
	b.Bundle = d.Bytes()
	for ; n > 0 && d.Err == nil; n-- {
		b.Receipts = append(b.Receipts, d.Bytes())
	}
	if err := d.End(); err != nil {
		return ledger.Batch{}, 0, fmt.Errorf("%w: record %q: %w", ErrCorrupt, recBatch, err)
	}
	b.Digest = artifact.Digest(b.Bundle)
	return b, through, nil
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
