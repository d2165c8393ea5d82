package ledger

import "testing"

// BenchmarkNewID is one receipt id, as every tool call takes (twice: the
// receipt's and, without a client request id, the request's).
func BenchmarkNewID(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		_ = NewID()
	}
}
