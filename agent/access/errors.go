// Package access makes a host agent ready to present authority to an
// upstream MCP server, per principal and per call: on 401 it discovers the
// upstream's authorization server (RFC 9728 protected-resource metadata,
// RFC 8414 / OpenID metadata, through the go-sdk's oauthex), selects scopes
// (the challenge's, else scopes_supported; step-up on insufficient_scope
// with a limit), obtains tokens with golang.org/x/oauth2 (client
// credentials for the agent as a service principal, RFC 8693 token exchange
// for a local principal, both with RFC 8707 resource indicators), verifies
// JWT access tokens against the issuer's JWKS (go-jose) and opaque ones by
// RFC 7662 introspection where configured (introspect.go), caches them in
// memory per (principal, upstream, scope set) and refreshes them ahead of
// expiry. Check is the per-call check of decision step 2: issuer, audience,
// scopes against the Policy and the qualified entry, tenant, expiry.
// IdentityVerifier authenticates local clients by JWTs of the
// organisation's identity provider (their tokens are what token exchange
// exchanges).
//
// It must not log, store or return tokens in errors or facts (Facts carry
// issuer, audience, scopes and a lifetime class only), must not persist
// anything, and must not decide routing: it reports typed reasons
// (NotReadyError, Rejection) that the decision and the receipt record.
package access

import (
	"errors"
	"fmt"
)

// Reason is why access is not ready, stable for receipts and errors.
type Reason string

// Reasons of ACCESS_NOT_READY.
const (
	ReasonMetadataInvalid   Reason = "auth-metadata-invalid"
	ReasonASMetadataInvalid Reason = "auth-server-metadata-invalid"
	ReasonIssuerMismatch    Reason = "issuer_mismatch"
	ReasonTokenFailed       Reason = "token-acquisition-failed"
	ReasonNoSubjectToken    Reason = "no-subject-token"
	ReasonSignatureInvalid  Reason = "token-signature-invalid"
	ReasonAudienceMismatch  Reason = "audience_mismatch"
	ReasonScopeExceeded     Reason = "scope_exceeded"
	ReasonExpired           Reason = "token_expired"
	ReasonStepUpExhausted   Reason = "step-up-exhausted"
	ReasonCredentials       Reason = "client-credentials-unavailable"
	ReasonNotConfigured     Reason = "oauth-not-configured"
	// RFC 7662 introspection of opaque tokens (introspect.go).
	ReasonTokenInactive            Reason = "token-inactive"
	ReasonIntrospectionUnavailable Reason = "introspection-unavailable"
	// The authorization-code flow's: the user has not completed it yet,
	// it failed (denied, state mismatch, no code), or no client
	// registration applies at the authorization server.
	ReasonAuthorizationPending Reason = "authorization-pending"
	ReasonAuthorizationFailed  Reason = "authorization-failed"
	ReasonRegistration         Reason = "client-registration-failed"
)

// ErrNotReady is wrapped by every NotReadyError (errors.Is).
var ErrNotReady = errors.New("ACCESS_NOT_READY")

// NotReadyError is an access-layer failure with its reason. Detail never
// contains a token, a secret or upstream error text.
type NotReadyError struct {
	Reason Reason
	Detail string
}

func (e *NotReadyError) Error() string {
	if e.Detail == "" {
		return fmt.Sprintf("ACCESS_NOT_READY: %s", e.Reason)
	}
	return fmt.Sprintf("ACCESS_NOT_READY: %s: %s", e.Reason, e.Detail)
}

// Unwrap makes errors.Is(err, ErrNotReady) hold.
func (e *NotReadyError) Unwrap() error { return ErrNotReady }

func notReady(r Reason, format string, a ...any) error {
	return &NotReadyError{Reason: r, Detail: fmt.Sprintf(format, a...)}
}

// ReasonOf returns the reason of a NotReadyError in err's chain, "" if none.
func ReasonOf(err error) Reason {
	var e *NotReadyError
	if errors.As(err, &e) {
		return e.Reason
	}
	return ""
}
