package spool

import (
	"fmt"
	"math/bits"

	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/internal/recordio"
	"github.com/mcpready/mcpready/ledger"
)

// Append durably records r: it is AppendBatch of one ledger.
func (s *Spool) Append(r *mcpreadyv1.Receipt) error {
	_, err := s.AppendBatch([]*mcpreadyv1.Receipt{r})
	return err
}

// AppendBatch durably records rs, in order, as one group: one record (one
// length, one CRC), written under one lock and made durable by one fsync
// (concurrent appends share it). It returns the number of receipts
// spooled, after they are fsync'd. The spool keeps its own copies; rs may
// be reused.
//
// A group is all or nothing on disk: it never spans segments, and a crash
// while writing it leaves a torn record that recovery cuts off whole, so a
// group that was not acknowledged to its caller is afterwards either
// entirely present or entirely absent.
//
// Overflow: the longest prefix of rs that fits Options.MaxBytes (after
// deleting fully acknowledged segments) is appended; the rest is refused
// and counted as dropped, and the error wraps ErrSpoolFull. If a receipt
// cannot be encoded (ErrEncode), or the group would exceed one record
// (recordio.MaxRecord), nothing is written. After an I/O error it returns
// 0: the group is not known to be durable (if it did reach the file it is
// sealed like any other).
//
// Receipts of requests that reached no upstream are shed past
// Options.RefusedBytes: left out of the group and counted, not an error;
// the count returned is of the others.
func (s *Spool) AppendBatch(rs []*mcpreadyv1.Receipt) (int, error) {
	if len(rs) == 0 {
		return 0, nil
	}
	s.m.emitted.Add(float64(len(rs)))
	enc := make([][]byte, len(rs))
	var refused []bool // which receipts may be shed; nil for none
	for i, r := range rs {
		data, err := ledger.Encode(r)
		if err != nil {
			return 0, fmt.Errorf("spool: %w: %w", ErrEncode, err)
		}
		enc[i] = data
		if s.opts.RefusedBytes > 0 && r.GetAttemptCount() == 0 {
			if refused == nil {
				refused = make([]bool, len(rs))
			}
			refused[i] = true
		}
	}
	rec := groupRecord(enc) // framed outside the lock
	if len(rec) > int(recordio.Size(recordio.MaxRecord)) {
		return 0, fmt.Errorf("spool: group of %d receipts is %d bytes, over the %d-byte record limit", len(enc), len(rec), recordio.Size(recordio.MaxRecord))
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return 0, ErrClosed
	}
	if refused != nil {
		if kept := s.shedLocked(enc, refused); len(kept) < len(enc) {
			if len(kept) == 0 {
				s.mu.Unlock()
				return 0, nil
			}
			enc, rec = kept, groupRecord(kept)
		}
	}
	total := len(enc) // those not shed
	n := s.fitLocked(enc)
	if n < len(enc) {
		s.compactLocked()
		n = s.fitLocked(enc)
	}
	if refused := len(enc) - n; refused > 0 {
		s.dropped += uint64(refused)
		s.m.dropped.Add(float64(refused))
		if n == 0 {
			s.mu.Unlock()
			return 0, ErrSpoolFull
		}
		enc, rec = enc[:n], groupRecord(enc[:n])
	}
	pos, err := s.wal.AppendFramed(rec)
	if err != nil {
		s.mu.Unlock()
		return 0, fmt.Errorf("spool: %w", err)
	}
	now := s.opts.Now()
	for _, data := range enc {
		s.unsealed = append(s.unsealed, unsealed{data: data, at: now})
	}
	s.receiptCount += uint64(n)
	s.meta(pos.Segment).maxRIdx = int64(s.receiptCount - 1)
	full := len(s.unsealed) >= s.opts.BatchSize
	s.mu.Unlock()
	if full {
		s.kickSealer()
	}
	if err := s.wal.Sync(pos); err != nil {
		return 0, fmt.Errorf("spool: %w", err)
	}
	s.m.spooled.Add(float64(n))
	if n < total {
		return n, fmt.Errorf("%w: %d of %d receipts refused", ErrSpoolFull, total-n, total)
	}
	return n, nil
}

// shedLocked returns enc without the receipts refused marks when the
// spool's files are past Options.RefusedBytes (after deleting fully
// acknowledged segments), counting them as shed; otherwise enc itself.
// Caller holds mu.
func (s *Spool) shedLocked(enc [][]byte, refused []bool) [][]byte {
	if s.wal.Size() >= s.opts.RefusedBytes {
		s.compactLocked()
	}
	if s.wal.Size() < s.opts.RefusedBytes {
		if s.shedding {
			s.shedding = false
			s.log.Info("receipts of refused requests are spooled again", "bytes", s.wal.Size(), "shed", s.shed)
		}
		return enc
	}
	kept := make([][]byte, 0, len(enc))
	for i, data := range enc {
		if !refused[i] {
			kept = append(kept, data)
		}
	}
	n := len(enc) - len(kept)
	s.shed += uint64(n)
	s.m.shed.Add(float64(n))
	if !s.shedding {
		s.shedding = true
		s.log.Warn("spool past the bound for receipts of refused requests: shedding them until batches are acknowledged",
			"bytes", s.wal.Size(), "bound", s.opts.RefusedBytes)
	}
	return kept
}

// fitLocked returns how many of enc, from the start, fit in one group
// record without the spool's files exceeding MaxBytes. Caller holds mu.
func (s *Spool) fitLocked(enc [][]byte) int {
	room, body := s.opts.MaxBytes-s.wal.Size(), 0
	for i, data := range enc {
		body += uvarintLen(len(data)) + len(data)
		if groupSize(i+1, body) > room {
			return i
		}
	}
	return len(enc)
}

// groupSize is the framed size of a group record of n receipts whose
// length-prefixed encodings take body bytes.
func groupSize(n, body int) int64 { return recordio.Size(1 + uvarintLen(n) + body) }

// groupRecord frames the group record of enc: recGroup, the count, then
// each encoded receipt with its length.
func groupRecord(enc [][]byte) []byte {
	body := 0
	for _, data := range enc {
		body += uvarintLen(len(data)) + len(data)
	}
	e := recordio.Encoder{B: make([]byte, recordio.HeaderSize, groupSize(len(enc), body))}
	e.B = append(e.B, recGroup)
	e.Uvarint(uint64(len(enc)))
	for _, data := range enc {
		e.Bytes(data)
	}
	return recordio.Frame(e.B)
}

func uvarintLen(v int) int { return (bits.Len64(uint64(v)|1) + 6) / 7 }

func (s *Spool) kickSealer() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}
