package decide

// Failure domains: routes that share an operator, cloud region, upstream
// dependency or authorization server fail together. Fallback prefers
// another domain (rank), and a route whose domain is suspect after a
// recent failure ranks lower (filter, step 6).

import (
	"iter"
	"slices"
	"strings"
)

// failureDomains is the sorted union of lists, without empty names or
// names that contain "," (which Route.Domains uses as separator).
func failureDomains(lists ...[]string) []string {
	var out []string
	for _, l := range lists {
		for _, d := range l {
			if d != "" && !strings.Contains(d, ",") && !slices.Contains(out, d) {
				out = append(out, d)
			}
		}
	}
	slices.Sort(out)
	return out
}

// indexDomains gives every failure domain of the snapshot a bit.
func (s *Snapshot) indexDomains() {
	idx := map[string]int{}
	for _, e := range s.entries {
		for _, d := range e.domains {
			if _, ok := idx[d]; !ok {
				idx[d] = len(s.domainNames)
				s.domainNames = append(s.domainNames, d)
			}
		}
	}
	if len(s.domainNames) > 64 {
		s.domainSlow = true
		return
	}
	for _, e := range s.entries {
		for _, d := range e.domains {
			e.domainMask |= 1 << idx[d]
		}
	}
}

// sharesDomain reports whether e and o have a failure domain in common.
func (s *Snapshot) sharesDomain(e, o *entry) bool {
	if !s.domainSlow {
		return e.domainMask&o.domainMask != 0
	}
	for _, d := range e.domains {
		if slices.Contains(o.domains, d) {
			return true
		}
	}
	return false
}

// SplitDomains yields the failure domains of Route.Domains in order (none
// for ""); a caller that ranges over it directly allocates nothing.
func SplitDomains(domains string) iter.Seq[string] {
	return func(yield func(string) bool) {
		for rest := domains; rest != ""; {
			var d string
			d, rest, _ = strings.Cut(rest, ",")
			if !yield(d) {
				return
			}
		}
	}
}

// suspect reports whether h (when it is a DomainHealth) holds one of e's
// domains suspect at x's time. The suspect domains are asked once per call
// (x.suspect) unless the snapshot has more than 64.
func (s *Snapshot) suspect(h Health, e *entry, x *call) bool {
	dh, ok := h.(DomainHealth)
	if !ok {
		return false
	}
	if !s.domainSlow {
		if !x.suspectDone {
			x.suspectDone = true
			for i, d := range s.domainNames {
				if dh.Suspect(d, x.req.Now) {
					x.suspect |= 1 << i
				}
			}
		}
		return e.domainMask&x.suspect != 0
	}
	for _, d := range e.domains {
		if dh.Suspect(d, x.req.Now) {
			return true
		}
	}
	return false
}
