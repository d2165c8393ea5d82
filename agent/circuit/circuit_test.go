package circuit

import (
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
)

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func TestOpenHalfOpenClose(t *testing.T) {
	s := NewSet(Config{ConsecutiveFailures: 3, BaseEjection: 10 * time.Second, MaxEjection: 25 * time.Second, ReadmitRatio: 0.5})
	k := Key("https://a/mcp", "lookup")
	if s.State(k, t0) != Closed || !s.Allow(k, t0) {
		t.Fatal("unknown key must be closed")
	}
	// Two failures, a success, two failures: still closed (consecutive).
	for _, ok := range []bool{false, false, true, false, false} {
		s.Report(k, ok, t0)
	}
	if s.State(k, t0) != Closed {
		t.Fatal("opened without 3 consecutive failures")
	}
	s.Report(k, false, t0)
	if s.State(k, t0) != Open || s.Allow(k, t0) {
		t.Fatal("3 consecutive failures must open")
	}
	// Late failures while open do not extend the ejection.
	s.Report(k, false, t0.Add(5*time.Second))
	if s.State(k, t0.Add(9*time.Second)) != Open || s.State(k, t0.Add(10*time.Second)) != HalfOpen {
		t.Fatal("first ejection must last base (10s)")
	}
	// Half-open: the first call is admitted, then a ratio of calls.
	t1 := t0.Add(10 * time.Second)
	admitted := 0
	for i := 0; i < 10; i++ {
		if s.Allow(k, t1) {
			admitted++
		}
	}
	if admitted != 5 {
		t.Fatalf("half-open admitted %d of 10 at ratio 0.5", admitted)
	}
	// A failure while half-open re-ejects for 2 × base.
	s.Report(k, false, t1)
	if s.State(k, t1.Add(19*time.Second)) != Open || s.State(k, t1.Add(20*time.Second)) != HalfOpen || s.Ejections(k) != 2 {
		t.Fatalf("second ejection must last 20s, ejections %d", s.Ejections(k))
	}
	// Third ejection is capped at max (25s, not 30s).
	t2 := t1.Add(20 * time.Second)
	s.Report(k, false, t2)
	if s.State(k, t2.Add(24*time.Second)) != Open || s.State(k, t2.Add(25*time.Second)) != HalfOpen {
		t.Fatal("ejection must be capped at max")
	}
	// A success while half-open closes.
	t3 := t2.Add(25 * time.Second)
	s.Report(k, true, t3)
	if s.State(k, t3) != Closed || !s.Allow(k, t3) {
		t.Fatal("success in half-open must close")
	}
	// Healthy time forgives past ejections one base period at a time.
	s.Report(k, true, t3.Add(10*time.Second))
	if s.Ejections(k) != 2 {
		t.Fatalf("ejections %d after one healthy period", s.Ejections(k))
	}
}

func TestKeysIndependent(t *testing.T) {
	s := NewSet(Config{ConsecutiveFailures: 1})
	a, b := Key("https://a/mcp", "x"), Key("https://a/mcp", "y")
	s.Report(a, false, t0)
	if s.State(a, t0) != Open || s.State(b, t0) != Closed {
		t.Fatal("breakers are per (endpoint, tool)")
	}
}

func TestConfigFromPolicy(t *testing.T) {
	c := ConfigFromPolicy(&mcpreadyv1.CircuitRules{ConsecutiveFailures: 2, BaseEjection: durationpb.New(time.Second),
		MaxEjection: durationpb.New(3 * time.Second), ReadmitRatio: 0.25, SlowStartWindow: durationpb.New(20 * time.Second)}).withDefaults()
	if c.ConsecutiveFailures != 2 || c.BaseEjection != time.Second || c.MaxEjection != 3*time.Second || c.ReadmitRatio != 0.25 || c.SlowStart != 20*time.Second {
		t.Fatalf("%+v", c)
	}
	d := ConfigFromPolicy(nil).withDefaults()
	if d.ConsecutiveFailures != 5 || d.BaseEjection != 30*time.Second || d.MaxEjection != 300*time.Second || d.ReadmitRatio != 0.1 || d.SlowStart != 0 {
		t.Fatalf("defaults %+v", d)
	}
	// Policy updates keep breaker state.
	s := NewSet(Config{ConsecutiveFailures: 1})
	s.Report("k", false, t0)
	s.SetConfig(Config{ConsecutiveFailures: 10})
	if s.State("k", t0) != Open {
		t.Fatal("state lost on config change")
	}
}

// Concurrent reports while half-open must eject exactly once; run with -race.
func TestConcurrent(t *testing.T) {
	s := NewSet(Config{ConsecutiveFailures: 1, BaseEjection: time.Second, MaxEjection: time.Hour})
	k := "k"
	s.Report(k, false, t0)
	t1 := t0.Add(time.Second) // half-open
	var wg sync.WaitGroup
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			for j := 0; j < 200; j++ {
				s.Allow(k, t1)
				s.State(k, t1)
				s.Report(k, false, t1)
				s.Report(Key("e", string(rune('a'+i))), j%2 == 0, t1)
			}
		}(i)
	}
	wg.Wait()
	if n := s.Ejections(k); n != 2 {
		t.Fatalf("ejections %d, want 2 (one half-open failure wins)", n)
	}
}

func TestStateString(t *testing.T) {
	for s, want := range map[State]string{Closed: "closed", Open: "open", HalfOpen: "half-open", State(9): "state(9)"} {
		if s.String() != want {
			t.Errorf("%d: %s", s, s.String())
		}
	}
}
