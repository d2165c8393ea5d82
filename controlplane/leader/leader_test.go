package leader

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpready/mcpready/internal/etcdtest"
)

// TestOneLeaderAtATimeAndTakeover: of three candidates exactly one runs
// the task; when its term ends (its context is cancelled, as when the
// replica stops) another takes over, and never two at once.
func TestOneLeaderAtATimeAndTakeover(t *testing.T) {
	_, m := etcdtest.Etcd(t)
	var running, maxRunning atomic.Int32
	terms := make(chan string, 10)
	var wg sync.WaitGroup
	cancels := map[string]context.CancelFunc{}
	for _, id := range []string{"a", "b", "c"} {
		ctx, cancel := context.WithCancel(context.Background())
		cancels[id] = cancel
		c := etcdtest.Client(t, m.ClientURL)
		wg.Go(func() {
			Run(ctx, c, "/test/elections/x", id, Options{TTL: 2}, func(ctx context.Context) {
				n := running.Add(1)
				if n > maxRunning.Load() {
					maxRunning.Store(n)
				}
				terms <- id
				<-ctx.Done()
				running.Add(-1)
			})
		})
	}
	first := <-terms
	select {
	case id := <-terms:
		t.Fatalf("%s elected while %s leads", id, first)
	case <-time.After(500 * time.Millisecond):
	}
	cancels[first]()
	select {
	case second := <-terms:
		if second == first {
			t.Fatalf("%s re-elected after stopping", first)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no takeover")
	}
	for _, c := range cancels {
		c()
	}
	wg.Wait()
	if maxRunning.Load() != 1 {
		t.Fatalf("%d leaders at once", maxRunning.Load())
	}
}
