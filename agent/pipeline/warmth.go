package pipeline

// Cold and warm calls: a call is cold when its first attempt ran on an
// upstream session it was the first to use (the transport opened it for
// this call) or on one idle longer than Options.ColdAfter, warm otherwise.
// The receipt records which (Receipt.warmth), so passive evidence keeps
// the two latency distributions apart.

import (
	"sync"
	"time"

	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
)

// DefaultColdAfter is Options.ColdAfter's zero value.
const DefaultColdAfter = time.Minute

// maxWarmSessions bounds the sessions whose last use is remembered (a
// remembered session stays referenced until it is forgotten).
const maxWarmSessions = 1024

// warmth remembers when each upstream session was last used. Safe for
// concurrent use.
type warmth struct {
	idle time.Duration
	mu   sync.Mutex
	last map[any]time.Time // by session identity (*upstream.Session)
}

func newWarmth(idle time.Duration) *warmth {
	if idle <= 0 {
		idle = DefaultColdAfter
	}
	return &warmth{idle: idle, last: map[any]time.Time{}}
}

// touch records a use of session at now and says whether it was cold.
// When the table is full, closed sessions and those idle past the
// threshold are forgotten first (their next use is cold either way), then
// arbitrary ones (their next use counts as a new session's).
func (w *warmth) touch(session any, now time.Time) mcpreadyv1.CallWarmth {
	w.mu.Lock()
	defer w.mu.Unlock()
	prev, seen := w.last[session]
	if !seen && len(w.last) >= maxWarmSessions {
		w.evict(now)
	}
	w.last[session] = now
	switch {
	case !seen:
		return mcpreadyv1.CallWarmth_CALL_WARMTH_COLD_NEW_SESSION
	case now.Sub(prev) > w.idle:
		return mcpreadyv1.CallWarmth_CALL_WARMTH_COLD_IDLE
	}
	return mcpreadyv1.CallWarmth_CALL_WARMTH_WARM
}

// evict makes room for one session; w.mu is held.
func (w *warmth) evict(now time.Time) {
	for s, t := range w.last {
		if b, ok := s.(interface{ Broken() bool }); now.Sub(t) > w.idle || ok && b.Broken() {
			delete(w.last, s)
		}
	}
	for s := range w.last {
		if len(w.last) < maxWarmSessions {
			break
		}
		delete(w.last, s)
	}
}

func (w *warmth) len() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.last)
}
