// Package spool is the host agent's durable local receipt spool.
//
// Receipts are appended to fsync'd, append-only segment files (framed by
// internal/recordio with a length and CRC so a torn trailing record is
// detected and truncated on open; no fsync'd record is ever lost). A group
// of receipts appended together (AppendBatch) is one record: one write and
// one fsync, and after a crash the group is entirely present or absent. A
// background sealer groups unsealed receipts into batches of kind
// ReceiptBatch named "<agent_id>/<sequence>", hash-chained per agent (each
// batch names artifact.Digest of the previous batch's signed bundle) and
// signed with the agent key. The chain head survives restarts. Sealed
// batches stay in the spool until Ack; segments whose records are all
// sealed and acknowledged are deleted.
//
// Overflow policy: refuse new. When appending a receipt would make the
// spool's files exceed Options.MaxBytes (after deleting fully acknowledged
// segments), Append returns ErrSpoolFull and counts the receipt as dropped;
// AppendBatch appends the longest prefix of its group that fits and
// refuses (and counts) the rest.
// Nothing already spooled is ever discarded, so nothing that was accepted
// (and nothing the control plane acknowledged) is lost; the caller decides
// whether the call itself may proceed without a ledger.
//
// The spool does not talk to the network; package shipper does.
package spool

import (
	"crypto"
	"errors"
	"fmt"
	"log/slog"
	"math/bits"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/mcpready/mcpready/artifact"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/internal/recordio"
	"github.com/mcpready/mcpready/internal/seglog"
	"github.com/mcpready/mcpready/ledger"
	"github.com/mcpready/mcpready/sign"
)

// Sentinel errors.
var (
	// ErrSpoolFull: the receipt was refused (and counted as dropped)
	// because the spool is at MaxBytes.
	ErrSpoolFull = errors.New("receipt spool full: receipt dropped")
	// ErrClosed: the spool is closed.
	ErrClosed = errors.New("receipt spool closed")
	// ErrEncode: a receipt cannot be encoded (AppendBatch then writes
	// none of its group).
	ErrEncode = errors.New("receipt cannot be encoded")
	// ErrCorrupt: a segment is damaged before its last record.
	ErrCorrupt = errors.New("receipt spool corrupt")
)

// DefaultBatchSize is the default Options.BatchSize. Larger batches
// spread the per-batch costs (one signature, one manifest, one fsync and
// one acknowledgement at each end) over more receipts: the control plane
// ingests ~15% more receipts per core at 512 than at 256. The price: a
// lost acknowledgement resends up to 512 receipts (deduplicated), and one
// upload is up to ~0.7 MB (well under BatchBytes and gRPC's 4 MiB). Under
// light load BatchInterval, not the size, decides when a batch is sealed.
const DefaultBatchSize = 512

// Options configures a spool. Zero values take the documented defaults.
type Options struct {
	// AgentID names the chain; required. Batches are named
	// "<AgentID>/<sequence>".
	AgentID string
	// Signer is the agent key; required.
	Signer crypto.Signer
	// MaxBytes bounds the spool's files; default 256 MiB.
	MaxBytes int64
	// SegmentBytes is the size at which a segment is rotated; default
	// MaxBytes/16 (at least 64 KiB).
	SegmentBytes int64
	// BatchSize is the most receipts per batch; default DefaultBatchSize.
	BatchSize int
	// BatchBytes bounds the encoded receipts of one batch (so a batch fits
	// a gRPC message); default 2 MiB. A batch holds at least one ledger.
	BatchBytes int
	// BatchInterval seals a partial batch this long after its first
	// receipt; default 1s.
	BatchInterval time.Duration
	// Registry receives the spool's metrics; nil registers none.
	Registry prometheus.Registerer
	// Logger; default slog.Default(). Receipts are never logged.
	Logger *slog.Logger
	// Now; default time.Now.
	Now func() time.Time
}

const (
	recReceipt    = 'R' // one receipt; only read (files written before recGroup)
	recGroup      = 'G' // receipts appended together
	recBatch      = 'B'
	recAck        = 'A'
	recCheckpoint = 'C'
)

type segMeta struct {
	maxRIdx int64  // highest receipt index in the segment, -1 for none
	maxBSeq uint64 // highest batch sequence in it, 0 for none
}

type unsealed struct {
	data []byte
	at   time.Time
}

// Spool is the durable receipt spool. It is safe for concurrent use.
type Spool struct {
	opts Options
	log  *slog.Logger
	m    *metrics
	wal  *seglog.Log

	mu            sync.Mutex // guards the state below; held around wal.Append so file order is state order
	closed        bool
	segs          map[uint64]*segMeta
	receiptCount  uint64 // receipts ever appended (next index)
	sealedThrough uint64 // receipts with index < this are sealed
	unsealed      []unsealed
	head          ledger.Head
	ackedThrough  uint64
	acked         map[uint64]bool // acked above ackedThrough
	pending       []ledger.Batch  // sealed, unacked, by sequence
	dropped       uint64
	sealing       int // receipts in the batch being made durable

	sealMu  sync.Mutex
	kick    chan struct{}
	sealed  chan struct{}
	stop    chan struct{}
	stopped chan struct{}
}

// Open opens (creating if needed) the spool in dir, recovering its state:
// a torn trailing record is truncated (and logged), receipts not yet sealed
// are sealed again, and sealed batches not yet acknowledged are pending.
func Open(dir string, opts Options) (*Spool, error) {
	if opts.AgentID == "" || artifact.ValidateName(ledger.BatchName(opts.AgentID, 1)) != nil {
		return nil, fmt.Errorf("spool: invalid agent id %q", opts.AgentID)
	}
	if opts.Signer == nil {
		return nil, errors.New("spool: a signer is required")
	}
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = 256 << 20
	}
	if opts.SegmentBytes <= 0 {
		opts.SegmentBytes = max(opts.MaxBytes/16, 64<<10)
	}
	if opts.BatchSize <= 0 {
		opts.BatchSize = DefaultBatchSize
	}
	if opts.BatchBytes <= 0 {
		opts.BatchBytes = 2 << 20
	}
	if opts.BatchInterval <= 0 {
		opts.BatchInterval = time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	s := &Spool{opts: opts, log: opts.Logger.With("component", "spool"), acked: map[uint64]bool{}, segs: map[uint64]*segMeta{},
		kick: make(chan struct{}, 1), sealed: make(chan struct{}, 1), stop: make(chan struct{}), stopped: make(chan struct{})}
	var batches []ledger.Batch
	wal, err := seglog.Open(dir, seglog.Options{Prefix: "spool", SegmentBytes: opts.SegmentBytes, Checkpoint: s.checkpoint, Logger: s.log},
		func(p seglog.Pos, payload []byte) error { return s.replay(s.meta(p.Segment), payload, &batches) })
	if err != nil {
		return nil, fmt.Errorf("spool: %w", err)
	}
	s.wal = wal
	for _, b := range batches {
		if b.Sequence > s.ackedThrough && !s.acked[b.Sequence] {
			s.pending = append(s.pending, b)
		}
	}
	s.m = newMetrics(opts.Registry, s)
	go s.sealLoop()
	return s, nil
}

func (s *Spool) meta(seg uint64) *segMeta {
	m := s.segs[seg]
	if m == nil {
		m = &segMeta{maxRIdx: -1}
		s.segs[seg] = m
	}
	return m
}

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
		return fmt.Errorf("%w: record %q: %v", ErrCorrupt, p[0], d.Err)
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
func (s *Spool) AppendBatch(rs []*mcpreadyv1.Receipt) (int, error) {
	if len(rs) == 0 {
		return 0, nil
	}
	s.m.emitted.Add(float64(len(rs)))
	enc := make([][]byte, len(rs))
	for i, r := range rs {
		data, err := ledger.Encode(r)
		if err != nil {
			return 0, fmt.Errorf("spool: %w: %w", ErrEncode, err)
		}
		enc[i] = data
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
	if n < len(rs) {
		return n, fmt.Errorf("%w: %d of %d receipts refused", ErrSpoolFull, len(rs)-n, len(rs))
	}
	return n, nil
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

// compactLocked deletes the oldest segments whose receipts are all sealed
// and whose batches are all acknowledged. Caller holds mu.
func (s *Spool) compactLocked() {
	segs := s.wal.Segments()
	for _, seg := range segs[:len(segs)-1] {
		m := s.meta(seg.Num)
		if m.maxRIdx >= int64(s.sealedThrough) || m.maxBSeq > s.ackedThrough {
			return
		}
		if err := s.wal.Remove(seg.Num); err != nil {
			s.log.Error("cannot delete spool segment", "segment", seg.Num, "err", err)
			return
		}
		delete(s.segs, seg.Num)
	}
}

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
	s.pending = append(s.pending, ledger.Batch{BatchID: b.BatchId, AgentID: b.AgentId, Sequence: b.Sequence, Bundle: bundle, Receipts: encoded, Digest: digest, Sealed: now})
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

// Pending returns the sealed, unacknowledged batches with sequence > after,
// oldest first.
func (s *Spool) Pending(after uint64) []ledger.Batch {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := sort.Search(len(s.pending), func(i int) bool { return s.pending[i].Sequence > after })
	return append([]ledger.Batch(nil), s.pending[i:]...)
}

// Head returns the chain head (the last sealed batch).
func (s *Spool) Head() ledger.Head {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.head
}

// Ack records that the control plane durably stored batch seq; the batch
// leaves the spool. The ack record is not fsync'd: losing it in a crash
// only causes a resend, which the control plane deduplicates.
func (s *Spool) Ack(seq uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	i := sort.Search(len(s.pending), func(i int) bool { return s.pending[i].Sequence >= seq })
	if i == len(s.pending) || s.pending[i].Sequence != seq {
		return nil // already acknowledged
	}
	var e recordio.Encoder
	e.B = append(e.B, recAck)
	e.Uvarint(seq)
	if _, err := s.wal.Append(e.B); err != nil {
		return fmt.Errorf("spool: %w", err)
	}
	s.m.acked.Add(float64(len(s.pending[i].Receipts)))
	s.pending = append(s.pending[:i], s.pending[i+1:]...)
	s.markAcked(seq)
	s.compactLocked()
	return nil
}

// Stats is a snapshot of the spool.
type Stats struct {
	// Depth is the number of receipts not yet acknowledged.
	Depth int
	// Unsealed receipts and pending (sealed, unacknowledged) batches.
	Unsealed, PendingBatches int
	// OldestAge is the age of the oldest unacknowledged ledger.
	OldestAge time.Duration
	Bytes     int64
	// Dropped counts receipts refused as ErrSpoolFull since Open.
	Dropped uint64
}

// Stats returns a snapshot.
func (s *Spool) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := Stats{Unsealed: len(s.unsealed), PendingBatches: len(s.pending), Bytes: s.wal.Size(), Dropped: s.dropped}
	st.Depth = st.Unsealed + s.sealing
	var oldest time.Time
	for _, b := range s.pending {
		st.Depth += len(b.Receipts)
	}
	if len(s.pending) > 0 {
		oldest = s.pending[0].Sealed
	} else if len(s.unsealed) > 0 {
		oldest = s.unsealed[0].at
	}
	if !oldest.IsZero() {
		st.OldestAge = s.opts.Now().Sub(oldest)
	}
	return st
}

// Close stops the sealer and closes the files. Unsealed receipts stay on
// disk and are sealed after the next Open; it does not seal them (call
// Flush first for that).
func (s *Spool) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	close(s.stop)
	<-s.stopped
	s.sealMu.Lock()
	defer s.sealMu.Unlock()
	return s.wal.Close()
}

// encoder/decoder: the spool's record fields.
