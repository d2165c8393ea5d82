package receiptstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/internal/seglog"
	"github.com/mcpready/mcpready/ledger"
)

// Query selects receipts; empty fields do not filter. Limit 0 means all.
type Query struct {
	ReceiptID, WorkflowID, ServerName, ToolName, AgentID string
	// Since and Until bound the receipt's emitted_at (inclusive, exclusive).
	Since, Until time.Time
	Limit        int
	// Before, if set, is the next-page cursor of an earlier Query: only
	// receipts stored before that position match.
	Before string
}

// ErrBadCursor: a page cursor that does not parse.
var ErrBadCursor = errors.New("invalid page cursor")

// Cursor is a position in store order: three numbers whose meaning is the
// store's (here segment, offset and receipt index; package receiptdb uses
// transaction id and receipt index). Its text form is "A.B.C".
type Cursor struct {
	A   uint64
	B   int64
	Idx int32
}

// String is the cursor's text form.
func (c Cursor) String() string { return fmt.Sprintf("%d.%d.%d", c.A, c.B, c.Idx) }

// ParseCursor parses a cursor's text form.
func ParseCursor(s string) (Cursor, error) {
	parts := strings.Split(s, ".")
	if len(parts) != 3 {
		return Cursor{}, fmt.Errorf("%w: %q", ErrBadCursor, s)
	}
	a, err1 := strconv.ParseUint(parts[0], 10, 64)
	b, err2 := strconv.ParseInt(parts[1], 10, 64)
	i, err3 := strconv.ParseInt(parts[2], 10, 32)
	if err1 != nil || err2 != nil || err3 != nil || b < 0 || i < 0 {
		return Cursor{}, fmt.Errorf("%w: %q", ErrBadCursor, s)
	}
	return Cursor{A: a, B: b, Idx: int32(i)}, nil
}

// less orders cursors.
func (c Cursor) less(d Cursor) bool {
	if c.A != d.A {
		return c.A < d.A
	}
	if c.B != d.B {
		return c.B < d.B
	}
	return c.Idx < d.Idx
}

func cursorOf(e receiptEntry, be batchEntry) Cursor {
	return Cursor{A: be.pos.Segment, B: be.pos.Offset, Idx: e.idx}
}

// loader reads batches for one query, caching each decoded batch.
type loader struct {
	s     *Store
	cache map[posKey]*ledger.Batch
}

// posKey identifies a record.
type posKey struct {
	seg uint64
	off int64
}

func keyOf(p seglog.Pos) posKey { return posKey{p.Segment, p.Offset} }

func (l *loader) batch(e batchEntry) (*ledger.Batch, error) {
	if b, ok := l.cache[keyOf(e.pos)]; ok {
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
		l.cache = map[posKey]*ledger.Batch{}
	}
	l.cache[keyOf(e.pos)] = b
	return b, nil
}

// scanUnindexed calls fn for each batch of the segments left out of the
// index (MaxIndexed), oldest segment first or, with newestFirst, newest
// first (in log order within a segment), a segment at a time.
func (s *Store) scanUnindexed(newestFirst bool, fn func(be batchEntry, b *ledger.Batch) error) error {
	s.mu.RLock()
	segs := slices.Clone(s.unindexed)
	s.mu.RUnlock()
	if newestFirst {
		slices.Reverse(segs)
	}
	for _, num := range segs {
		err := s.wal.Scan(num, func(p seglog.Pos, payload []byte) error {
			if len(payload) == 0 || payload[0] != recBatch {
				return nil // a checkpoint
			}
			b, err := decodeBatch(payload)
			if err != nil {
				return err
			}
			return fn(batchEntry{pos: p, agent: b.AgentID, seq: b.Sequence, id: b.BatchID, digest: b.Digest, received: b.Received.UnixNano(), n: len(b.Receipts)}, b)
		})
		if errors.Is(err, os.ErrNotExist) {
			continue // removed by retention meanwhile
		}
		if err != nil {
			return fmt.Errorf("receiptstore: %w", err)
		}
	}
	return nil
}

func (l *loader) receipt(e receiptEntry, be batchEntry) (*mcpreadyv1.StoredReceipt, error) {
	b, err := l.batch(be)
	if err != nil {
		return nil, err
	}
	if int(e.idx) >= len(b.Receipts) {
		return nil, fmt.Errorf("%w: batch %s has no receipt %d", ErrCorrupt, be.id, e.idx)
	}
	r := &mcpreadyv1.Receipt{}
	if err := proto.Unmarshal(b.Receipts[e.idx], r); err != nil {
		return nil, fmt.Errorf("%w: batch %s receipt %d: %w", ErrCorrupt, be.id, e.idx, err)
	}
	return &mcpreadyv1.StoredReceipt{Receipt: r, BatchId: be.id, AgentId: be.agent, Digest: e.digest}, nil
}

// Get returns one receipt by id (from disk when its segment is no longer
// indexed).
func (s *Store) Get(id string) (*mcpreadyv1.StoredReceipt, error) {
	rs, _, err := s.Query(context.Background(), Query{ReceiptID: id, Limit: 1})
	if err != nil {
		return nil, err
	}
	if len(rs) == 0 {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	return rs[0], nil
}

// hit is one matching receipt.
type hit struct {
	e  receiptEntry
	be batchEntry
}

// appendNewest appends seg's hits (in log order) to hits (newest first),
// newest first, until limit (0: all).
func appendNewest(hits, seg []hit, limit int) []hit {
	for i := len(seg) - 1; i >= 0 && (limit <= 0 || len(hits) < limit); i-- {
		hits = append(hits, seg[i])
	}
	return hits
}

func (q Query) match(e receiptEntry, be batchEntry) bool {
	return (q.ReceiptID == "" || e.id == q.ReceiptID) && (q.WorkflowID == "" || e.workflow == q.WorkflowID) &&
		(q.ServerName == "" || e.server == q.ServerName) && (q.ToolName == "" || e.tool == q.ToolName) &&
		(q.AgentID == "" || be.agent == q.AgentID) &&
		(q.Since.IsZero() || e.at >= q.Since.UnixNano()) && (q.Until.IsZero() || e.at < q.Until.UnixNano())
}

// Query returns matching receipts in store order, at most q.Limit (the
// newest ones when limited), and, when older ones match too, the cursor
// for the page before them (never one to an empty page). ctx is not consulted: the store is local.
func (s *Store) Query(_ context.Context, q Query) ([]*mcpreadyv1.StoredReceipt, string, error) {
	var before *Cursor
	if q.Before != "" {
		c, err := ParseCursor(q.Before)
		if err != nil {
			return nil, "", err
		}
		before = &c
	}
	// One hit more than a page is looked for: whether there is an older
	// page to point a cursor to.
	limit := q.Limit
	if limit > 0 {
		limit++
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
	for i := n - 1; i >= 0 && (limit <= 0 || len(hits) < limit); i-- {
		ri := int32(i)
		if !all {
			ri = cands[i]
		}
		e := s.receipts[ri]
		be := s.batches[e.batch]
		if before != nil && !cursorOf(e, be).less(*before) {
			continue
		}
		if q.match(e, be) {
			hits = append(hits, hit{e, be})
		}
	}
	s.mu.RUnlock()
	if limit <= 0 || len(hits) < limit {
		// Older receipts on disk, a segment at a time, newest first.
		var seg []hit
		full := errors.New("page full")
		err := s.scanUnindexed(true, func(be batchEntry, b *ledger.Batch) error {
			if len(seg) > 0 && be.pos.Segment != seg[0].be.pos.Segment {
				hits, seg = appendNewest(hits, seg, limit), seg[:0]
				if limit > 0 && len(hits) >= limit {
					return full
				}
			}
			rs, ds, err := decode(b, nil, nil)
			if err != nil {
				return err
			}
			for i, r := range rs {
				e := entryOf(-1, i, r, ds[i])
				if (before == nil || cursorOf(e, be).less(*before)) && q.match(e, be) {
					seg = append(seg, hit{e, be})
				}
			}
			return nil
		})
		if err != nil && !errors.Is(err, full) {
			return nil, "", err
		}
		hits = appendNewest(hits, seg, limit)
	}
	next := ""
	if q.Limit > 0 && len(hits) > q.Limit {
		hits = hits[:q.Limit]
		oldest := hits[len(hits)-1]
		next = cursorOf(oldest.e, oldest.be).String()
	}
	l := &loader{s: s}
	out := make([]*mcpreadyv1.StoredReceipt, 0, len(hits))
	for i := len(hits) - 1; i >= 0; i-- {
		r, err := l.receipt(hits[i].e, hits[i].be)
		if err != nil {
			return nil, "", err
		}
		out = append(out, r)
	}
	return out, next, nil
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
// when zero), optionally of one agent, in store order, until ctx ends.
func (s *Store) Export(ctx context.Context, since time.Time, agentID string, fn func(*ledger.Batch) error) error {
	want := func(be batchEntry) bool {
		return (agentID == "" || be.agent == agentID) && (since.IsZero() || be.received >= since.UnixNano())
	}
	err := s.scanUnindexed(false, func(be batchEntry, b *ledger.Batch) error {
		if err := ctx.Err(); err != nil || !want(be) {
			return err
		}
		return fn(b)
	})
	if err != nil {
		return err
	}
	s.mu.RLock()
	var sel []batchEntry
	for _, be := range s.batches {
		if want(be) {
			sel = append(sel, be)
		}
	}
	s.mu.RUnlock()
	l := &loader{s: s}
	for _, be := range sel {
		b, err := l.batch(be)
		if err != nil {
			return err
		}
		delete(l.cache, keyOf(be.pos))
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := fn(b); err != nil {
			return err
		}
	}
	return nil
}
