package front

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcpready/mcpready/agent/validate"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/readiness"
)

// Defaults of the Options caps (zero values).
const (
	DefaultMaxUpstreamSessions             = 256
	DefaultMaxUpstreamSessionsPerPrincipal = 64
	DefaultMaxHeldCalls                    = 256
	DefaultMaxHeldCallsPerPrincipal        = 16
	DefaultMaxPendingRounds                = 10000
	DefaultMaxPendingRoundsPerPrincipal    = 64
	DefaultMaxSessions                     = 4096
	DefaultMaxSessionsPerPrincipal         = 256
	DefaultMaxCallsInProgress              = 4096
	DefaultMaxCallsInProgressPerPrincipal  = 256
	// DefaultEvictIdleAfter is how long a principal's front session must
	// have been idle to give way to a new one of the same principal at a
	// session cap.
	DefaultEvictIdleAfter = time.Minute
)

// Refusals at a cap.
var (
	// errTooManySessions refuses a dedicated upstream session past a cap.
	errTooManySessions = errors.New("too many upstream sessions")
	// errTooManyFrontSessions refuses a stateful front session past a cap.
	errTooManyFrontSessions = errors.New("too many sessions")
	// errTooManyCalls refuses a tool call or method past the cap on calls
	// in progress.
	errTooManyCalls = errors.New("too many calls in progress")
	// errTooManyHeld refuses an upstream call held open across input rounds past a cap.
	errTooManyHeld = errors.New("too many calls held open for input")
	// errTooManyRounds refuses a new pending input round past a cap.
	errTooManyRounds = errors.New("too many calls are waiting for input")
)

// refusal is err, a refusal at a cap, as the pipeline classifies and
// receipts it: REFUSED by the agent (agent_capacity), nothing sent; not a
// transport failure.
func refusal(err error) error {
	return &validate.Outcome{Class: mcpreadyv1.OutcomeClass_OUTCOME_CLASS_REFUSED,
		Layer: mcpreadyv1.ReadinessLayer_READINESS_LAYER_INVOCATION, Err: err, From: "agent", Code: readiness.CodeAgentCapacity}
}

// limiter counts what is held of one bounded resource, overall and per
// principal, and refuses (counted, by scope) past a cap.
type limiter struct {
	noun                string // what is counted, for errors ("dedicated upstream sessions")
	sentinel            error
	total, perPrincipal int // <= 0: no cap
	refused             *prometheus.CounterVec
	open                prometheus.Gauge // nil: not exported

	mu sync.Mutex
	n  int
	by map[string]int
}

// newLimiter returns a limiter; a zero cap takes def (defTotal,
// defPerPrincipal), a negative one is no cap.
func newLimiter(noun string, sentinel error, total, perPrincipal, defTotal, defPerPrincipal int, refused *prometheus.CounterVec, open prometheus.Gauge) *limiter {
	if total == 0 {
		total = defTotal
	}
	if perPrincipal == 0 {
		perPrincipal = defPerPrincipal
	}
	return &limiter{noun: noun, sentinel: sentinel, total: total, perPrincipal: perPrincipal, refused: refused, open: open, by: map[string]int{}}
}

// acquire takes a slot for principal, or refuses (counted) past a cap.
// The returned release is idempotent.
func (c *limiter) acquire(principal string) (func(), error) { return c.take(principal, true) }

// take is acquire; a refusal is counted only when count is set (a caller
// that frees what it can and tries again counts its second refusal only).
func (c *limiter) take(principal string, count bool) (func(), error) {
	if err := c.enter(principal, count); err != nil {
		return nil, err
	}
	var once sync.Once
	return func() { once.Do(func() { c.leave(principal) }) }, nil
}

// enter takes a slot for principal, to be given back by exactly one leave,
// or refuses past a cap (counted when count is set). Unlike acquire it
// allocates nothing: for the per-call caps.
func (c *limiter) enter(principal string, count bool) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.total > 0 && c.n >= c.total:
		if count {
			c.refused.WithLabelValues("total").Inc()
		}
		return fmt.Errorf("%w: this agent holds its limit of %d %s; retry later", c.sentinel, c.total, c.noun)
	case c.perPrincipal > 0 && c.by[principal] >= c.perPrincipal:
		if count {
			c.refused.WithLabelValues("principal").Inc()
		}
		return fmt.Errorf("%w: principal %s holds its limit of %d %s; finish one and retry", c.sentinel, principal, c.perPrincipal, c.noun)
	}
	c.n++
	c.by[principal]++
	if c.open != nil {
		c.open.Inc()
	}
	return nil
}

// leave gives back a slot enter took for principal.
func (c *limiter) leave(principal string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n--
	if c.by[principal]--; c.by[principal] <= 0 {
		delete(c.by, principal)
	}
	if c.open != nil {
		c.open.Dec()
	}
}

// sessionSlot is a front session cap slot taken for a request that may
// open a stateful session: the session that request opens claims it (and
// releases it when it ends); otherwise the request releases it when done.
type sessionSlot struct {
	release func()
	claimed atomic.Bool
}

type sessionSlotKey struct{}

// claim takes over the slot's release; false if it was claimed or released.
func (sl *sessionSlot) claim() bool { return sl != nil && sl.claimed.CompareAndSwap(false, true) }

// unclaimed releases the slot unless a session claimed it.
func (sl *sessionSlot) unclaimed() {
	if sl.claim() {
		sl.release()
	}
}
