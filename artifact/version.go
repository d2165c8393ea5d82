package artifact

// Rollback and freeze protection (TUF's model), defined once for the
// control plane's write path and the agent's install: an artifact's signed
// provenance.version must be strictly greater than the highest version of
// the same kind and name already held, and its provenance.expiresAt must
// not be in the past.
//
// A version is one or more dot-separated non-negative decimal integers
// ("1", "42", "1.4.0", "2026.11.30"), compared numerically component by
// component from the left; a missing trailing component counts as 0, so
// "1" and "1.0" are equal. An empty version is "0", so an unversioned
// artifact can never follow a versioned one. Anything else ("v2",
// "window-5", "1..2", "-1") is not a version and is refused. The order is
// total: any two versions compare, and equal versions are the same point.

import (
	"errors"
	"fmt"
	"strings"
	"time"

	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
)

// Reasons of a *VersionError, stable strings for logs, NACKs and metrics.
const (
	ReasonRollback   = "rollback"
	ReasonExpired    = "expired"
	ReasonBadVersion = "version"
	// ReasonTombstone: a tombstone does not name the exact version it
	// would delete (a replay, or one for another version).
	ReasonTombstone = "tombstone"
)

// Sentinels a *VersionError matches with errors.Is, one per reason.
var (
	ErrRollback   = errors.New(ReasonRollback)
	ErrExpired    = errors.New(ReasonExpired)
	ErrBadVersion = errors.New("invalid " + ReasonBadVersion)
	ErrTombstone  = errors.New(ReasonTombstone + " mismatch")
)

// VersionError says why an artifact is not newer than what is held, or
// has expired. errors.Is matches the sentinel of its Reason.
type VersionError struct {
	Reason  string // ReasonRollback, ReasonExpired, ReasonBadVersion or ReasonTombstone
	Kind    Kind
	Name    string
	Version string    // the offered artifact's signed version
	Held    string    // the highest version held (ReasonRollback), the version held (ReasonTombstone)
	Digest  string    // the digest a tombstone names (ReasonTombstone)
	HeldDig string    // the held bundle's digest (ReasonTombstone)
	Expires time.Time // the offered artifact's expiresAt (ReasonExpired)
	Err     error     // the parse error (ReasonBadVersion)
}

func (e *VersionError) Error() string {
	switch e.Reason {
	case ReasonRollback:
		return fmt.Sprintf("%s: %s %q: version %q is not newer than the held version %q", e.Reason, e.Kind, e.Name, e.Version, e.Held)
	case ReasonTombstone:
		return fmt.Sprintf("%s: the tombstone for %s %q names version %q digest %q, but the held one is version %q digest %q", e.Reason, e.Kind, e.Name, e.Version, e.Digest, e.Held, e.HeldDig)
	case ReasonExpired:
		return fmt.Sprintf("%s: %s %q (version %q) expired at %s", e.Reason, e.Kind, e.Name, e.Version, e.Expires.UTC().Format(time.RFC3339))
	}
	return fmt.Sprintf("%s: %s %q: %v", e.Reason, e.Kind, e.Name, e.Err)
}

// Is matches the sentinel of e's reason.
func (e *VersionError) Is(target error) bool {
	switch target {
	case ErrRollback:
		return e.Reason == ReasonRollback
	case ErrExpired:
		return e.Reason == ReasonExpired
	case ErrBadVersion:
		return e.Reason == ReasonBadVersion
	case ErrTombstone:
		return e.Reason == ReasonTombstone
	}
	return false
}

func (e *VersionError) Unwrap() error { return e.Err }

// parseVersion splits v into its numeric components without leading
// zeros (zero is the empty component; the empty version is zero).
func parseVersion(v string) ([]string, error) {
	if v == "" {
		return []string{""}, nil
	}
	if len(v) > 256 {
		return nil, fmt.Errorf("%w: longer than 256 characters", ErrBadVersion)
	}
	parts := strings.Split(v, ".")
	for i, p := range parts {
		if p == "" {
			return nil, fmt.Errorf("%w: %q has an empty component", ErrBadVersion, v)
		}
		for _, c := range p {
			if c < '0' || c > '9' {
				return nil, fmt.Errorf("%w: %q: components are decimal integers (e.g. 3 or 1.4.0)", ErrBadVersion, v)
			}
		}
		parts[i] = strings.TrimLeft(p, "0")
	}
	return parts, nil
}

// CompareVersions returns -1, 0 or +1 as a is lower than, equal to or
// higher than b in the version order above, or an error wrapping
// ErrBadVersion when either is not a version.
func CompareVersions(a, b string) (int, error) {
	pa, err := parseVersion(a)
	if err != nil {
		return 0, err
	}
	pb, err := parseVersion(b)
	if err != nil {
		return 0, err
	}
	for i := range max(len(pa), len(pb)) {
		var x, y string
		if i < len(pa) {
			x = pa[i]
		}
		if i < len(pb) {
			y = pb[i]
		}
		// without leading zeros, a longer number is larger
		if len(x) != len(y) {
			return cmpInt(len(x), len(y)), nil
		}
		if c := strings.Compare(x, y); c != 0 {
			return c, nil
		}
	}
	return 0, nil
}

func cmpInt(a, b int) int {
	if a < b {
		return -1
	}
	return 1
}

// ValidVersion reports whether v is a version (the empty string is).
func ValidVersion(v string) error {
	_, err := parseVersion(v)
	return err
}

// MaxVersion returns the higher of two versions; an invalid one loses.
func MaxVersion(a, b string) string {
	if c, err := CompareVersions(a, b); err == nil {
		if c >= 0 {
			return a
		}
		return b
	}
	if ValidVersion(a) == nil {
		return a
	}
	return b
}

// NextVersion returns a version greater than v: its last component plus
// one ("3" → "4", "1.4.0" → "1.4.1", "0.9" → "0.10"; "" → "1"), with
// leading zeros dropped ("01.02" → "1.3"). An invalid v gives "1".
func NextVersion(v string) string {
	p, err := parseVersion(v)
	if err != nil {
		return "1"
	}
	last := []byte(p[len(p)-1])
	i := len(last) - 1
	for ; i >= 0 && last[i] == '9'; i-- {
		last[i] = '0'
	}
	if i < 0 {
		last = append([]byte{'1'}, last...)
	} else {
		last[i]++
	}
	p[len(p)-1] = string(last)
	for i, c := range p {
		if c == "" { // parseVersion trims leading zeros: a zero is written "0"
			p[i] = "0"
		}
	}
	return strings.Join(p, ".")
}

// CheckNewer is the one rollback check. version is the offered artifact's
// signed version; held is the highest version already stored or
// installed for the same kind and name ("" with exists false when none
// is). The offered version must be strictly greater than held; an exact
// re-offer of the held bytes (digest equal to heldDigest) is no change and
// passes. The error is a *VersionError (ReasonRollback or
// ReasonBadVersion).
func CheckNewer(k Kind, name, version, digest, held, heldDigest string, exists bool) error {
	c, err := CompareVersions(version, held)
	if err != nil {
		return &VersionError{Reason: ReasonBadVersion, Kind: k, Name: name, Version: version, Held: held, Err: err}
	}
	if !exists || c > 0 || (c == 0 && digest != "" && digest == heldDigest) {
		return nil
	}
	return &VersionError{Reason: ReasonRollback, Kind: k, Name: name, Version: version, Held: held}
}

// Provenance returns the provenance of o's spec, or nil for a kind
// without one (ReceiptBatch).
func (o *Object) Provenance() *mcpreadyv1.Provenance {
	if p, ok := o.Spec.(interface {
		GetProvenance() *mcpreadyv1.Provenance
	}); ok {
		return p.GetProvenance()
	}
	return nil
}

// Version is o's signed provenance.version ("" when unset).
func (o *Object) Version() string { return o.Provenance().GetVersion() }

// CheckExpiry refuses o when its provenance.expiresAt is set and not
// after now, with a *VersionError of ReasonExpired.
func CheckExpiry(o *Object, now time.Time) error {
	exp := o.Provenance().GetExpiresAt()
	if exp == nil || now.Before(exp.AsTime()) {
		return nil
	}
	return &VersionError{Reason: ReasonExpired, Kind: o.Kind, Name: o.Metadata.Name, Version: o.Version(), Expires: exp.AsTime()}
}

// CheckTombstone is the one tombstone check, for the control plane's
// Delete and the agent's removals: ts must target kind k and name, and
// name exactly the held version (its signed provenance.version) and the
// digest of its exact signed bundle (Digest). A tombstone for a version
// since superseded, or one naming none, deletes nothing: it cannot be
// replayed. The error is a *VersionError of ReasonTombstone.
func CheckTombstone(ts *mcpreadyv1.Tombstone, k Kind, name, heldVersion, heldDigest string) error {
	if ts.GetTargetKind() == string(k) && ts.GetTargetName() == name && ts.GetTargetVersion() == heldVersion && ts.GetTargetDigest() == heldDigest && heldDigest != "" {
		return nil
	}
	return &VersionError{Reason: ReasonTombstone, Kind: k, Name: name, Version: ts.GetTargetVersion(), Digest: ts.GetTargetDigest(), Held: heldVersion, HeldDig: heldDigest}
}
