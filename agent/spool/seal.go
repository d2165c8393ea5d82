package spool

import (
	"errors"
	"fmt"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/mcpready/mcpready/artifact"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/internal/recordio"
	"github.com/mcpready/mcpready/ledger"
	"github.com/mcpready/mcpready/sign"
)

// Flush seals every unsealed receipt now (normally the sealer does this by
// size and interval).
func (s *Spool) Flush() error {
	for {
		n, err := s.sealOnce()
		if err != nil || n == 0 {
			return err
		}
	}
}

// sealOnce seals up to BatchSize unsealed receipts into one signed batch.
func (s *Spool) sealOnce() (int, error) {
	s.sealMu.Lock()
	defer s.sealMu.Unlock()
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return 0, ErrClosed
	}
	n, size := 0, 0
	for n < len(s.unsealed) && n < s.opts.BatchSize && (n == 0 || size+len(s.unsealed[n].data) <= s.opts.BatchBytes) {
		size += len(s.unsealed[n].data)
		n++
	}
	if n == 0 {
		s.mu.Unlock()
		return 0, nil
	}
	todo := make([]unsealed, n)
	copy(todo, s.unsealed[:n])
	head, through := s.head, s.sealedThrough+uint64(n)
	s.mu.Unlock()

	now := s.opts.Now()
	b := &mcpreadyv1.ReceiptBatch{AgentId: s.opts.AgentID, Sequence: head.Sequence + 1, BatchId: ledger.NewID(),
		PrevBatchDigest: head.Digest, CreatedAt: timestamppb.New(now)}
	encoded := make([][]byte, n)
	for k, u := range todo {
		encoded[k] = u.data
		b.ReceiptDigests = append(b.ReceiptDigests, ledger.Digest(u.data))
	}
	bundle, _, err := sign.Sign(artifact.New(artifact.KindReceiptBatch, ledger.BatchName(b.AgentId, b.Sequence), b), s.opts.Signer)
	if err != nil {
		return 0, fmt.Errorf("spool: sign batch: %w", err)
	}
	var e recordio.Encoder
	e.B = append(e.B, recBatch)
	e.Uvarint(b.Sequence)
	e.Uvarint(through)
	e.Uvarint(uint64(n))
	e.String(b.BatchId)
	e.Uvarint(uint64(now.UnixNano()))
	e.Bytes(bundle)
	for _, r := range encoded {
		e.Bytes(r)
	}

	s.mu.Lock()
	pos, err := s.wal.Append(e.B)
	if err != nil {
		s.mu.Unlock()
		return 0, fmt.Errorf("spool: %w", err)
	}
	s.meta(pos.Segment).maxBSeq = b.Sequence
	digest := artifact.Digest(bundle)
	s.head = ledger.Head{Sequence: b.Sequence, Digest: digest}
	s.sealedThrough = through
	clear(s.unsealed[:n]) // the array's sealed head must not keep their bytes alive
	s.unsealed = s.unsealed[n:]
	s.sealing = n
	s.mu.Unlock()
	// The batch becomes visible to Pending (and so to the shipper) only
	// once its record is durable: a crash before this fsync loses just the
	// batch record, the receipts are re-sealed at the same sequence after
	// restart, and no other version of that sequence was ever sent.
	if err := s.wal.Sync(pos); err != nil {
		return 0, fmt.Errorf("spool: %w", err)
	}
	s.mu.Lock()
	s.sealing = 0
	s.pending = append(s.pending, pendingBatch{seq: b.Sequence, receipts: n, sealed: now, pos: pos})
	s.compactLocked()
	s.mu.Unlock()
	select {
	case s.sealed <- struct{}{}:
	default:
	}
	return n, nil
}

func (s *Spool) sealLoop() {
	defer close(s.stopped)
	t := time.NewTicker(s.opts.BatchInterval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-s.kick:
		case <-t.C:
		}
		for {
			s.mu.Lock()
			full := len(s.unsealed) >= s.opts.BatchSize
			due := len(s.unsealed) > 0 && s.opts.Now().Sub(s.unsealed[0].at) >= s.opts.BatchInterval
			s.mu.Unlock()
			if !full && !due {
				break
			}
			if _, err := s.sealOnce(); err != nil {
				if !errors.Is(err, ErrClosed) {
					s.log.Error("sealing receipt batch failed", "err", err)
				}
				break
			}
		}
	}
}

// Sealed is signalled (without blocking; capacity one) after each new
// batch is sealed.
func (s *Spool) Sealed() <-chan struct{} { return s.sealed }

// Ack records that the control plane durably stored batch seq; the batch
// leaves the spool. The ack record is not fsync'd: losing it in a crash
// only causes a resend, which the control plane deduplicates.
func (s *Spool) Ack(seq uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	i, ok := s.pendingIndex(seq)
	if !ok {
		return nil // already acknowledged
	}
	var e recordio.Encoder
	e.B = append(e.B, recAck)
	e.Uvarint(seq)
	if _, err := s.wal.Append(e.B); err != nil {
		return fmt.Errorf("spool: %w", err)
	}
	s.m.acked.Add(float64(s.pending[i].receipts))
	s.pending = append(s.pending[:i], s.pending[i+1:]...)
	s.markAcked(seq)
	s.compactLocked()
	return nil
}
