// Package quota keeps the host agent's local quota budgets: units used per
// key (principal and tool, and tenant when the provider partitions
// by it) in fixed windows, so a principal cannot spend a tool's quota past
// the policy's budget (Policy.cost.maxQuotaUnits per quotaWindow), nor the
// host a server's quota past what its provider declares
// (Declaration.quota.limit per quota.window).
//
// It also parses a provider's RateLimit and RateLimit-Policy response
// fields and remembers which endpoints said their quota is spent
// (ratelimit.go).
//
// It only counts and remembers. It must not decide (package decide and
// the call pipeline do) nor treat a provider's RateLimit hints as
// reservations.
package quota

import (
	"sync"
	"time"
)

// Key names one count: a principal's use of one tool of one server
// (Principal its name, Class its principal class; a caller without a
// name counts under its class), per tenant when the provider partitions
// its quota by tenant (else Tenant is ""); with only Server (and Tenant)
// set, the use of a provider's declared quota for the whole server; or,
// with only Workflow set, a workflow's spend. A struct rather than a joined string, so a lookup
// allocates nothing.
type Key struct {
	Principal, Class, Server, Tool, Tenant string
	Workflow                               string
}

// Ledger counts units per key. Its zero value is not usable; call New.
// Safe for concurrent use.
type Ledger struct {
	mu sync.Mutex
	m  map[Key]*window
	// sweepAt is the size at which a new key first drops the ended
	// windows: twice what a sweep left (at least minSweep), so the cost
	// of sweeping stays proportional to the keys added.
	sweepAt int
}

// minSweep is the fewest keys at which ended windows are dropped.
const minSweep = 4096

type window struct {
	start time.Time
	used  int64
}

// New returns an empty Ledger.
func New() *Ledger { return &Ledger{m: map[Key]*window{}, sweepAt: minSweep} }

// Used returns the units used by key in the window of length w that holds
// now. It records nothing: a key never charged takes no room.
func (l *Ledger) Used(key Key, w time.Duration, now time.Time) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if win := l.m[key]; win != nil && now.Before(win.start.Add(w)) {
		return win.used
	}
	return 0
}

// Add charges units to key's current window and returns the units used in
// it now.
func (l *Ledger) Add(key Key, units int64, w time.Duration, now time.Time) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	win := l.current(key, w, now)
	win.used += units
	return win.used
}

// current is key's window at now, started afresh when the last one ended;
// l.mu is held. Ended windows of other keys are dropped as the map grows.
func (l *Ledger) current(key Key, w time.Duration, now time.Time) *window {
	win := l.m[key]
	if win == nil || !now.Before(win.start.Add(w)) {
		if win == nil && len(l.m) >= l.sweepAt {
			for k, o := range l.m {
				if !now.Before(o.start.Add(w)) {
					delete(l.m, k)
				}
			}
			l.sweepAt = max(minSweep, 2*len(l.m))
		}
		win = &window{start: now}
		l.m[key] = win
	}
	return win
}
