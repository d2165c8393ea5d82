package ledger

import (
	"sort"
	"sync"
	"testing"
)

// BenchmarkNewID is one receipt id, as every tool call takes (twice: the
// receipt's and, without a client request id, the request's).
func BenchmarkNewID(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		_ = NewID()
	}
}

// TestNewIDConcurrentUnique: ids taken from several goroutines at once
// (the random bits come from one generator behind the id lock) are all
// distinct, and each goroutine's own ids are in order.
func TestNewIDConcurrentUnique(t *testing.T) {
	const workers, each = 4, 5000
	out := make([][]string, workers)
	var wg sync.WaitGroup
	for w := range out {
		wg.Go(func() {
			for range each {
				out[w] = append(out[w], NewID())
			}
		})
	}
	wg.Wait()
	seen := map[string]bool{}
	for _, ids := range out {
		if !sort.StringsAreSorted(ids) {
			t.Fatal("one goroutine's ids out of order")
		}
		for _, id := range ids {
			if seen[id] {
				t.Fatalf("duplicate id %s", id)
			}
			seen[id] = true
		}
	}
}
