package sign

import (
	"crypto"
	"errors"
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/mcpready/mcpready/artifact"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
)

// Trust is a verified TrustPolicy: the keys it grants, checked against
// the root key. It is immutable and safe for concurrent use.
//
// Rules Verify applies, after the signature and statement checks:
//   - The root key may sign every kind and every name; it needs no grant.
//   - Any other key must be granted by exactly one KeyGrant (key ids are
//     unique in a policy; each grant's key_id must match its public_key).
//   - A grant is revoked when revoked is true, or when revoked_at is set
//     and not after now (ReasonKeyRevoked).
//   - now must lie within [not_before, not_after] when set (ReasonKeyExpired
//     covers both "not yet valid" and "expired").
//   - The kind must be listed in kinds ("*" allows all kinds); a Tombstone
//     needs both Tombstone and its target_kind (ReasonKindNotAllowed).
//   - The name must match a scope (empty scopes allow all names); for a
//     Tombstone the name checked is target_name (ReasonOutOfScope).
//   - An Evidence's provenance.issuer and observer.independence must be
//     the grant's evidence_issuer and independence (ReasonClaimNotGranted):
//     the claims that acceptedIssuers and requiredIndependence rely on are
//     bound to the key, not to its text. A TrustPolicy that grants a key
//     Evidence without both is refused (ReasonGrantUnbound), so no key
//     may claim what it likes.
//
// Scopes are path.Match patterns over metadata.name, except that "*"
// alone matches every name and a pattern ending in "/*" matches any
// depth below its prefix ("com.example/*" matches "com.example/a/b" but
// not "com.example").
type Trust struct {
	policy *Verified
	ref    TrustRef
	root   *keyVerifier
	grants map[string]*grant
}

type grant struct {
	label     string
	key       *keyVerifier
	allKinds  bool
	kinds     map[artifact.Kind]bool
	scopes    []string
	notBefore time.Time
	notAfter  time.Time
	revoked   bool
	revokedAt time.Time
	reason    string
	// issuer and independence bind an Evidence's claims (both set
	// whenever the grant allows Evidence; "" otherwise).
	issuer, independence string
}

// NewTrust verifies trustPolicyBundle with the root public key and
// returns the Trust it grants. The bundle must be a TrustPolicy signed by
// root (ReasonKindNotAllowed if it is another kind); a policy whose
// provenance.expires_at is before now is rejected with ReasonKeyExpired;
// an invalid grant (bad key, key id not matching the key, duplicate key
// id, unknown kind, bad scope pattern) is ReasonMalformed, and a grant of
// Evidence that binds no issuer or no independence (see
// artifact.CheckEvidenceGrant) is ReasonGrantUnbound.
func NewTrust(trustPolicyBundle []byte, root crypto.PublicKey, now time.Time) (*Trust, error) {
	rk, err := newKeyVerifier(root)
	if err != nil {
		return nil, fmt.Errorf("root key: %w", err)
	}
	e, err := parseBundle(trustPolicyBundle)
	if err != nil {
		return nil, err
	}
	v, err := rk.verify(e)
	if err != nil {
		return nil, err
	}
	if v.Object.Kind != artifact.KindTrustPolicy {
		return nil, verifyErr(ReasonKindNotAllowed, v.KeyID, "trust bundle holds a %s, not a TrustPolicy", v.Object.Kind)
	}
	return newTrust(v, trustPolicyBundle, rk, now)
}

// newTrust builds the Trust from v, the root-verified TrustPolicy in
// trustPolicyBundle (NewTrust's checks after the signature and kind).
func newTrust(v *Verified, trustPolicyBundle []byte, rk *keyVerifier, now time.Time) (*Trust, error) {
	tp := v.Object.Spec.(*mcpreadyv1.TrustPolicy)
	if exp := tp.GetProvenance().GetExpiresAt(); exp != nil && now.After(exp.AsTime()) {
		return nil, verifyErr(ReasonKeyExpired, v.KeyID, "trust policy %q expired at %s", v.Object.Metadata.Name, exp.AsTime().Format(time.RFC3339))
	}
	t := &Trust{policy: v, ref: TrustRef{Name: v.Object.Metadata.Name, Version: v.Object.Version(), Digest: artifact.Digest(trustPolicyBundle)}, root: rk, grants: make(map[string]*grant, len(tp.GetKeys()))}
	for i, kg := range tp.GetKeys() {
		g, err := newGrant(kg)
		if err != nil {
			reason := ReasonMalformed
			if errors.Is(err, artifact.ErrEvidenceGrantUnbound) {
				reason = ReasonGrantUnbound
			}
			return nil, verifyErr(reason, kg.GetKeyId(), "trust policy %q: key grant %d (%q): %v", v.Object.Metadata.Name, i, kg.GetName(), err)
		}
		if _, dup := t.grants[g.key.id]; dup {
			return nil, verifyErr(ReasonMalformed, g.key.id, "trust policy %q: key id granted twice", v.Object.Metadata.Name)
		}
		t.grants[g.key.id] = g
	}
	return t, nil
}

func newGrant(kg *mcpreadyv1.KeyGrant) (*grant, error) {
	if err := artifact.CheckEvidenceGrant(kg); err != nil {
		return nil, err
	}
	pub, err := LoadPublicKey([]byte(kg.GetPublicKey()))
	if err != nil {
		return nil, fmt.Errorf("public_key: %w", err)
	}
	k, err := newKeyVerifier(pub)
	if err != nil {
		return nil, fmt.Errorf("public_key: %w", err)
	}
	if kg.GetKeyId() != k.id {
		return nil, fmt.Errorf("key_id %q does not match public_key (its id is %q)", kg.GetKeyId(), k.id)
	}
	g := &grant{
		label:   kg.GetName(),
		key:     k,
		kinds:   map[artifact.Kind]bool{},
		revoked: kg.GetRevoked(),
		reason:  kg.GetRevocationReason(),
		issuer:  kg.GetEvidenceIssuer(), independence: kg.GetIndependence(),
	}
	for _, s := range kg.GetKinds() {
		if s == "*" {
			g.allKinds = true
			continue
		}
		kind, err := artifact.ParseKind(s)
		if err != nil {
			return nil, err
		}
		g.kinds[kind] = true
	}
	for _, s := range kg.GetScopes() {
		if _, err := path.Match(s, ""); err != nil || s == "" {
			return nil, fmt.Errorf("scope %q is not a valid pattern", s)
		}
		g.scopes = append(g.scopes, s)
	}
	if ts := kg.GetNotBefore(); ts != nil {
		g.notBefore = ts.AsTime()
	}
	if ts := kg.GetNotAfter(); ts != nil {
		g.notAfter = ts.AsTime()
	}
	if ts := kg.GetRevokedAt(); ts != nil {
		g.revokedAt = ts.AsTime()
	}
	return g, nil
}

// Policy returns the verified TrustPolicy itself.
func (t *Trust) Policy() *Verified { return t.policy }

// Verify verifies bundle and checks that its key is the root key or is
// granted, at now, the bundle's kind and name (see Trust for the rules).
// Failures are *VerifyError.
func (t *Trust) Verify(bundle []byte, now time.Time) (*Verified, error) {
	e, err := parseBundle(bundle)
	if err != nil {
		return nil, err
	}
	if e.keyID == t.root.id {
		return t.root.verify(e)
	}
	g, ok := t.grants[e.keyID]
	if !ok {
		return nil, verifyErr(ReasonUnknownKey, e.keyID, "key is not granted by trust policy %q", t.policy.Object.Metadata.Name)
	}
	v, err := g.key.verify(e)
	if err != nil {
		return nil, err
	}
	if err := g.allows(v.Object, now); err != nil {
		return nil, err
	}
	return v, nil
}

// allows checks the grant's revocation, window, kinds and scopes for obj.
func (g *grant) allows(obj *artifact.Object, now time.Time) error {
	id := g.key.id
	if g.revoked || (!g.revokedAt.IsZero() && !now.Before(g.revokedAt)) {
		detail := fmt.Sprintf("key %q is revoked", g.label)
		if g.reason != "" {
			detail += ": " + g.reason
		}
		return verifyErr(ReasonKeyRevoked, id, "%s", detail)
	}
	if !g.notBefore.IsZero() && now.Before(g.notBefore) {
		return verifyErr(ReasonKeyExpired, id, "key %q is not valid before %s", g.label, g.notBefore.Format(time.RFC3339))
	}
	if !g.notAfter.IsZero() && now.After(g.notAfter) {
		return verifyErr(ReasonKeyExpired, id, "key %q expired at %s", g.label, g.notAfter.Format(time.RFC3339))
	}
	kinds := []artifact.Kind{obj.Kind}
	name := obj.Metadata.Name
	if ts, ok := obj.Spec.(*mcpreadyv1.Tombstone); ok {
		target, err := artifact.ParseKind(ts.GetTargetKind())
		if err != nil {
			return verifyErr(ReasonMalformed, id, "tombstone target_kind: %v", err)
		}
		if err := artifact.ValidateName(ts.GetTargetName()); err != nil {
			return verifyErr(ReasonMalformed, id, "tombstone target_name: %v", err)
		}
		kinds = append(kinds, target)
		name = ts.GetTargetName()
	}
	for _, k := range kinds {
		if !g.allKinds && !g.kinds[k] {
			return verifyErr(ReasonKindNotAllowed, id, "key %q may not sign %s", g.label, k)
		}
	}
	if ev, ok := obj.Spec.(*mcpreadyv1.Evidence); ok {
		if ev.GetProvenance().GetIssuer() != g.issuer {
			return verifyErr(ReasonClaimNotGranted, id, "evidence %q claims issuer %q; key %q may claim only %q", name, ev.GetProvenance().GetIssuer(), g.label, g.issuer)
		}
		if ev.GetObserver().GetIndependence() != g.independence {
			return verifyErr(ReasonClaimNotGranted, id, "evidence %q claims independence %q; key %q may claim only %q", name, ev.GetObserver().GetIndependence(), g.label, g.independence)
		}
	}
	if len(g.scopes) == 0 {
		return nil
	}
	for _, s := range g.scopes {
		if scopeMatch(s, name) {
			return nil
		}
	}
	return verifyErr(ReasonOutOfScope, id, "name %q is outside the scopes of key %q (%s)", name, g.label, strings.Join(g.scopes, ", "))
}

// scopeMatch reports whether name matches the scope pattern (see Trust).
func scopeMatch(pattern, name string) bool {
	if pattern == "*" {
		return true
	}
	if prefix, ok := strings.CutSuffix(pattern, "/*"); ok {
		n := strings.Count(prefix, "/") + 1
		parts := strings.SplitN(name, "/", n+1)
		if len(parts) == n+1 {
			ok, _ := path.Match(prefix, strings.Join(parts[:n], "/"))
			return ok
		}
		return false
	}
	ok, _ := path.Match(pattern, name)
	return ok
}
