package subscribe

// Freeze protection beyond expiry: with Options.MaxStaleness set, the
// TrustPolicy and every Policy the agent holds must have been signed
// (provenance.issuedAt) within that duration. A control plane that
// withholds updates, or a network that cuts the agent off, cannot keep it
// running on old policy for longer: past the limit the agent refuses
// every call (configuration_stale) until a freshly signed version
// arrives. The clock is the signed issuedAt, never an arrival time, so
// nothing a control plane does can extend it; an artifact without
// issuedAt is stale whenever a limit is set.

import (
	"errors"
	"fmt"
	"time"

	"github.com/mcpready/mcpready/artifact"
)

// ErrStale: the held TrustPolicy or a Policy was signed longer ago than
// Options.MaxStaleness.
var ErrStale = errors.New("configuration_stale")

// StaleError names the artifact that is too old. errors.Is matches
// ErrStale.
type StaleError struct {
	Kind     artifact.Kind
	Name     string
	Version  string
	IssuedAt time.Time // zero when the artifact sets none
	Max      time.Duration
}

func (e *StaleError) Error() string {
	if e.IssuedAt.IsZero() {
		return fmt.Sprintf("%v: %s %q (version %s) has no signed issuedAt and the agent's maximum staleness is %s", ErrStale, e.Kind, e.Name, e.Version, e.Max)
	}
	return fmt.Sprintf("%v: %s %q (version %s) was signed at %s, longer ago than the agent's maximum staleness of %s; a freshly signed version is needed",
		ErrStale, e.Kind, e.Name, e.Version, e.IssuedAt.UTC().Format(time.RFC3339), e.Max)
}

func (e *StaleError) Is(target error) bool { return target == ErrStale }

// Stale reports whether the snapshot's TrustPolicy or any of its Policies
// was signed more than max before now (a *StaleError), or nil. max 0 is
// no limit.
func (s *Snapshot) Stale(now time.Time, max time.Duration) error {
	if max <= 0 {
		return nil
	}
	for _, k := range []artifact.Kind{artifact.KindTrustPolicy, artifact.KindPolicy} {
		for _, r := range s.List(k) {
			o := r.Verified.Object
			var issued time.Time
			if ts := o.Provenance().GetIssuedAt(); ts != nil {
				issued = ts.AsTime()
			}
			if issued.IsZero() || now.Sub(issued) > max {
				return &StaleError{Kind: k, Name: r.Name, Version: o.Version(), IssuedAt: issued, Max: max}
			}
		}
	}
	return nil
}
