package quota

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

// Units count per key within a window and start again in the next one.
func TestWindows(t *testing.T) {
	l := New()
	t0 := time.Unix(1_700_000_000, 0)
	a, b := Key{Principal: "dev", Server: "s", Tool: "t"}, Key{Principal: "dev", Server: "s", Tool: "t", Tenant: "t2"}
	for i := 1; i <= 3; i++ {
		if got := l.Add(a, 1, time.Minute, t0.Add(time.Duration(i)*time.Second)); got != int64(i) {
			t.Fatalf("add %d: used %d", i, got)
		}
	}
	if l.Used(b, time.Minute, t0) != 0 || l.Used(a, time.Minute, t0.Add(59*time.Second)) != 3 {
		t.Fatal("keys are not separate")
	}
	if l.Used(a, time.Minute, t0.Add(61*time.Second+time.Second)) != 0 {
		t.Fatal("the window did not end")
	}
}

func TestConcurrentAdd(t *testing.T) {
	l := New()
	now := time.Unix(1_700_000_000, 0)
	var wg sync.WaitGroup
	for range 50 {
		wg.Add(1)
		go func() { defer wg.Done(); l.Add(Key{Workflow: "wf"}, 1, time.Minute, now) }()
	}
	wg.Wait()
	if got := l.Used(Key{Workflow: "wf"}, time.Minute, now); got != 50 {
		t.Fatalf("used %d, want 50", got)
	}
}

// Used records nothing: reading keys never charged leaves the ledger empty.
func TestUsedRecordsNothing(t *testing.T) {
	l := New()
	now := time.Unix(1_700_000_000, 0)
	for i := range 100 {
		if l.Used(Key{Principal: string(rune('a' + i))}, time.Minute, now) != 0 {
			t.Fatal("a fresh key has units")
		}
	}
	if n := len(l.m); n != 0 {
		t.Fatalf("%d windows after reads only", n)
	}
}

// TestEndedWindowsDropped: keys whose window ended are dropped once the
// ledger reaches its sweep size, live ones are kept with their counts, and
// with more live keys than that the next sweep waits until the ledger has
// doubled (before, every new key past 4,096 live ones scanned them all).
func TestEndedWindowsDropped(t *testing.T) {
	l := New()
	t0 := time.Unix(1_000_000, 0)
	for i := range minSweep {
		l.Add(Key{Principal: fmt.Sprint("old-", i)}, 1, time.Minute, t0)
	}
	t1 := t0.Add(2 * time.Minute) // every window above has ended
	live := Key{Principal: "live"}
	l.Add(live, 3, time.Minute, t1)
	if n := len(l.m); n != 1 {
		t.Fatalf("%d keys after the sweep, want the live one", n)
	}
	if u := l.Used(live, time.Minute, t1); u != 3 {
		t.Fatalf("live key used %d, want 3", u)
	}
	// Live keys up to the sweep size: that sweep drops nothing, and the
	// next waits until the ledger has doubled.
	for i := range minSweep {
		l.Add(Key{Principal: fmt.Sprint("new-", i)}, 1, time.Minute, t1)
	}
	if l.sweepAt != 2*minSweep || len(l.m) != minSweep+1 {
		t.Fatalf("sweepAt %d with %d live keys, want %d", l.sweepAt, len(l.m), 2*minSweep)
	}
	l.Add(Key{Principal: "one-more"}, 1, time.Minute, t1)
	if l.sweepAt != 2*minSweep || len(l.m) != minSweep+2 {
		t.Fatalf("sweepAt %d with %d keys", l.sweepAt, len(l.m))
	}
}
