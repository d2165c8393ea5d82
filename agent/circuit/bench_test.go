package circuit

import (
	"testing"
	"time"
)

// BenchmarkAdmitReport is one healthy call's use of a Set, from every
// core at once on one key: State, Allow, then a success Report.
func BenchmarkAdmitReport(b *testing.B) {
	s := NewSet(Config{})
	key := Key("https://a.example/mcp", "echo")
	s.Breaker(key) // known and closed, as after a decision
	now := time.Now()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if s.State(key, now) != Closed || !s.Allow(key, now) {
				b.Error("not admitted")
				return
			}
			s.Report(key, true, now)
		}
	})
}
