package decide

// Failure domains: routes that share an operator, cloud region, upstream
// dependency or authorization server fail together. Fallback prefers
// another domain (rank), and a route whose domain is suspect after a
// recent failure ranks lower (filter, step 6).

import (
	"slices"
	"strings"
	"time"
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

// sharesDomain reports whether e and o have a failure domain in common.
func (e *entry) sharesDomain(o *entry) bool {
	for _, d := range e.domains {
		if slices.Contains(o.domains, d) {
			return true
		}
	}
	return false
}

// SplitDomains is the list of failure domains of Route.Domains.
func SplitDomains(domains string) []string {
	if domains == "" {
		return nil
	}
	return strings.Split(domains, ",")
}

// domainView wraps a DomainHealth (the zero value reports nothing suspect).
type domainView struct{ h DomainHealth }

func (v domainView) suspect(domains []string, now time.Time) bool {
	for _, d := range domains {
		if v.h.Suspect(d, now) {
			return true
		}
	}
	return false
}
