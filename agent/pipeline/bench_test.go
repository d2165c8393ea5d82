package pipeline

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mcpready/mcpready/agent/spool"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
)

// BenchmarkReceiptBeforeAnswer is the cost of a durable receipt before
// the answer: the same tools/call through the pipeline to a real go-sdk
// upstream on loopback, with a real spool, once as a state-changing call
// (its receipt fsync'd, group-committed with concurrent callers, before
// the answer) and once as a read-only one (its receipt queued for the
// background writer). callers is how many call at once. It reports the
// answer latency's p50 and p99 and calls/s.
func BenchmarkReceiptBeforeAnswer(b *testing.B) {
	for _, mode := range []struct {
		name  string
		class mcpreadyv1.SideEffectClass
	}{
		{"durable", mcpreadyv1.SideEffectClass_SIDE_EFFECT_CLASS_STATE_CHANGING},
		{"async", mcpreadyv1.SideEffectClass_SIDE_EFFECT_CLASS_READ_ONLY},
	} {
		for _, callers := range []int{1, 16} {
			b.Run(fmt.Sprintf("%s/callers=%d", mode.name, callers), func(b *testing.B) {
				benchReceipt(b, mode.class, callers)
			})
		}
	}
}

func benchReceipt(b *testing.B, class mcpreadyv1.SideEffectClass, callers int) {
	sp := openSpool(b, 4<<30, nil)
	w := spool.NewWriter(sp, spool.WriterOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); w.Run(ctx) }()
	go func() { // seal and acknowledge, as the shipper would
		defer wg.Done()
		for {
			select {
			case <-ctx.Done():
				return
			case <-sp.Sealed():
				bts, err := sp.Pending(0, 0)
				if err != nil {
					b.Error(err)
				}
				for _, bt := range bts {
					_ = sp.Ack(bt.Sequence)
				}
			}
		}
	}()
	defer func() { cancel(); wg.Wait() }()
	pl, st, _ := durableSetup(b, sp, class, false)
	pl.opts.Ledger = w
	tr := newFake(b)
	req := request("test/echo")
	if res := pl.Call(context.Background(), st, req, tr); res.Answer == nil || res.Answer.IsError {
		b.Fatalf("warm-up answer %+v", res.Answer)
	}
	var mu sync.Mutex
	lat := make([]time.Duration, 0, b.N)
	b.SetParallelism(callers)
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		var mine []time.Duration
		for pb.Next() {
			t0 := time.Now()
			res := pl.Call(context.Background(), st, req, tr)
			mine = append(mine, time.Since(t0))
			if res.Answer == nil || res.Answer.IsError {
				b.Errorf("answer %+v", res.Answer)
				return
			}
		}
		mu.Lock()
		lat = append(lat, mine...)
		mu.Unlock()
	})
	elapsed := time.Since(start)
	b.StopTimer()
	slices.Sort(lat)
	if len(lat) > 0 {
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "calls/s")
}
