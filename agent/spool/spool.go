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
// sealed and acknowledged are deleted. A sealed batch is kept in memory
// only as where its record is: Pending reads it back from the files, so
// that an agent cut off from the control plane does not hold up to
// MaxBytes of receipts in memory.
//
// Receipts of requests that reached no upstream (refusals) may fill the
// files only up to Options.RefusedBytes (half of MaxBytes by default);
// past it they are shed and counted, so that the rest stays for the
// receipts of calls that ran.
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
// It must not talk to the network (package shipper does), alter, reorder
// or drop a receipt it accepted, or define the batch format (package
// ledger does: Encode, Digest, BatchName, Batch).
//
// A failed fsync breaks the spool (ErrBroken): it refuses every later
// receipt rather than retry the fsync and acknowledge data the kernel may
// have dropped. Ready says whether receipts can be accepted now.
//
// Files: spool.go (open, state, stats), recover.go (the records and their
// replay on open), append.go (appending and the overflow policy), seal.go
// (sealing batches and acknowledgements), writer.go (Writer: the agent's
// receipt writer, durable before a state-changing answer or queued and
// group-committed in the background, and whether a call may start).
package spool

import (
	"crypto"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcpready/mcpready/artifact"
	"github.com/mcpready/mcpready/internal/seglog"
	"github.com/mcpready/mcpready/ledger"
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
	// ErrBroken: an fsync of the spool failed. The spool refuses every
	// later receipt instead of retrying (a retried fsync can succeed for
	// data already lost); opening it again recovers what reached the disk.
	ErrBroken = seglog.ErrBroken
)

// ReadyReserve is the free space (bytes, below Options.MaxBytes) under
// which Ready reports ErrSpoolFull: room for a few receipts (one is
// typically under 2 KiB), so that a call admitted because the spool was
// ready can be receipted.
const ReadyReserve = 16 << 10

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
	// RefusedBytes bounds the spool's files for receipts of requests that
	// reached no upstream (attempt_count 0: refused before any attempt).
	// Past it such receipts are shed: not spooled, counted (Stats.Shed,
	// mcpready_receipts_shed_total) and not an error, so that a flood of
	// refused requests while the control plane is out of reach cannot take
	// the room the receipts of calls that ran need (a full spool refuses
	// every state-changing call). Default MaxBytes/2; negative: no bound
	// of their own (MaxBytes, as for every receipt).
	RefusedBytes int64
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
	// Logger; nil discards. Receipts are never logged.
	Logger *slog.Logger
	// Now; default time.Now.
	Now func() time.Time
	// Fsync makes a spool file durable; nil is (*os.File).Sync. It is the
	// seam where tests inject a failing disk (a failed fsync cannot be
	// provoked for real).
	Fsync func(*os.File) error
}

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
	pending       []pendingBatch  // sealed, unacked, by sequence
	dropped       uint64
	shed          uint64
	shedding      bool // the last refused receipt was shed (logged once per episode)
	sealing       int  // receipts in the batch being made durable

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
	if opts.RefusedBytes == 0 {
		opts.RefusedBytes = opts.MaxBytes / 2
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
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	s := &Spool{opts: opts, log: opts.Logger.With("component", "spool"), acked: map[uint64]bool{}, segs: map[uint64]*segMeta{},
		kick: make(chan struct{}, 1), sealed: make(chan struct{}, 1), stop: make(chan struct{}), stopped: make(chan struct{})}
	var batches []pendingBatch
	wal, err := seglog.Open(dir, seglog.Options{Prefix: "spool", SegmentBytes: opts.SegmentBytes, Checkpoint: s.checkpoint, Logger: s.log, Fsync: opts.Fsync},
		func(p seglog.Pos, payload []byte) error { return s.replay(p, payload, &batches) })
	if err != nil {
		return nil, fmt.Errorf("spool: %w", err)
	}
	s.wal = wal
	for _, b := range batches {
		if b.seq > s.ackedThrough && !s.acked[b.seq] {
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

// Ready returns nil when the spool accepts receipts now, else why not:
// ErrClosed, an error wrapping ErrBroken after a failed fsync, or
// ErrSpoolFull when less than ReadyReserve bytes are free after deleting
// acknowledged segments. A receipt larger than what is free can still be
// refused by Append after Ready said yes.
func (s *Spool) Ready() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	if err := s.wal.Err(); err != nil {
		return fmt.Errorf("spool: %w", err)
	}
	if s.opts.MaxBytes-s.wal.Size() < ReadyReserve {
		s.compactLocked()
		if s.opts.MaxBytes-s.wal.Size() < ReadyReserve {
			return ErrSpoolFull
		}
	}
	return nil
}

// Pending returns the sealed, unacknowledged batches with sequence > after,
// oldest first, at most limit of them (limit <= 0: all), read back from
// the spool's files. An error is a batch record that cannot be read: the
// spool's files were damaged or removed under it.
func (s *Spool) Pending(after uint64, limit int) ([]ledger.Batch, error) {
	s.mu.Lock()
	i := sort.Search(len(s.pending), func(i int) bool { return s.pending[i].seq > after })
	todo := s.pending[i:]
	if limit > 0 && len(todo) > limit {
		todo = todo[:limit]
	}
	todo = slices.Clone(todo)
	s.mu.Unlock()
	out := make([]ledger.Batch, 0, len(todo))
	for _, pb := range todo {
		b, err := s.readBatch(pb)
		if err != nil {
			if !s.isPending(pb.seq) {
				continue // acknowledged meanwhile, and its segment deleted
			}
			return nil, fmt.Errorf("spool: batch %d: %w", pb.seq, err)
		}
		out = append(out, b)
	}
	return out, nil
}

// readBatch reads pending batch pb back from the spool's files.
func (s *Spool) readBatch(pb pendingBatch) (ledger.Batch, error) {
	p, err := s.wal.ReadAt(pb.pos)
	if err != nil {
		return ledger.Batch{}, err
	}
	b, _, err := s.decodeBatch(p)
	if err == nil && b.Sequence != pb.seq {
		err = fmt.Errorf("%w: batch %d found where batch %d was written", ErrCorrupt, b.Sequence, pb.seq)
	}
	return b, err
}

// isPending reports whether batch seq is sealed and not acknowledged.
func (s *Spool) isPending(seq uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.pendingIndex(seq)
	return ok
}

// pendingIndex is where batch seq is in s.pending, if it is there. Caller
// holds mu.
func (s *Spool) pendingIndex(seq uint64) (int, bool) {
	i := sort.Search(len(s.pending), func(i int) bool { return s.pending[i].seq >= seq })
	return i, i < len(s.pending) && s.pending[i].seq == seq
}

// pendingBatch is a sealed, unacknowledged batch as the spool keeps it in
// memory: where its record is, and what acknowledgements and Stats need.
type pendingBatch struct {
	seq      uint64
	receipts int
	sealed   time.Time
	pos      seglog.Pos
}

// Head returns the chain head (the last sealed batch).
func (s *Spool) Head() ledger.Head {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.head
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
	// Shed counts receipts of requests that reached no upstream, not
	// spooled since Open because the files were past Options.RefusedBytes.
	Shed uint64
}

// Stats returns a snapshot.
func (s *Spool) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := Stats{Unsealed: len(s.unsealed), PendingBatches: len(s.pending), Bytes: s.wal.Size(), Dropped: s.dropped, Shed: s.shed}
	st.Depth = st.Unsealed + s.sealing
	var oldest time.Time
	for _, b := range s.pending {
		st.Depth += b.receipts
	}
	if len(s.pending) > 0 {
		oldest = s.pending[0].sealed
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
