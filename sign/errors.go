package sign

import (
	"errors"
	"fmt"
)

// Reason says why a bundle failed verification.
type Reason string

// The verification failure reasons.
const (
	// ReasonMalformed: the bundle, envelope, statement or predicate does
	// not parse (truncated, unknown fields, wrong media type, not
	// canonical, not a valid artifact).
	ReasonMalformed Reason = "malformed"
	// ReasonUnsigned: the envelope carries no signature.
	ReasonUnsigned Reason = "unsigned"
	// ReasonBadSignature: the signature does not verify over the exact
	// payload and payload type with the key.
	ReasonBadSignature Reason = "bad-signature"
	// ReasonUnknownKey: the bundle's key id (publicKey.hint) is not the
	// given key, nor the root key, nor granted by the trust policy.
	ReasonUnknownKey Reason = "unknown-key"
	// ReasonKindNotAllowed: the key is not granted this artifact kind.
	ReasonKindNotAllowed Reason = "kind-not-allowed"
	// ReasonOutOfScope: the artifact's name is outside the key's scopes.
	ReasonOutOfScope Reason = "out-of-scope"
	// ReasonKeyExpired: the key is outside its validity window (expired
	// or not yet valid), or the trust policy itself has expired.
	ReasonKeyExpired Reason = "key-expired"
	// ReasonKeyRevoked: the trust policy revokes the key.
	ReasonKeyRevoked Reason = "key-revoked"
	// ReasonClaimNotGranted: an Evidence claims an issuer or an
	// independence class other than its key's grant
	// (KeyGrant.evidence_issuer, KeyGrant.independence).
	ReasonClaimNotGranted Reason = "claim-not-granted"
	// ReasonGrantUnbound: a TrustPolicy grants a key Evidence without
	// binding its claims (artifact.ErrEvidenceGrantUnbound); the whole
	// TrustPolicy is refused.
	ReasonGrantUnbound Reason = "evidence-grant-unbound"
	// ReasonPayloadType: the envelope is not an in-toto statement, or
	// its predicateType is not an mcpready kind or disagrees with the
	// predicate's kind.
	ReasonPayloadType Reason = "payload-type"
	// ReasonDigestMismatch: the statement's subject does not match the
	// predicate (digest or name), or the predicate is not canonical.
	ReasonDigestMismatch Reason = "digest-mismatch"
)

// VerifyError is a verification failure with its typed reason.
type VerifyError struct {
	Reason Reason
	// KeyID is the bundle's key id, when known.
	KeyID string
	// Detail is a human-readable explanation.
	Detail string
}

func (e *VerifyError) Error() string {
	msg := "verification failed: " + string(e.Reason)
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	if e.KeyID != "" {
		msg += " (key " + e.KeyID + ")"
	}
	return msg
}

// ReasonOf returns the Reason of the *VerifyError in err's chain, or ""
// if err is nil or not a verification failure.
func ReasonOf(err error) Reason {
	var ve *VerifyError
	if errors.As(err, &ve) {
		return ve.Reason
	}
	return ""
}

func verifyErr(r Reason, keyID, format string, args ...any) *VerifyError {
	return &VerifyError{Reason: r, KeyID: keyID, Detail: fmt.Sprintf(format, args...)}
}
