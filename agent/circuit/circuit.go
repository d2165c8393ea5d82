// Package circuit keeps one circuit breaker per (endpoint, tool) key, in the
// style of Envoy's outlier detection: a key is ejected (Open) after a run of
// consecutive failures, for an ejection time that grows with each ejection
// (base × count, capped at max); when the ejection ends it is HalfOpen and
// re-admits only a fraction of calls until one succeeds, which closes it.
// With slow start (Config.SlowStart, Envoy's slow start mode) the closed
// breaker then re-admits a share of calls that ramps linearly from
// ReadmitRatio to all of them over the window, and a counted failure during
// the ramp ejects it again at once, for longer.
//
// A Set is safe for concurrent use and lock-free on the read path: State and
// Allow only load atomics. It does not decide routes or run calls; it only
// remembers outcomes reported to it. Time is always passed in by the caller.
package circuit

import (
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
)

// State is the state of one breaker.
type State int32

const (
	// Closed admits every call. The zero value: an unknown key is Closed.
	Closed State = iota
	// Open rejects every call until the ejection time ends.
	Open
	// HalfOpen re-admits a fraction of calls; one success closes the breaker,
	// one counted failure opens it again with a longer ejection.
	HalfOpen
)

func (s State) String() string {
	switch s {
	case Closed:
		return "closed"
	case Open:
		return "open"
	case HalfOpen:
		return "half-open"
	}
	return fmt.Sprintf("state(%d)", int32(s))
}

// Config tunes a Set. Zero values take the documented defaults.
type Config struct {
	// ConsecutiveFailures that open the breaker. Zero means 5.
	ConsecutiveFailures int
	// BaseEjection is the first ejection time; the n-th consecutive ejection
	// lasts n × BaseEjection. Zero means 30s.
	BaseEjection time.Duration
	// MaxEjection caps the ejection time. Zero means 300s (or BaseEjection if
	// that is larger).
	MaxEjection time.Duration
	// ReadmitRatio is the fraction (0..1] of calls admitted while half-open.
	// Zero means 0.1. The first call after the ejection is always admitted.
	ReadmitRatio float64
	// SlowStart is the ramp window after a half-open success (see the
	// package doc). Zero means none: the success closes the breaker fully.
	SlowStart time.Duration
}

// ConfigFromPolicy converts the Policy's circuit rules (nil allowed).
func ConfigFromPolicy(r *mcpreadyv1.CircuitRules) Config {
	return Config{
		ConsecutiveFailures: int(r.GetConsecutiveFailures()),
		BaseEjection:        r.GetBaseEjection().AsDuration(),
		MaxEjection:         r.GetMaxEjection().AsDuration(),
		ReadmitRatio:        r.GetReadmitRatio(),
		SlowStart:           r.GetSlowStartWindow().AsDuration(),
	}
}

func (c Config) withDefaults() Config {
	if c.ConsecutiveFailures <= 0 {
		c.ConsecutiveFailures = 5
	}
	if c.BaseEjection <= 0 {
		c.BaseEjection = 30 * time.Second
	}
	if c.MaxEjection <= 0 {
		c.MaxEjection = 300 * time.Second
	}
	if c.MaxEjection < c.BaseEjection {
		c.MaxEjection = c.BaseEjection
	}
	if c.ReadmitRatio <= 0 || c.ReadmitRatio > 1 {
		c.ReadmitRatio = 0.1
	}
	return c
}

// Set holds the breakers of one agent, keyed by Key(endpoint, tool).
// Breakers live in a copy-on-write map: reads are one atomic load and a
// plain map lookup; a key is added (under mu) only on its first failure.
type Set struct {
	cfg      atomic.Pointer[Config]
	breakers atomic.Pointer[map[string]*Breaker]
	mu       sync.Mutex // serialises copy-on-write inserts
	doms     domains    // failure-domain suspicion (domains.go)
}

// NewSet returns an empty Set (every key Closed).
func NewSet(cfg Config) *Set {
	s := &Set{}
	s.SetConfig(cfg)
	return s
}

// SetConfig replaces the configuration (e.g. after a policy update). Breakers
// keep their state; new thresholds apply from the next report.
func (s *Set) SetConfig(cfg Config) {
	c := cfg.withDefaults()
	s.cfg.Store(&c)
}

// Key is the breaker key of one tool on one endpoint.
func Key(endpoint, tool string) string { return endpoint + " " + tool }

// Breaker is the breaker of one key. Its pointer is stable for the life of
// the Set, so hot paths may cache it (see Set.Breaker).
//
// It packs its whole state in atomics. openUntil is the state: 0 is
// Closed, a time in the future is Open, a time in the past is HalfOpen.
// Transitions CAS openUntil through ejecting (a far-future sentinel that reads
// as Open) so concurrent reports cannot eject twice.
type Breaker struct {
	failures  atomic.Int32  // consecutive counted failures while closed
	ejections atomic.Int32  // consecutive ejections (drives the ejection time)
	openUntil atomic.Int64  // unix nanos; 0 when closed
	admitted  atomic.Uint64 // calls seen while half-open
	closedAt  atomic.Int64  // unix nanos of the last close, for decay
	rampFrom  atomic.Int64  // unix nanos the slow-start ramp began; 0 when none
	credit    atomic.Int64  // milli-calls of share accrued during the ramp
}

const ejecting = math.MaxInt64

func (s *Set) get(key string) *Breaker {
	m := s.breakers.Load()
	if m == nil {
		return nil
	}
	return (*m)[key]
}

// Breaker returns the breaker of key, creating it (Closed) if needed. The
// pointer stays valid and current for the life of the Set.
func (s *Set) Breaker(key string) *Breaker { return s.getOrCreate(key) }

func (s *Set) getOrCreate(key string) *Breaker {
	if b := s.get(key); b != nil {
		return b
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.breakers.Load()
	if old != nil {
		if b := (*old)[key]; b != nil {
			return b
		}
	}
	next := make(map[string]*Breaker, 1+lenOf(old))
	if old != nil {
		for k, v := range *old {
			next[k] = v
		}
	}
	b := &Breaker{}
	next[key] = b
	s.breakers.Store(&next)
	return b
}

func lenOf(m *map[string]*Breaker) int {
	if m == nil {
		return 0
	}
	return len(*m)
}

// State reports the breaker's state at now.
func (b *Breaker) State(now time.Time) State {
	until := b.openUntil.Load()
	switch {
	case until == 0:
		return Closed
	case now.UnixNano() < until:
		return Open
	}
	return HalfOpen
}

// State reports the state of key at now. Unknown keys are Closed.
func (s *Set) State(key string, now time.Time) State {
	b := s.get(key)
	if b == nil {
		return Closed
	}
	return b.State(now)
}

// Allow says whether a call to key may be attempted at now. Closed: always,
// except during a slow-start ramp (then the ramp's share of calls). Open:
// never. HalfOpen: the first call after the ejection and then a
// ReadmitRatio fraction of calls.
func (s *Set) Allow(key string, now time.Time) bool {
	b := s.get(key)
	if b == nil {
		return true
	}
	switch b.State(now) {
	case Closed:
		return s.rampAllow(b, now)
	case Open:
		return false
	}
	ratio := s.cfg.Load().ReadmitRatio
	n := b.admitted.Add(1) - 1
	// Admit call n when the running quota floor(n*ratio) steps up; n == 0 is
	// always admitted.
	return n == 0 || uint64(float64(n)*ratio) != uint64(float64(n-1)*ratio)
}

// Ramping reports whether key is closed and in its slow-start ramp at now.
func (s *Set) Ramping(key string, now time.Time) bool {
	b := s.get(key)
	return b != nil && b.State(now) == Closed && s.ramp(b, now) < 1
}

// ramp is the share of calls admitted at now: 1 outside a ramp, else from
// ReadmitRatio rising linearly to 1 over the window.
func (s *Set) ramp(b *Breaker, now time.Time) float64 {
	from := b.rampFrom.Load()
	if from == 0 {
		return 1
	}
	cfg := s.cfg.Load()
	elapsed := now.UnixNano() - from
	if cfg.SlowStart <= 0 || elapsed >= int64(cfg.SlowStart) {
		b.rampFrom.CompareAndSwap(from, 0)
		return 1
	}
	return max(cfg.ReadmitRatio, float64(max(elapsed, 0))/float64(cfg.SlowStart))
}

// rampAllow admits a closed breaker's call: always outside a ramp, else
// when the accrued share reaches one call (a deterministic spread, no
// randomness).
func (s *Set) rampAllow(b *Breaker, now time.Time) bool {
	share := s.ramp(b, now)
	if share >= 1 {
		return true
	}
	add := int64(share * 1000)
	for {
		c := b.credit.Load()
		n := c + add
		admit := n >= 1000
		if admit {
			n -= 1000
		}
		if b.credit.CompareAndSwap(c, n) {
			return admit
		}
	}
}

// Report records the outcome of one call to key at now. success=false counts
// toward ejection; callers report only failures that say something about the
// endpoint's health (transport, timeout, 5xx), not tool or access errors.
func (s *Set) Report(key string, success bool, now time.Time) {
	cfg := s.cfg.Load()
	if success {
		b := s.get(key)
		if b == nil {
			return
		}
		if b.failures.Load() != 0 { // a healthy key's success writes nothing shared
			b.failures.Store(0)
		}
		if until := b.openUntil.Load(); until != 0 {
			if now.UnixNano() >= until {
				if cfg.SlowStart > 0 {
					b.credit.Store(0)
					b.rampFrom.Store(now.UnixNano())
				}
				if b.openUntil.CompareAndSwap(until, 0) {
					b.closedAt.Store(now.UnixNano())
				}
			}
			return
		}
		if s.ramp(b, now) < 1 {
			return // no decay while ramping: a failure now ejects for longer
		}
		// Decay: each base ejection period spent healthy since the last close
		// forgives one past ejection, so a long-healthy key starts over.
		if e := b.ejections.Load(); e > 0 {
			if closed := b.closedAt.Load(); now.UnixNano()-closed >= int64(cfg.BaseEjection) {
				if b.closedAt.CompareAndSwap(closed, now.UnixNano()) {
					b.ejections.Add(-1)
				}
			}
		}
		return
	}
	b := s.getOrCreate(key)
	if until := b.openUntil.Load(); until != 0 {
		// Open: late failures do not extend the ejection. Half-open: the
		// first counted failure wins the CAS and re-ejects for longer.
		if now.UnixNano() >= until && b.openUntil.CompareAndSwap(until, ejecting) {
			b.openUntil.Store(s.ejectUntil(b, cfg, now))
		}
		return
	}
	// During the slow-start ramp one counted failure re-ejects.
	if (s.ramp(b, now) < 1 || int(b.failures.Add(1)) >= cfg.ConsecutiveFailures) && b.openUntil.CompareAndSwap(0, ejecting) {
		b.rampFrom.Store(0)
		b.openUntil.Store(s.ejectUntil(b, cfg, now))
	}
}

// ejectUntil counts one more ejection and returns when it ends:
// now + min(count × base, max).
func (s *Set) ejectUntil(b *Breaker, cfg *Config, now time.Time) int64 {
	n := b.ejections.Add(1)
	d := time.Duration(n) * cfg.BaseEjection
	if d > cfg.MaxEjection || d < 0 {
		d = cfg.MaxEjection
	}
	b.failures.Store(0)
	b.admitted.Store(0)
	return now.Add(d).UnixNano()
}

// Ejections returns how many consecutive ejections key has had (for metrics
// and tests).
func (s *Set) Ejections(key string) int {
	b := s.get(key)
	if b == nil {
		return 0
	}
	return int(b.ejections.Load())
}
