package subscribe

// Expiry after install: a held TrustPolicy, Policy or Declaration whose
// signed provenance.expiresAt passes stops being used at that moment, not
// when a newer version happens to arrive. Run keeps one timer for the
// earliest expiresAt among them and, when it fires, publishes a snapshot
// that withholds what expired:
//
//   - an expired Policy: Get and List no longer return it, and no other
//     Policy takes its place (the agent refuses calls that need it:
//     no_policy, naming the expiry via Withheld);
//   - an expired Declaration, and every registry entry of its server
//     (RegistryEntry.identity.serverName = the Declaration's name);
//   - an expired TrustPolicy: everything, since nothing it verified may
//     be used.
//
// A withheld resource is still held: its high-water mark stays, it is
// presented to the control plane as held (Versions), and a newer signed
// version replaces it and is used again. A held Declaration is removed
// only with a signed tombstone naming its exact version (as a Policy), so
// neither a delta removal nor a state-of-the-world set that re-offers it
// expired drops it. Registry entries whose server has a Declaration mark
// (highwater.go) that no signed tombstone deleted, but no Declaration
// held, are withheld too: after a restart the expired Declaration is not
// loaded again (it no longer installs), and its entries must not then be
// used as if the server had none. Registry entries and Evidence carry
// their own expiry, which the decision checks at every call.

import (
	"fmt"
	"time"

	"github.com/mcpready/mcpready/artifact"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
)

// expiringKinds are the kinds a snapshot withholds at their expiry.
var expiringKinds = []artifact.Kind{artifact.KindTrustPolicy, artifact.KindPolicy, artifact.KindDeclaration}

func expiresAt(r *Resource) (time.Time, bool) {
	ts := r.Verified.Object.Provenance().GetExpiresAt()
	if ts == nil {
		return time.Time{}, false
	}
	return ts.AsTime(), true
}

// Withheld says why a held resource is not used (expired, or its
// server's Declaration expired), or "" when it is used or not held.
func (s *Snapshot) Withheld(k artifact.Kind, name string) string {
	if s == nil {
		return ""
	}
	return s.withheld[k][name]
}

// withhold sets s.withheld for now and the high-water marks ms (see the
// file comment); s is being built and not yet published.
func (s *Snapshot) withhold(now time.Time, ms marks) {
	s.withheld = nil
	mark := func(k artifact.Kind, name, why string) {
		if s.withheld == nil {
			s.withheld = map[artifact.Kind]map[string]string{}
		}
		if s.withheld[k] == nil {
			s.withheld[k] = map[string]string{}
		}
		s.withheld[k][name] = why
	}
	for _, r := range s.resources[artifact.KindTrustPolicy] {
		if exp, ok := expiresAt(r); ok && !now.Before(exp) {
			why := fmt.Sprintf("TrustPolicy %q (version %s) expired at %s: nothing it verified is used", r.Name, r.Verified.Object.Version(), exp.UTC().Format(time.RFC3339))
			for k, m := range s.resources {
				for n := range m {
					mark(k, n, why)
				}
			}
			return
		}
	}
	for _, k := range expiringKinds[1:] {
		for n, r := range s.resources[k] {
			if exp, ok := expiresAt(r); ok && !now.Before(exp) {
				mark(k, n, fmt.Sprintf("%s %q (version %s) expired at %s", k, n, r.Verified.Object.Version(), exp.UTC().Format(time.RFC3339)))
			}
		}
	}
	for n, r := range s.resources[artifact.KindRegistryEntry] {
		server := r.Verified.Object.Spec.(*mcpreadyv1.RegistryEntry).GetIdentity().GetServerName()
		if why := s.withheld[artifact.KindDeclaration][server]; why != "" {
			mark(artifact.KindRegistryEntry, n, "the Declaration of its server: "+why)
		} else if m, ok := ms[artifact.KindDeclaration][server]; ok && !m.Deleted && s.resources[artifact.KindDeclaration][server] == nil {
			mark(artifact.KindRegistryEntry, n, fmt.Sprintf("the Declaration of its server %q (version %s) is not held (it expired or no longer verifies) and no signed tombstone removed it", server, m.Version))
		}
	}
}

// nextExpiry is the earliest expiresAt of a TrustPolicy, Policy or
// Declaration s uses (false when none expires).
func (s *Snapshot) nextExpiry() (time.Time, bool) {
	var next time.Time
	found := false
	for _, k := range expiringKinds {
		for _, r := range s.List(k) {
			if exp, ok := expiresAt(r); ok && (!found || exp.Before(next)) {
				next, found = exp, true
			}
		}
	}
	return next, found
}

// watchExpiry republishes the snapshot whenever the earliest expiresAt
// among what it uses passes, until done is closed.
func (c *Client) watchExpiry(done <-chan struct{}) {
	for {
		changed := c.Changed()
		var wake <-chan time.Time
		if at, ok := c.Snapshot().nextExpiry(); ok {
			wake = c.opts.Until(at)
		}
		select {
		case <-done:
			return
		case <-changed:
		case <-wake:
			c.expire()
		}
	}
}

// expire publishes the held resources again, withholding what has
// expired by now (when anything newly has).
func (c *Client) expire() {
	c.mu.Lock()
	defer c.mu.Unlock()
	snap := c.cur.Load()
	if at, ok := snap.nextExpiry(); !ok || c.opts.Now().Before(at) {
		return // replaced meanwhile, or the clock is not there yet
	}
	if err := c.install(snap.Trust, snap.clone()); err != nil {
		c.opts.Logger.Error("sync: could not withhold expired configuration", "err", err)
	}
}
