package front

import (
	"errors"
	"fmt"
	"sync"
)

// Defaults of Options.MaxUpstreamSessions and
// Options.MaxUpstreamSessionsPerPrincipal.
const (
	DefaultMaxUpstreamSessions             = 256
	DefaultMaxUpstreamSessionsPerPrincipal = 64
)

// errTooManySessions refuses a dedicated upstream session past a cap.
var errTooManySessions = errors.New("too many upstream sessions")

// sessionCaps counts the dedicated upstream sessions held for transparent
// views, overall and per principal.
type sessionCaps struct {
	total, perPrincipal int // <= 0: no cap
	m                   *metrics

	mu   sync.Mutex
	open int
	by   map[string]int
}

func newSessionCaps(total, perPrincipal int, m *metrics) *sessionCaps {
	if total == 0 {
		total = DefaultMaxUpstreamSessions
	}
	if perPrincipal == 0 {
		perPrincipal = DefaultMaxUpstreamSessionsPerPrincipal
	}
	return &sessionCaps{total: total, perPrincipal: perPrincipal, m: m, by: map[string]int{}}
}

// acquire takes a slot for principal, or refuses (counted) past a cap.
// The returned release is idempotent.
func (c *sessionCaps) acquire(principal string) (func(), error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.total > 0 && c.open >= c.total:
		c.m.sessionsRefused.WithLabelValues("total").Inc()
		return nil, fmt.Errorf("%w: this agent holds its limit of %d dedicated upstream sessions; close a session and retry", errTooManySessions, c.total)
	case c.perPrincipal > 0 && c.by[principal] >= c.perPrincipal:
		c.m.sessionsRefused.WithLabelValues("principal").Inc()
		return nil, fmt.Errorf("%w: principal %s holds its limit of %d dedicated upstream sessions; close a session and retry", errTooManySessions, principal, c.perPrincipal)
	}
	c.open++
	c.by[principal]++
	c.m.sessionsOpen.Inc()
	var once sync.Once
	return func() {
		once.Do(func() {
			c.mu.Lock()
			defer c.mu.Unlock()
			c.open--
			if c.by[principal]--; c.by[principal] <= 0 {
				delete(c.by, principal)
			}
			c.m.sessionsOpen.Dec()
		})
	}, nil
}
