package sign

// The trust chain: the one rule, shared by the control plane's write path
// and the agent's install, for which TrustPolicy is active. It reads only
// signed fields, never a store revision, a resource version or an arrival
// order.
//
//   - TrustPolicy versions form one chain per organisation whatever their
//     metadata.name: provenance.version is compared across names.
//   - The active TrustPolicy is, among the bundles that verify against the
//     root key (signature and kind; expiry is checked after the choice),
//     the one with the highest signed version. Two different bundles at
//     the highest version are a fork and nothing is chosen.
//   - A successor must be strictly newer than the held active one (an
//     exact re-offer of the held bundle is no change), and must name what
//     it supersedes (TrustPolicy.supersedes): a version lower than its own,
//     and, when it names the held version, exactly the held name and
//     bundle digest. The control plane, which sees every version, requires
//     the successor to name exactly the active one; an agent may have
//     missed intermediate versions, so it requires only that.
//   - A TrustPolicy is never deleted: rotation is a newer version (under
//     the same or another name); a removal never brings an older one back.

import (
	"crypto"
	"errors"
	"fmt"
	"time"

	"github.com/mcpready/mcpready/artifact"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
)

// ErrTrustChain: a TrustPolicy does not continue the chain (it names a
// superseded version other than the held one, or is one of two different
// bundles at the same version).
var ErrTrustChain = errors.New("trust-chain")

// TrustRef names one signed TrustPolicy version exactly.
type TrustRef struct {
	Name, Version string
	// Digest is artifact.Digest of the exact signed bundle.
	Digest string
}

func (r TrustRef) String() string { return fmt.Sprintf("%s@%s (%s)", r.Name, r.Version, r.Digest) }

// Ref names t's TrustPolicy.
func (t *Trust) Ref() TrustRef { return t.ref }

// Supersedes is what t's TrustPolicy names as the version it replaces
// (zero for the first of the chain).
func (t *Trust) Supersedes() TrustRef {
	s := t.policy.Object.Spec.(*mcpreadyv1.TrustPolicy).GetSupersedes()
	return TrustRef{Name: s.GetName(), Version: s.GetVersion(), Digest: s.GetDigest()}
}

// candidate is a root-verified TrustPolicy bundle before its expiry and
// grants are checked.
type candidate struct {
	bundle []byte
	v      *Verified
	ref    TrustRef
}

// PickTrust applies the chain rule to bundles: among those that verify
// against root as TrustPolicies, the one with the highest signed version
// becomes the Trust (then NewTrust's checks apply to it: expiry, grants).
// Bundles that do not verify are ignored. ref names the chosen bundle
// whenever one was chosen, also when NewTrust then refuses it (so a
// successor of an expired TrustPolicy is still checked against it). With
// no verifying bundle the error is the first verification failure; a
// fork (two different bundles at the highest version) wraps ErrTrustChain.
func PickTrust(bundles [][]byte, root crypto.PublicKey, now time.Time) (t *Trust, ref TrustRef, err error) {
	rk, err := newKeyVerifier(root)
	if err != nil {
		return nil, TrustRef{}, fmt.Errorf("root key: %w", err)
	}
	var best *candidate
	var firstErr error
	fork := false
	for _, b := range bundles {
		c, err := rootCandidate(b, rk)
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		if best == nil {
			best = c
			continue
		}
		switch cmp, _ := artifact.CompareVersions(c.ref.Version, best.ref.Version); {
		case cmp > 0:
			best, fork = c, false
		case cmp == 0 && c.ref.Digest != best.ref.Digest:
			fork = true
		}
	}
	if best == nil {
		if firstErr == nil {
			firstErr = verifyErr(ReasonMalformed, "", "no TrustPolicy offered")
		}
		return nil, TrustRef{}, firstErr
	}
	if fork {
		return nil, best.ref, fmt.Errorf("%w: two different TrustPolicies at version %q", ErrTrustChain, best.ref.Version)
	}
	// The chosen bundle was verified against root above; NewTrust's
	// remaining checks (expiry, grants) apply to that verification.
	t, err = newTrust(best.v, best.bundle, rk, now)
	return t, best.ref, err
}

// rootCandidate verifies b against the root key as a TrustPolicy with a
// valid version.
func rootCandidate(b []byte, rk *keyVerifier) (*candidate, error) {
	e, err := parseBundle(b)
	if err != nil {
		return nil, err
	}
	v, err := rk.verify(e)
	if err != nil {
		return nil, err
	}
	if v.Object.Kind != artifact.KindTrustPolicy {
		return nil, verifyErr(ReasonKindNotAllowed, v.KeyID, "holds a %s, not a TrustPolicy", v.Object.Kind)
	}
	if err := artifact.ValidVersion(v.Object.Version()); err != nil {
		return nil, verifyErr(ReasonMalformed, v.KeyID, "TrustPolicy %q: %v", v.Object.Metadata.Name, err)
	}
	return &candidate{bundle: b, v: v, ref: TrustRef{Name: v.Object.Metadata.Name, Version: v.Object.Version(), Digest: artifact.Digest(b)}}, nil
}

// CheckSuccessor checks next against the held active TrustPolicy (held
// false when there is none): the chain rule above. exact (the control
// plane) requires next to name held exactly. A version that is not newer
// is a *artifact.VersionError (artifact.ErrRollback); a broken link wraps
// ErrTrustChain.
func CheckSuccessor(held TrustRef, hasHeld bool, next *Trust, exact bool) error {
	ref, sup := next.Ref(), next.Supersedes()
	if !hasHeld {
		return checkSupersedesVersion(ref, sup)
	}
	if err := artifact.CheckNewer(artifact.KindTrustPolicy, ref.Name, ref.Version, ref.Digest, held.Version, held.Digest, true); err != nil {
		if ve := new(artifact.VersionError); errors.As(err, &ve) && ve.Reason == artifact.ReasonRollback {
			ve.Held = held.Name + "@" + held.Version
		}
		return err
	}
	if ref.Digest == held.Digest {
		return nil // the held bundle itself
	}
	if sup == (TrustRef{}) {
		return fmt.Errorf("%w: TrustPolicy %s names no superseded version; it must name %s", ErrTrustChain, ref, held)
	}
	if err := checkSupersedesVersion(ref, sup); err != nil {
		return err
	}
	if exact && sup != held {
		return fmt.Errorf("%w: TrustPolicy %s supersedes %s, but the active one is %s", ErrTrustChain, ref, sup, held)
	}
	if c, _ := artifact.CompareVersions(sup.Version, held.Version); c == 0 && sup != held {
		return fmt.Errorf("%w: TrustPolicy %s supersedes %s, but the held one at that version is %s", ErrTrustChain, ref, sup, held)
	}
	return nil
}

// checkSupersedesVersion: what a TrustPolicy supersedes is older than it.
func checkSupersedesVersion(ref, sup TrustRef) error {
	if sup == (TrustRef{}) {
		return nil
	}
	c, err := artifact.CompareVersions(sup.Version, ref.Version)
	if err != nil || c >= 0 {
		return fmt.Errorf("%w: TrustPolicy %s supersedes version %q, which is not older than its own", ErrTrustChain, ref, sup.Version)
	}
	return nil
}
