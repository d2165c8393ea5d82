package quota

import (
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
