package receiptstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
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
		return nil, fmt.Errorf("%w: batch %s receipt %d: %w", ErrCorrupt, be.id, e.idx, err)
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
// newest ones when limited), and, when the limit was reached, the cursor
// for the page before them. ctx is not consulted: the store is local.
func (s *Store) Query(_ context.Context, q Query) ([]*mcpreadyv1.StoredReceipt, string, error) {
	var before *Cursor
	if q.Before != "" {
		c, err := ParseCursor(q.Before)
		if err != nil {
			return nil, "", err
		}
		before = &c
	}
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
		if before != nil && !cursorOf(e, be).less(*before) {
			continue
		}
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
			return nil, "", err
		}
		out = append(out, r)
	}
	next := ""
	if q.Limit > 0 && len(hits) == q.Limit {
		oldest := hits[len(hits)-1]
		next = cursorOf(oldest.e, oldest.be).String()
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
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := fn(b); err != nil {
			return err
		}
	}
	return nil
}
