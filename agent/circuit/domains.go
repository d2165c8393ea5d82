package circuit

// Failure domains: a counted failure of one route makes every route that
// shares one of its failure domains suspect for a while, so the decision
// ranks them below routes in other domains.

import (
	"sync"
	"sync/atomic"
	"time"
)

// domains is the suspicion state of a Set: domain name -> *atomic.Int64
// (unix nanos the suspicion ends), and the latest end of any, so that the
// common case (nothing suspect) costs one atomic load.
type domains struct {
	until  sync.Map // string -> *atomic.Int64
	latest atomic.Int64
}

// MarkSuspect makes each of doms suspect from now for one base ejection
// time.
func (s *Set) MarkSuspect(doms []string, now time.Time) {
	if len(doms) == 0 {
		return
	}
	end := now.Add(s.cfg.Load().BaseEjection).UnixNano()
	for _, d := range doms {
		v, _ := s.doms.until.LoadOrStore(d, new(atomic.Int64))
		storeMax(v.(*atomic.Int64), end)
	}
	storeMax(&s.doms.latest, end)
}

// Suspect reports whether domain is suspect at now.
func (s *Set) Suspect(domain string, now time.Time) bool {
	n := now.UnixNano()
	if s.doms.latest.Load() <= n {
		return false
	}
	v, ok := s.doms.until.Load(domain)
	return ok && v.(*atomic.Int64).Load() > n
}

func storeMax(a *atomic.Int64, v int64) {
	for {
		old := a.Load()
		if old >= v || a.CompareAndSwap(old, v) {
			return
		}
	}
}
