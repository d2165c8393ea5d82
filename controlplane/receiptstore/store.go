// Package receiptstore is the control plane's append-only receipt store:
// verified receipt batches in segment files on local disk (raw receipts do
// not belong in etcd), with an in-memory index rebuilt on open.
//
// Each record holds one batch exactly as the agent signed it plus its
// decoded content. A segment tail torn by a crash is cut off cleanly on
// open (and logged). Every segment starts with a checkpoint of each
// agent's chain head, so retention can delete whole old segments without
// forgetting where each chain stands.
//
// The store does not verify signatures or chains; package ingest does that
// before calling Append.
package receiptstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/internal/recordio"
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
	// Logger; default slog.Default().
	Logger *slog.Logger
	// Now; default time.Now.
	Now func() time.Time
}

// Query selects receipts; empty fields do not filter. Limit 0 means all.
type Query struct {
	ReceiptID, WorkflowID, ServerName, ToolName, AgentID string
	// Since and Until bound the receipt's emitted_at (inclusive, exclusive).
	Since, Until time.Time
	Limit        int
}

type batchEntry struct {
	pos      seglog.Pos
	agent    string
	seq      uint64
	id       string
	digest   string
	received int64
	n        int
}

type receiptEntry struct {
	batch    int32 // index into batches
	idx      int32 // position in the batch
	at       int64 // emitted_at, unix nanos
	id       string
	workflow string
	server   string
	tool     string
	digest   string
}

// subjectKey indexes receipts by selected server and tool.
type subjectKey struct{ server, tool string }

type agentState struct {
	head    ledger.Head
	batches map[uint64]int32 // sequence -> index into batches
}

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
	segNewest  map[uint64]int64 // segment -> newest received (unix nanos)
	changed    chan struct{}    // closed and replaced on every append
}

const (
	recBatch      = 'B'
	recCheckpoint = 'C'
)

// Open opens (creating) the store in dir and rebuilds the index.
func Open(dir string, opts Options) (*Store, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	s := &Store{opts: opts, log: opts.Logger.With("component", "receiptstore"), byBatchID: map[string]int32{}, byID: map[string]int32{},
		byWorkflow: map[string][]int32{}, bySubject: map[subjectKey][]int32{}, agents: map[string]*agentState{},
		segNewest: map[uint64]int64{}, changed: make(chan struct{})}
	wal, err := seglog.Open(dir, seglog.Options{Prefix: "receipts", SegmentBytes: opts.SegmentBytes, Checkpoint: s.checkpoint, Logger: s.log},
		func(p seglog.Pos, payload []byte) error { return s.replay(p, payload) })
	if err != nil {
		return nil, fmt.Errorf("receiptstore: %w", err)
	}
	s.wal = wal
	return s, nil
}

func (s *Store) replay(p seglog.Pos, payload []byte) error {
	if len(payload) == 0 {
		return fmt.Errorf("%w: empty record", ErrCorrupt)
	}
	switch payload[0] {
	case recCheckpoint:
		d := recordio.Decoder{B: payload[1:]}
		for n := d.Uvarint(); n > 0 && d.Err == nil; n-- {
			agent, seq, digest := d.String(), d.Uvarint(), d.String()
			if a := s.agent(agent); seq > a.head.Sequence {
				a.head = ledger.Head{Sequence: seq, Digest: digest}
			}
		}
		return d.Err
	case recBatch:
		b, err := decodeBatch(payload)
		if err != nil {
			return err
		}
		rs, ds, err := decode(b, nil, nil)
		if err != nil {
			return err
		}
		s.index(p, b, rs, ds)
		return nil
	}
	return fmt.Errorf("%w: record type %q", ErrCorrupt, payload[0])
}

func (s *Store) agent(id string) *agentState {
	a := s.agents[id]
	if a == nil {
		a = &agentState{batches: map[uint64]int32{}}
		s.agents[id] = a
	}
	return a
}

// checkpoint records every agent's chain head. Called by seglog under mu.
func (s *Store) checkpoint() []byte {
	var e recordio.Encoder
	e.B = append(e.B, recCheckpoint)
	e.Uvarint(uint64(len(s.agents)))
	for id, a := range s.agents {
		e.String(id)
		e.Uvarint(a.head.Sequence)
		e.String(a.head.Digest)
	}
	return e.B
}

// encodeBatch returns b's record, framed (recordio.Frame).
func encodeBatch(b *ledger.Batch) []byte {
	size := 64 + len(b.Bundle)
	for _, r := range b.Receipts {
		size += len(r) + 4
	}
	e := recordio.Encoder{B: make([]byte, recordio.HeaderSize, recordio.HeaderSize+size)}
	e.B = append(e.B, recBatch)
	e.Uvarint(uint64(b.Received.UnixNano()))
	e.String(b.AgentID)
	e.Uvarint(b.Sequence)
	e.String(b.BatchID)
	e.String(b.Digest)
	e.Bytes(b.Bundle)
	e.Uvarint(uint64(len(b.Receipts)))
	for _, r := range b.Receipts {
		e.Bytes(r)
	}
	return recordio.Frame(e.B)
}

func decodeBatch(payload []byte) (*ledger.Batch, error) {
	if len(payload) == 0 || payload[0] != recBatch {
		return nil, fmt.Errorf("%w: not a batch record", ErrCorrupt)
	}
	d := recordio.Decoder{B: payload[1:]}
	b := &ledger.Batch{Received: time.Unix(0, int64(d.Uvarint())), AgentID: d.String(), Sequence: d.Uvarint(), BatchID: d.String(), Digest: d.String(), Bundle: d.Bytes()}
	n := d.Uvarint()
	if n > uint64(len(d.B)) {
		return nil, fmt.Errorf("%w: batch record claims %d receipts", ErrCorrupt, n)
	}
	for ; n > 0 && d.Err == nil; n-- {
		b.Receipts = append(b.Receipts, d.Bytes())
	}
	if d.End() != nil {
		return nil, fmt.Errorf("%w: batch record: %v", ErrCorrupt, d.Err)
	}
	return b, nil
}

// decode returns b's receipt summaries and digests, decoding and hashing
// them unless the caller supplied them (rs, ds).
func decode(b *ledger.Batch, rs []*mcpreadyv1.Receipt, ds []string) ([]*mcpreadyv1.Receipt, []string, error) {
	if len(rs) != len(b.Receipts) {
		rs = make([]*mcpreadyv1.Receipt, len(b.Receipts))
		for i, e := range b.Receipts {
			r, err := ledger.DecodeSummary(e)
			if err != nil {
				return nil, nil, fmt.Errorf("%w: batch %s receipt %d: %v", ErrCorrupt, b.BatchID, i, err)
			}
			rs[i] = r
		}
	}
	if len(ds) != len(b.Receipts) {
		ds = make([]string, len(b.Receipts))
		for i, e := range b.Receipts {
			ds[i] = ledger.Digest(e)
		}
	}
	return rs, ds, nil
}

// index adds b (with its decoded receipts and digests) to the in-memory
// index and returns how many of its receipts were already stored under the
// same id (those are not indexed again). Caller holds mu (or is opening).
func (s *Store) index(p seglog.Pos, b *ledger.Batch, rs []*mcpreadyv1.Receipt, digests []string) int {
	bi := int32(len(s.batches))
	s.batches = append(s.batches, batchEntry{pos: p, agent: b.AgentID, seq: b.Sequence, id: b.BatchID, digest: b.Digest, received: b.Received.UnixNano(), n: len(rs)})
	s.byBatchID[b.BatchID] = bi
	a := s.agent(b.AgentID)
	a.batches[b.Sequence] = bi
	if b.Sequence > a.head.Sequence {
		a.head = ledger.Head{Sequence: b.Sequence, Digest: b.Digest}
	}
	if b.Received.UnixNano() > s.segNewest[p.Segment] {
		s.segNewest[p.Segment] = b.Received.UnixNano()
	}
	dups := 0
	for i, r := range rs {
		if _, ok := s.byID[r.GetReceiptId()]; ok {
			dups++
			continue
		}
		sel := r.GetSelected()
		e := receiptEntry{batch: bi, idx: int32(i), id: r.GetReceiptId(), workflow: r.GetWorkflowId(),
			server: sel.GetServerName(), tool: sel.GetToolName(), digest: digests[i]}
		if t := r.GetEmittedAt(); t != nil {
			e.at = t.AsTime().UnixNano()
		}
		s.addLocked(e)
	}
	return dups
}

// addLocked appends e to the receipt index and its lookup maps.
func (s *Store) addLocked(e receiptEntry) {
	ri := int32(len(s.receipts))
	s.receipts = append(s.receipts, e)
	s.byID[e.id] = ri
	if e.workflow != "" {
		s.byWorkflow[e.workflow] = append(s.byWorkflow[e.workflow], ri)
	}
	if e.server != "" || e.tool != "" {
		k := subjectKey{e.server, e.tool}
		s.bySubject[k] = append(s.bySubject[k], ri)
	}
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
	if bi, ok := s.byBatchID[b.BatchID]; ok {
		prev := s.batches[bi]
		s.mu.Unlock()
		if prev.digest != b.Digest {
			return AppendResult{}, fmt.Errorf("%w: %s", ErrConflict, b.BatchID)
		}
		// Acknowledge a resend only once the original is durable.
		dup, err := s.Stored(b.BatchID, b.Digest)
		return AppendResult{Duplicate: dup}, err
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
	dups := s.index(pos, b, rs, ds)
	s.mu.Unlock()
	if err := s.wal.Sync(pos); err != nil {
		return AppendResult{}, fmt.Errorf("receiptstore: %w", err)
	}
	s.mu.Lock()
	close(s.changed)
	s.changed = make(chan struct{})
	s.mu.Unlock()
	return AppendResult{DuplicateReceipts: dups}, nil
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

// loader reads batches for one query, caching each decoded batch.
type loader struct {
	s     *Store
	cache map[int32]*ledger.Batch
}

func (l *loader) batch(bi int32, e batchEntry) (*ledger.Batch, error) {
	if b, ok := l.cache[bi]; ok {
		return b, nil
	}
	p, err := l.s.wal.ReadAt(e.pos)
	if err != nil {
		return nil, fmt.Errorf("receiptstore: %w", err)
	}
	b, err := decodeBatch(p)
	if err != nil {
		return nil, err
	}
	if l.cache == nil {
		l.cache = map[int32]*ledger.Batch{}
	}
	l.cache[bi] = b
	return b, nil
}

func (l *loader) receipt(e receiptEntry, be batchEntry) (*mcpreadyv1.StoredReceipt, error) {
	b, err := l.batch(e.batch, be)
	if err != nil {
		return nil, err
	}
	if int(e.idx) >= len(b.Receipts) {
		return nil, fmt.Errorf("%w: batch %s has no receipt %d", ErrCorrupt, be.id, e.idx)
	}
	r := &mcpreadyv1.Receipt{}
	if err := proto.Unmarshal(b.Receipts[e.idx], r); err != nil {
		return nil, fmt.Errorf("%w: batch %s receipt %d: %v", ErrCorrupt, be.id, e.idx, err)
	}
	return &mcpreadyv1.StoredReceipt{Receipt: r, BatchId: be.id, AgentId: be.agent, Digest: e.digest}, nil
}

// Get returns one receipt by id.
func (s *Store) Get(id string) (*mcpreadyv1.StoredReceipt, error) {
	s.mu.RLock()
	ri, ok := s.byID[id]
	var e receiptEntry
	var be batchEntry
	if ok {
		e = s.receipts[ri]
		be = s.batches[e.batch]
	}
	s.mu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	return (&loader{s: s}).receipt(e, be)
}

func (q Query) match(e receiptEntry, be batchEntry) bool {
	return (q.ReceiptID == "" || e.id == q.ReceiptID) && (q.WorkflowID == "" || e.workflow == q.WorkflowID) &&
		(q.ServerName == "" || e.server == q.ServerName) && (q.ToolName == "" || e.tool == q.ToolName) &&
		(q.AgentID == "" || be.agent == q.AgentID) &&
		(q.Since.IsZero() || e.at >= q.Since.UnixNano()) && (q.Until.IsZero() || e.at < q.Until.UnixNano())
}

// Query returns matching receipts in store order, at most q.Limit (the
// newest ones when limited).
func (s *Store) Query(q Query) ([]*mcpreadyv1.StoredReceipt, error) {
	type hit struct {
		e  receiptEntry
		be batchEntry
	}
	var hits []hit
	s.mu.RLock()
	var cands []int32
	all := false
	switch {
	case q.ReceiptID != "":
		if ri, ok := s.byID[q.ReceiptID]; ok {
			cands = []int32{ri}
		}
	case q.WorkflowID != "":
		cands = s.byWorkflow[q.WorkflowID]
	case q.ServerName != "" && q.ToolName != "":
		cands = s.bySubject[subjectKey{q.ServerName, q.ToolName}]
	default:
		all = true
	}
	n := len(cands)
	if all {
		n = len(s.receipts)
	}
	for i := n - 1; i >= 0 && (q.Limit <= 0 || len(hits) < q.Limit); i-- {
		ri := int32(i)
		if !all {
			ri = cands[i]
		}
		e := s.receipts[ri]
		be := s.batches[e.batch]
		if q.match(e, be) {
			hits = append(hits, hit{e, be})
		}
	}
	s.mu.RUnlock()
	l := &loader{s: s}
	out := make([]*mcpreadyv1.StoredReceipt, 0, len(hits))
	for i := len(hits) - 1; i >= 0; i-- {
		r, err := l.receipt(hits[i].e, hits[i].be)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// Tail calls fn with the last n receipts and then, with follow, with every
// new receipt as it is stored, until ctx ends or fn fails.
func (s *Store) Tail(ctx context.Context, n int, follow bool, fn func(*mcpreadyv1.StoredReceipt) error) error {
	s.mu.RLock()
	next := max(len(s.receipts)-n, 0)
	s.mu.RUnlock()
	l := &loader{s: s}
	for {
		s.mu.RLock()
		batch := make([]receiptEntry, 0, len(s.receipts)-next)
		bes := make([]batchEntry, 0, cap(batch))
		for ; next < len(s.receipts); next++ {
			batch = append(batch, s.receipts[next])
			bes = append(bes, s.batches[s.receipts[next].batch])
		}
		changed := s.changed
		s.mu.RUnlock()
		for i, e := range batch {
			r, err := l.receipt(e, bes[i])
			if err != nil {
				return err
			}
			if err := fn(r); err != nil {
				return err
			}
		}
		l.cache = nil
		if !follow {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
		}
	}
}

// Export calls fn for each stored batch received at or after since (all
// when zero), optionally of one agent, in store order.
func (s *Store) Export(since time.Time, agentID string, fn func(*ledger.Batch) error) error {
	s.mu.RLock()
	var sel []batchEntry
	var idx []int32
	for i, be := range s.batches {
		if (agentID == "" || be.agent == agentID) && (since.IsZero() || be.received >= since.UnixNano()) {
			sel = append(sel, be)
			idx = append(idx, int32(i))
		}
	}
	s.mu.RUnlock()
	l := &loader{s: s}
	for i, be := range sel {
		b, err := l.batch(idx[i], be)
		if err != nil {
			return err
		}
		delete(l.cache, idx[i])
		if err := fn(b); err != nil {
			return err
		}
	}
	return nil
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

// ApplyRetention deletes whole segments (never the current one) whose
// newest batch was received before now - Options.Retention, and drops
// them from the index. Chain heads are kept. It returns the number of
// segments deleted.
func (s *Store) ApplyRetention() (int, error) {
	if s.opts.Retention <= 0 {
		return 0, nil
	}
	cutoff := s.opts.Now().Add(-s.opts.Retention).UnixNano()
	s.mu.Lock()
	defer s.mu.Unlock()
	segs := s.wal.Segments()
	removed := map[uint64]bool{}
	for _, seg := range segs[:len(segs)-1] {
		if s.segNewest[seg.Num] >= cutoff {
			break
		}
		if err := s.wal.Remove(seg.Num); err != nil {
			return len(removed), fmt.Errorf("receiptstore: %w", err)
		}
		removed[seg.Num] = true
		delete(s.segNewest, seg.Num)
		s.log.Info("retention removed receipt segment", "segment", seg.Num)
	}
	if len(removed) > 0 {
		s.pruneLocked(removed)
	}
	return len(removed), nil
}

// pruneLocked rebuilds the index without the removed segments' batches.
func (s *Store) pruneLocked(removed map[uint64]bool) {
	oldB, oldR := s.batches, s.receipts
	remap := make([]int32, len(oldB))
	s.batches, s.receipts = nil, nil
	s.byBatchID, s.byID = map[string]int32{}, map[string]int32{}
	s.byWorkflow, s.bySubject = map[string][]int32{}, map[subjectKey][]int32{}
	for _, a := range s.agents {
		a.batches = map[uint64]int32{}
	}
	for i, be := range oldB {
		remap[i] = -1
		if removed[be.pos.Segment] {
			continue
		}
		remap[i] = int32(len(s.batches))
		s.batches = append(s.batches, be)
		s.byBatchID[be.id] = remap[i]
		s.agent(be.agent).batches[be.seq] = remap[i]
	}
	for _, e := range oldR {
		if remap[e.batch] < 0 {
			continue
		}
		e.batch = remap[e.batch]
		s.addLocked(e)
	}
}

// Close closes the store.
func (s *Store) Close() error { return s.wal.Close() }

// Stored reports whether batchID is stored with this bundle digest; it
// returns true only once that batch is durable.
func (s *Store) Stored(batchID, digest string) (bool, error) {
	s.mu.RLock()
	bi, ok := s.byBatchID[batchID]
	var be batchEntry
	if ok {
		be = s.batches[bi]
	}
	s.mu.RUnlock()
	if !ok || be.digest != digest {
		return false, nil
	}
	if err := s.wal.Sync(be.pos); err != nil {
		return false, fmt.Errorf("receiptstore: %w", err)
	}
	return true, nil
}
