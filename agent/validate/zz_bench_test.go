package validate

import (
	"strings"
	"testing"
)

func BenchmarkScan(b *testing.B) {
	for _, n := range []int{1, 13000} {
		text := strings.Repeat("The user can call this endpoint to send a report. <b>bold</b> include details. ", n)
		b.Run(strings.Repeat("x", len(text)%7), func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				Scan(text)
			}
		})
	}
}
