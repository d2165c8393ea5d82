package spool

import (
	"testing"

	"github.com/mcpready/mcpready/ledger"
)

// A segment is deleted once its receipts are sealed, even though the
// checkpoint at the start of the next segment still counts some of them
// as unsealed. Recovery must then drop from the unsealed receipts only
// those a batch record covers, not the receipts appended after the
// checkpoint that the batch did not seal (they were lost on reopen).
func TestReopenAfterSealedSegmentDeletedKeepsUnsealed(t *testing.T) {
	dir, key := t.TempDir(), testKey(t)
	// No size-triggered sealing: only the explicit sealOnce below seals.
	mod := func(o *Options) { o.SegmentBytes = 2048; o.BatchSize = 1000 }
	s := open(t, dir, key, mod)
	n := 0
	for ; len(s.wal.Segments()) < 2; n++ {
		if err := s.Append(mk(n)); err != nil {
			t.Fatal(err)
		}
	}
	first := n - 1 // the first receipt of segment 1; its checkpoint says 0 are sealed
	for ; n < first+6; n++ {
		if err := s.Append(mk(n)); err != nil {
			t.Fatal(err)
		}
	}
	// Seal every receipt of segment 0 and two of segment 1, in one batch.
	data, err := ledger.Encode(mk(first))
	if err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	s.opts.BatchBytes = (first + 2) * len(data)
	s.mu.Unlock()
	if k, err := s.sealOnce(); err != nil || k != first+2 {
		t.Fatalf("sealed %d (%v), want %d", k, err, first+2)
	}
	if segs := s.wal.Segments(); len(segs) != 1 || segs[0].Num != 1 {
		t.Fatalf("segments after sealing %+v, want only segment 1", segs)
	}
	s.Close()

	s = open(t, dir, key, mod)
	defer s.Close()
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	got, _ := drain(t, s, key, ledger.Head{}, true)
	eq(t, got, want(0, n))
}
