package receiptstore

import (
	"fmt"
	"time"

	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/internal/recordio"
	"github.com/mcpready/mcpready/internal/seglog"
	"github.com/mcpready/mcpready/ledger"
)

// Record types: the first byte of every record.
const (
	recBatch      = 'B'
	recCheckpoint = 'C'
)

// replay applies one record while the store opens.
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

// checkpoint records every agent's chain head. Called by seglog under mu.
func (s *Store) checkpoint() []byte {
	var e recordio.Encoder
	e.B = append(e.B, recCheckpoint)
	heads := make(map[string]ledger.Head, len(s.agents))
	for id, a := range s.agents {
		heads[id] = a.head
	}
	// A batch still waiting for its fsync may sit in the segment being
	// closed: its head must survive that segment's retention too.
	for _, p := range s.pending {
		if e := p.entry; e.seq > heads[e.agent].Sequence {
			heads[e.agent] = ledger.Head{Sequence: e.seq, Digest: e.digest}
		}
	}
	e.Uvarint(uint64(len(heads)))
	for id, h := range heads {
		e.String(id)
		e.Uvarint(h.Sequence)
		e.String(h.Digest)
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
		return nil, fmt.Errorf("%w: batch record: %w", ErrCorrupt, d.Err)
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
				return nil, nil, fmt.Errorf("%w: batch %s receipt %d: %w", ErrCorrupt, b.BatchID, i, err)
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
