package receiptstore

import (
	"fmt"
	"slices"

	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/internal/seglog"
	"github.com/mcpready/mcpready/ledger"
)

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

func (s *Store) agent(id string) *agentState {
	a := s.agents[id]
	if a == nil {
		a = &agentState{batches: map[uint64]int32{}}
		s.agents[id] = a
	}
	return a
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
	defer s.evictLocked(p.Segment)
	for i, r := range rs {
		if _, ok := s.byID[r.GetReceiptId()]; ok {
			dups++
			continue
		}
		s.addLocked(entryOf(bi, i, r, digests[i]))
	}
	return dups
}

// entryOf is the index entry of receipt i (summary r) of batch bi.
func entryOf(bi int32, i int, r *mcpreadyv1.Receipt, digest string) receiptEntry {
	sel := r.GetSelected()
	e := receiptEntry{batch: bi, idx: int32(i), id: r.GetReceiptId(), workflow: r.GetWorkflowId(),
		server: sel.GetServerName(), tool: sel.GetToolName(), digest: digest}
	if t := r.GetEmittedAt(); t != nil {
		e.at = t.AsTime().UnixNano()
	}
	return e
}

// evictLocked drops the oldest indexed segments from the index while it
// holds more than MaxIndexed receipts, never segment cur (the newest one
// indexed). Their batches stay on disk (see unindexed).
func (s *Store) evictLocked(cur uint64) {
	removed := map[uint64]bool{}
	n := len(s.receipts)
	for _, be := range s.batches {
		if n <= s.opts.MaxIndexed || be.pos.Segment >= cur {
			break
		}
		if !removed[be.pos.Segment] {
			removed[be.pos.Segment] = true
			s.unindexed = append(s.unindexed, be.pos.Segment)
		}
		n -= be.n
	}
	if len(removed) == 0 {
		return
	}
	// The rest of the last segment chosen goes too: whole segments only.
	s.pruneLocked(removed)
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
		s.unindexed = slices.DeleteFunc(s.unindexed, func(n uint64) bool { return n == seg.Num })
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
