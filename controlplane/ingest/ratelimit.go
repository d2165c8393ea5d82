package ingest

import (
	"fmt"
	"math"
	"sync"
	"time"
)

// Defaults of Options.AgentReceiptsPerSecond and AgentReceiptsBurst.
//
// 5,000 receipts/s sustained is far above a busy honest agent (every
// receipt is one tool call); the burst is about the receipts a full
// 256 MiB agent spool holds, so an agent that was cut off from the control
// plane for a while uploads its whole backlog at once.
const (
	DefaultAgentReceiptsPerSecond = 5000
	DefaultAgentReceiptsBurst     = 300_000
)

// minSweep is the number of buckets below which full ones are not swept.
const minSweep = 1024

// limiter is a token bucket of receipts per uploader (the node id the
// upload stream named, which under mTLS is the agent's certificate
// identity). It runs before a batch is verified, so it must stay cheap.
type limiter struct {
	rate, burst float64 // rate 0: no bound

	mu      sync.Mutex
	buckets map[string]*bucket
	sweepAt int
}

type bucket struct {
	tokens  float64
	at      time.Time
	limited bool // the last take was refused
}

// newLimiter is the limiter for the options' bound (see Options).
func newLimiter(perSecond, burst int) *limiter {
	if perSecond < 0 {
		return &limiter{}
	}
	if perSecond == 0 {
		perSecond = DefaultAgentReceiptsPerSecond
	}
	if burst <= 0 {
		burst = DefaultAgentReceiptsBurst
	}
	return &limiter{rate: float64(perSecond), burst: float64(burst), buckets: map[string]*bucket{}, sweepAt: minSweep}
}

// refill brings b up to now; a clock that went back refills nothing.
func (l *limiter) refill(b *bucket, now time.Time) {
	if now.After(b.at) {
		b.tokens = min(l.burst, b.tokens+l.rate*now.Sub(b.at).Seconds())
		b.at = now
	}
}

// take charges n receipts to key at now. A batch fits when the bucket holds
// n tokens (or is full, for a batch larger than the burst, which then
// leaves the bucket in debt). When it does not fit, nothing is charged,
// wait is how long until it would, and first reports that the previous
// take for key fitted (the start of a refused episode).
func (l *limiter) take(key string, n int, now time.Time) (ok bool, wait time.Duration, first bool) {
	if l.rate == 0 {
		return true, 0, false
	}
	cost := float64(max(n, 1)) // an empty batch still costs a verification
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.buckets[key]
	if b == nil {
		l.sweep(now)
		b = &bucket{tokens: l.burst, at: now}
		l.buckets[key] = b
	}
	l.refill(b, now)
	need := min(cost, l.burst)
	if b.tokens < need {
		secs := (need - b.tokens) / l.rate
		wait = time.Duration(math.Ceil(secs*10)) * 100 * time.Millisecond // rounded up to 0.1s
		first = !b.limited
		b.limited = true
		return false, wait, first
	}
	b.tokens -= cost
	b.limited = false
	return true, 0, false
}

// sweep forgets the buckets that have refilled (a full bucket is the same
// as none) once there are many, so uploaders that come and go do not grow
// the map without bound. Caller holds mu.
func (l *limiter) sweep(now time.Time) {
	if len(l.buckets) < l.sweepAt {
		return
	}
	for k, b := range l.buckets {
		if l.refill(b, now); b.tokens >= l.burst {
			delete(l.buckets, k)
		}
	}
	l.sweepAt = max(minSweep, 2*len(l.buckets))
}

// rateLimited is the refusal of a batch of n receipts from key that does
// not fit its bucket.
func (l *limiter) rateLimited(key string, n int, wait time.Duration) *RejectError {
	who := fmt.Sprintf("agent %q", key)
	if key == "" {
		who = "uploads naming no node"
	}
	return &RejectError{Reason: ReasonAgentRateLimited, RetryAfter: wait,
		Detail: fmt.Sprintf("%s exceeded the upload bound of %.0f receipts/s (burst %.0f): batch of %d receipts refused unverified and not stored; keep it and retry in %s",
			who, l.rate, l.burst, n, wait)}
}
