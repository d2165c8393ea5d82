// Package receiptstore is the control plane's append-only receipt store:
// verified receipt batches in segment files on local disk (raw receipts do
// not belong in etcd), with an in-memory index rebuilt on open and bounded
// by Options.MaxIndexed: older whole segments leave the index and are read
// from disk, a segment at a time, by queries, gets and exports (tails
// start from the index).
//
// Each record holds one batch exactly as the agent signed it plus its
// decoded content. A segment tail torn by a crash is cut off cleanly on
// open (and logged). Every segment starts with a checkpoint of each
// agent's chain head, so retention can delete whole old segments without
// forgetting where each chain stands.
//
// It must not verify signatures or chains (package ingest does that before
// calling Append), hold the chain heads ingest decides on (package
// chainhead does; the heads kept here only seed them), or alter a batch:
// bundles and receipts are kept byte for byte as signed.
//
// Files: store.go (open, append, chain lookups), record.go (the on-disk
// records), index.go (the in-memory index and retention), query.go
// (queries, tails and exports).
package receiptstore

import (
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/internal/seglog"
	"github.com/mcpready/mcpready/ledger"
)

// Sentinel errors.
var (
	ErrNotFound = errors.New("receipt not found")
	// ErrConflict: a batch id already stored with different content.
	ErrConflict = errors.New("batch id already stored with different content")
	ErrCorrupt  = errors.New("receipt store corrupt")
)

// Options configures a store. Zero values take the defaults.
type Options struct {
	// SegmentBytes rotates segments at this size; default 64 MiB.
	SegmentBytes int64
	// Retention deletes whole segments whose newest batch was received
	// longer ago than this (see ApplyRetention); zero keeps everything.
	Retention time.Duration
	// MaxIndexed bounds the receipts kept in the in-memory index: beyond
	// it, the oldest whole segments leave the index (never the one being
	// written) and stay on disk, where queries, gets and exports read them
	// a segment at a time. 0 means DefaultMaxIndexed.
	MaxIndexed int
	// Logger; nil discards.
	Logger *slog.Logger
	// Now; default time.Now.
	Now func() time.Time
}

// DefaultMaxIndexed is the default Options.MaxIndexed.
const DefaultMaxIndexed = 1_000_000

// Store is the receipt store, safe for concurrent use.
type Store struct {
	opts Options
	log  *slog.Logger
	wal  *seglog.Log

	mu         sync.RWMutex
	batches    []batchEntry
	byBatchID  map[string]int32
	receipts   []receiptEntry
	byID       map[string]int32
	byWorkflow map[string][]int32
	bySubject  map[subjectKey][]int32
	agents     map[string]*agentState
	segNewest  map[uint64]int64         // segment -> newest received (unix nanos)
	changed    chan struct{}            // closed and replaced on every append
	pending    map[string]*pendingBatch // batch id -> written, not yet fsync'd
	unindexed  []uint64                 // segments left out of the index (MaxIndexed), oldest first

	// beforeSync, if set (tests), runs between a batch's write and fsync.
	beforeSync func()
}

// Open opens (creating) the store in dir and rebuilds the index.
func Open(dir string, opts Options) (*Store, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.MaxIndexed <= 0 {
		opts.MaxIndexed = DefaultMaxIndexed
	}
	s := &Store{opts: opts, log: opts.Logger.With("component", "receiptstore"), byBatchID: map[string]int32{}, byID: map[string]int32{},
		byWorkflow: map[string][]int32{}, bySubject: map[subjectKey][]int32{}, agents: map[string]*agentState{},
		segNewest: map[uint64]int64{}, changed: make(chan struct{}), pending: map[string]*pendingBatch{}}
	wal, err := seglog.Open(dir, seglog.Options{Prefix: "receipts", SegmentBytes: opts.SegmentBytes, Checkpoint: s.checkpoint, Logger: s.log},
		func(p seglog.Pos, payload []byte) error { return s.replay(p, payload) })
	if err != nil {
		return nil, fmt.Errorf("receiptstore: %w", err)
	}
	s.wal = wal
	return s, nil
}

// AppendResult says what Append did.
type AppendResult struct {
	// Duplicate: the same batch was already stored; nothing was written.
	Duplicate bool
	// DuplicateReceipts counts receipts whose ids were already stored (from
	// another batch); they are kept in the batch but indexed once.
	DuplicateReceipts int
}

// Append stores b durably (fsync'd before it returns); b.Digest must be
// artifact.Digest(b.Bundle) and b.Received is recorded. An identical batch
// already stored (same batch id and digest) is a duplicate; the same batch
// id with another digest is ErrConflict. The caller must serialise Appends
// per agent (ingest does) so chain checks and appends do not interleave.
//
// summaries and digests, when not nil, save decoding and hashing
// b.Receipts again: the receipts as ledger.OpenSummary returns them and
// their digests in order (the manifest's receipt_digests). They must match
// b.Receipts; the store keeps neither.
func (s *Store) Append(b *ledger.Batch, summaries []*mcpreadyv1.Receipt, digests []string) (AppendResult, error) {
	s.mu.Lock()
	var prev batchEntry
	p, ok := s.pending[b.BatchID]
	if ok {
		prev = p.entry
	}
	if bi, stored := s.byBatchID[b.BatchID]; stored {
		prev, ok = s.batches[bi], true
	}
	if ok {
		s.mu.Unlock()
		if prev.digest != b.Digest {
			return AppendResult{}, fmt.Errorf("%w: %s", ErrConflict, b.BatchID)
		}
		// Acknowledge a resend only once the original is durable.
		if err := s.wal.Sync(prev.pos); err != nil {
			return AppendResult{}, fmt.Errorf("receiptstore: %w", err)
		}
		return AppendResult{Duplicate: true}, nil
	}
	rs, ds, err := decode(b, summaries, digests)
	if err != nil {
		s.mu.Unlock()
		return AppendResult{}, err
	}
	pos, err := s.wal.AppendFramed(encodeBatch(b))
	if err != nil {
		s.mu.Unlock()
		return AppendResult{}, fmt.Errorf("receiptstore: %w", err)
	}
	// Written, not yet durable: known only to Append (for resends) and to
	// checkpoints, never to queries or chain lookups.
	mine := &pendingBatch{entry: batchEntry{pos: pos, agent: b.AgentID, seq: b.Sequence, id: b.BatchID, digest: b.Digest}, b: b, rs: rs, ds: ds}
	s.pending[b.BatchID] = mine
	s.mu.Unlock()
	if s.beforeSync != nil {
		s.beforeSync()
	}
	err = s.wal.Sync(pos)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		if !mine.indexed {
			delete(s.pending, b.BatchID)
		}
		return AppendResult{}, fmt.Errorf("receiptstore: %w", err)
	}
	s.indexDurable(pos)
	return AppendResult{DuplicateReceipts: mine.dups}, nil
}

// pendingBatch is a batch written but not yet known to be fsync'd.
type pendingBatch struct {
	entry   batchEntry
	b       *ledger.Batch
	rs      []*mcpreadyv1.Receipt
	ds      []string
	indexed bool
	dups    int
}

// indexDurable indexes, in log order, every pending batch at or before
// pos: a Sync covers everything written before it, so the index always
// follows the log's order (page cursors rely on it). Caller holds mu.
func (s *Store) indexDurable(pos seglog.Pos) {
	var ready []*pendingBatch
	for _, p := range s.pending {
		if p.entry.pos.Segment < pos.Segment || (p.entry.pos.Segment == pos.Segment && p.entry.pos.Offset <= pos.Offset) {
			ready = append(ready, p)
		}
	}
	if len(ready) == 0 {
		return // another Append indexed this batch already
	}
	sort.Slice(ready, func(i, j int) bool {
		pi, pj := ready[i].entry.pos, ready[j].entry.pos
		return pi.Segment < pj.Segment || (pi.Segment == pj.Segment && pi.Offset < pj.Offset)
	})
	for _, p := range ready {
		p.dups, p.indexed = s.index(p.entry.pos, p.b, p.rs, p.ds), true
		delete(s.pending, p.entry.id)
	}
	close(s.changed)
	s.changed = make(chan struct{})
}

// Head returns agentID's chain head (zero for an unknown agent).
func (s *Store) Head(agentID string) ledger.Head {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if a := s.agents[agentID]; a != nil {
		return a.head
	}
	return ledger.Head{}
}

// BatchDigest returns the digest of agentID's stored batch at seq.
func (s *Store) BatchDigest(agentID string, seq uint64) (string, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	a := s.agents[agentID]
	if a == nil {
		return "", false
	}
	bi, ok := a.batches[seq]
	if !ok {
		return "", false
	}
	return s.batches[bi].digest, true
}

// Stats is a snapshot of the store's size.
type Stats struct {
	Batches, Receipts, Agents, Segments int
	Bytes                               int64
}

// Stats returns a snapshot.
func (s *Store) Stats() Stats {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return Stats{Batches: len(s.batches), Receipts: len(s.receipts), Agents: len(s.agents), Segments: len(s.wal.Segments()), Bytes: s.wal.Size()}
}

// Close closes the store.
func (s *Store) Close() error { return s.wal.Close() }
