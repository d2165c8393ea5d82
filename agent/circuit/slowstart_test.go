package circuit

import (
	"testing"
	"time"
)

// eject opens key with threshold failures at now and returns when its
// ejection ends.
func eject(s *Set, key string, failures int, now time.Time) {
	for range failures {
		s.Report(key, false, now)
	}
}

// After ejection the first healthy canary no longer gives the upstream full
// load at once: over the slow-start window, of 1,000 evenly spread calls
// the share admitted rises quarter by quarter from about the readmit ratio
// to all of them. Before, the first success closed the breaker and every
// later call was admitted.
func TestSlowStartRamp(t *testing.T) {
	const window = 10 * time.Second
	s := NewSet(Config{ConsecutiveFailures: 2, BaseEjection: time.Second, ReadmitRatio: 0.05, SlowStart: window})
	t0 := time.Unix(1_700_000_000, 0)
	eject(s, "k", 2, t0)
	t1 := t0.Add(time.Second) // half-open
	if !s.Allow("k", t1) {
		t.Fatal("canary refused")
	}
	s.Report("k", true, t1)
	if s.State("k", t1) != Closed || !s.Ramping("k", t1) {
		t.Fatalf("after canary: %v ramping %v", s.State("k", t1), s.Ramping("k", t1))
	}
	var quarter [4]int
	const calls = 1000
	for i := range calls {
		now := t1.Add(time.Duration(i) * window / calls)
		if s.Allow("k", now) {
			quarter[i*4/calls]++
			s.Report("k", true, now)
		}
	}
	t.Logf("admitted per quarter of the window (250 calls each): %v", quarter)
	for q := 1; q < 4; q++ {
		if quarter[q] <= quarter[q-1] {
			t.Fatalf("share did not ramp: %v", quarter)
		}
	}
	// Expected shares ~ 0.125, 0.375, 0.625, 0.875 of 250.
	if quarter[0] > 50 || quarter[3] < 200 {
		t.Fatalf("ramp shape %v", quarter)
	}
	end := t1.Add(window)
	if s.Ramping("k", end) || !s.Allow("k", end) {
		t.Fatal("ramp did not end with the window")
	}
}

// A failure during the ramp ejects again at once (one failure, under the
// threshold), for a longer ejection (the second: 2 x base).
func TestSlowStartFailureReejects(t *testing.T) {
	s := NewSet(Config{ConsecutiveFailures: 3, BaseEjection: time.Second, SlowStart: 10 * time.Second})
	t0 := time.Unix(1_700_000_000, 0)
	eject(s, "k", 3, t0)
	t1 := t0.Add(time.Second)
	s.Allow("k", t1)
	s.Report("k", true, t1)
	t2 := t1.Add(2 * time.Second)
	s.Report("k", false, t2)
	if s.State("k", t2) != Open || s.Ejections("k") != 2 {
		t.Fatalf("state %v ejections %d", s.State("k", t2), s.Ejections("k"))
	}
	if s.State("k", t2.Add(1999*time.Millisecond)) != Open || s.State("k", t2.Add(2*time.Second)) != HalfOpen {
		t.Fatal("second ejection is not 2 x base")
	}
	// Without slow start one failure after the close does not eject.
	plain := NewSet(Config{ConsecutiveFailures: 3, BaseEjection: time.Second})
	eject(plain, "k", 3, t0)
	plain.Allow("k", t1)
	plain.Report("k", true, t1)
	plain.Report("k", false, t2)
	if plain.State("k", t2) != Closed || plain.Allow("k", t2) != true {
		t.Fatal("no slow start: one failure ejected or calls were held back")
	}
}
