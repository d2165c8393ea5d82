package access

import (
	"slices"
	"sync/atomic"
	"time"

	"github.com/mcpready/mcpready/readiness"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// Expect is what one call may present: the facts of the Policy, the
// provider's Declaration and the qualified registry entry. A nil or empty
// list constrains nothing, except DeclaredIssuers (see Check).
type Expect struct {
	// Resource is the upstream resource identifier the token must be for.
	Resource string
	// DeclaredIssuers are the Declaration's authorization servers.
	DeclaredIssuers []string
	// PermittedIssuers are the Policy's auth.permitted_issuers.
	PermittedIssuers []string
	// PermittedScopes are the Policy's auth.permitted_scopes.
	PermittedScopes []string
	// QualifiedScopes are the entry's qualified authority (scopes and
	// permission set); a token granting more is permission drift.
	QualifiedScopes []string
	// Tenants the token's tenant must equal: the Policy's
	// auth.required_tenant and the entry's authority.tenant, when set.
	Tenants []string

	memo *memo // nil: every check is computed (Memoized)
}

// memo remembers the last token an Expect admitted, so that checking the
// same token against the same Expect again costs one atomic load.
// It also remembers which upstream the entry's server resolved to and
// the state of the last owner checked there (Guard.lookup).
type memo struct {
	last atomic.Pointer[passed]
	up   atomic.Pointer[resolved]
	pair atomic.Pointer[pairRef]
}

// pairRef is the state of one owner (Owner) at the upstream a Client
// resolved the entry's server to.
type pairRef struct {
	c     *Client
	up    *Upstream
	owner string
	pr    *pair
}

// resolved is the upstream a Client's resolve named for the server.
type resolved struct {
	c  *Client
	up *Upstream
	ok bool
}

// passed is a token (its Grant's Facts: one per token obtained, never the
// token itself) that passed Check, valid until its expiry (unix nanos).
type passed struct {
	f     *Facts
	until int64
}

// Memoized returns x with a memo of the last token it admitted. An Expect
// is memoized where it lives as long as one verified configuration (the
// decision snapshot's entry): a new configuration compiles new Expects,
// so a memo never outlives the Policy, Declaration and entry it was
// checked against, and never admits a token past its expiry. Check is a
// function of the token's Facts, x and the time only through the expiry,
// which is why the memo is exact.
func (x Expect) Memoized() Expect {
	x.memo = new(memo)
	return x
}

// checkMemo is Check, answered from x's memo when f passed it before and
// has not expired; a pass is remembered (the only allocation, once per
// token and Expect).
func checkMemo(f *Facts, x *Expect, now time.Time) (Rejection, bool) {
	m := x.memo
	if m == nil {
		return Check(f, x, now)
	}
	if p := m.last.Load(); p != nil && p.f == f && now.UnixNano() < p.until {
		return Rejection{}, true
	}
	rj, ok := Check(f, x, now)
	if ok {
		m.last.Store(&passed{f: f, until: f.Expiry.UnixNano()})
	}
	return rj, ok
}

// Facts are what the agent knows of the token it is about to present, and
// what receipts record instead of the token.
type Facts struct {
	Issuer   string
	Audience []string
	Scopes   []string
	Expiry   time.Time
	// Tenant is the value of the upstream's tenant claim
	// (config.OAuth.TenantClaim), "" when not configured or absent.
	Tenant string
	// AuthorizationServers the protected resource's metadata named.
	AuthorizationServers []string
	// Unverified: the token was not verified (tokenVerification
	// unverified); the facts are the token response's.
	Unverified bool
}

// Lifetime classes of a token's remaining lifetime (receipts record the
// class, never the expiry itself).
const (
	LifetimeExpired = "expired"
	LifetimeMinute  = "under-1m"
	LifetimeShort   = "under-10m"
	LifetimeHour    = "under-1h"
	LifetimeLong    = "1h-or-more"
)

// LifetimeClass classifies the time left until expiry.
func LifetimeClass(expiry, now time.Time) string {
	switch left := expiry.Sub(now); {
	case left <= 0:
		return LifetimeExpired
	case left < time.Minute:
		return LifetimeMinute
	case left < 10*time.Minute:
		return LifetimeShort
	case left < time.Hour:
		return LifetimeHour
	}
	return LifetimeLong
}

// Rejection is a failed per-call check: a step-2 rejection code and a
// detail without the token.
type Rejection struct {
	Code   readiness.Code
	Detail string
}

// Check is the per-call access check of decision step 2 for the token
// described by f: its issuer is the authorization server the protected
// resource names and one the Declaration declares (when it declares any),
// and a permitted issuer; its audience is the upstream resource; its
// scopes are within the Policy's permitted scopes and within the entry's
// qualified authority (more is permission drift); its tenant is the one
// required; it has not expired at now. It does no I/O and does not allocate on success.
func Check(f *Facts, x *Expect, now time.Time) (Rejection, bool) {
	if rj, ok := checkIssuer(f.Issuer, f.AuthorizationServers, x); !ok {
		return rj, false
	}
	switch {
	case x.Resource != "" && !oauthex.MatchesResource(f.Audience, x.Resource):
		return Rejection{readiness.CodeAudienceMismatch, "the token's audience is not the upstream resource"}, false
	case !f.Expiry.After(now):
		return Rejection{readiness.CodeTokenExpired, "the token expired"}, false
	}
	for _, t := range x.Tenants {
		if f.Tenant != t {
			return Rejection{readiness.CodeTenantMismatch, "the token's tenant claim is not the required tenant"}, false
		}
	}
	for _, sc := range f.Scopes {
		if len(x.PermittedScopes) > 0 && !slices.Contains(x.PermittedScopes, sc) {
			return Rejection{readiness.CodeScopeNotPermitted, "the token grants scope " + sc + " beyond the permitted scopes"}, false
		}
		if len(x.QualifiedScopes) > 0 && !slices.Contains(x.QualifiedScopes, sc) {
			return Rejection{readiness.CodePermissionDrift, "the token grants scope " + sc + " beyond the qualified permission set"}, false
		}
	}
	return Rejection{}, true
}

// checkIssuer: issuer is among the authorization servers the protected
// resource names (when known), those the Declaration declares (when it
// declares any) and the permitted issuers (when the Policy lists any).
func checkIssuer(issuer string, named []string, x *Expect) (Rejection, bool) {
	switch {
	case len(named) > 0 && !slices.Contains(named, issuer):
		return Rejection{readiness.CodeIssuerMismatch, "the issuer is not an authorization server the protected resource names"}, false
	case len(x.DeclaredIssuers) > 0 && !slices.Contains(x.DeclaredIssuers, issuer):
		return Rejection{readiness.CodeIssuerMismatch, "the issuer is not an authorization server the Declaration declares"}, false
	case len(x.PermittedIssuers) > 0 && !slices.Contains(x.PermittedIssuers, issuer):
		return Rejection{readiness.CodeIssuerNotPermitted, "the issuer is not a permitted issuer"}, false
	}
	return Rejection{}, true
}
