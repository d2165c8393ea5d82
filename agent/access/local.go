package access

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mcpready/mcpready/agent/config"
)

// ErrLocalIdentity wraps every refusal of a local client's JWT; it also
// wraps config.ErrUnauthenticated.
var ErrLocalIdentity = fmt.Errorf("%w: identity provider token refused", config.ErrUnauthenticated)

// IdentityVerifier authenticates local clients by JWTs of the
// organisation's identity provider (config.IdentityProvider): signature
// against its JWKS, issuer, audience and expiry, then its claims mapped to
// an Identity. It is safe for concurrent use.
type IdentityVerifier struct {
	idp  config.IdentityProvider
	keys KeySets
	now  func() time.Time

	mu       sync.Mutex
	verified map[[32]byte]verifiedIdentity // by SHA-256 of the token
}

type verifiedIdentity struct {
	id     config.Identity
	expiry time.Time
}

// maxVerified bounds the cache of verified tokens (cleared when full).
const maxVerified = 4096

// NewIdentityVerifier returns the verifier of idp; hc (nil: the default
// client) fetches the JWKS, now (nil: time.Now) is the clock.
func NewIdentityVerifier(idp config.IdentityProvider, hc *http.Client, now func() time.Time) *IdentityVerifier {
	if now == nil {
		now = time.Now
	}
	return &IdentityVerifier{idp: idp, keys: KeySets{HTTP: hc}, now: now}
}

// IdentityPrefix starts the Name of every identity the identity provider
// authenticated (configured principals may not use it).
const IdentityPrefix = config.IdentityProviderPrefix

// LooksLikeJWT reports whether tok has the three-part compact form.
func LooksLikeJWT(tok string) bool { return strings.Count(tok, ".") == 2 }

// Authenticate verifies tok and maps its claims: Name IdentityPrefix+sub, the
// principal class claim (required; within PrincipalClasses when listed),
// the tenant class and workflows claims. Errors wrap ErrLocalIdentity and
// never contain the token.
func (v *IdentityVerifier) Authenticate(ctx context.Context, tok string) (config.Identity, error) {
	sum := sha256.Sum256([]byte(tok))
	now := v.now()
	v.mu.Lock()
	hit, ok := v.verified[sum]
	v.mu.Unlock()
	if ok && hit.expiry.After(now) {
		return hit.id, nil
	}
	vi, err := v.claims(ctx, tok, now)
	if err != nil {
		return config.Identity{}, err
	}
	v.mu.Lock()
	if len(v.verified) >= maxVerified || v.verified == nil {
		v.verified = map[[32]byte]verifiedIdentity{}
	}
	v.verified[sum] = vi
	v.mu.Unlock()
	return vi.id, nil
}

func (v *IdentityVerifier) claims(ctx context.Context, tok string, now time.Time) (verifiedIdentity, error) {
	cl, err := v.keys.Verify(ctx, tok, v.idp.JWKSURL, v.idp.Issuer)
	if err != nil {
		return verifiedIdentity{}, fmt.Errorf("%w: %s", ErrLocalIdentity, ReasonOf(err))
	}
	return identityOf(cl, &v.idp, now)
}

// identityOf maps the claims of a verified token to its identity.
func identityOf(cl *Claims, idp *config.IdentityProvider, now time.Time) (verifiedIdentity, error) {
	switch {
	case !slices.Contains(cl.Audience, idp.Audience):
		return verifiedIdentity{}, fmt.Errorf("%w: %s", ErrLocalIdentity, ReasonAudienceMismatch)
	case !cl.Expiry.After(now):
		return verifiedIdentity{}, fmt.Errorf("%w: %s", ErrLocalIdentity, ReasonExpired)
	case cl.Subject == "":
		return verifiedIdentity{}, fmt.Errorf("%w: no subject", ErrLocalIdentity)
	}
	names := idp.Claims
	pc, _ := cl.Extra[orDefault(names.PrincipalClass, "principal_class")].(string)
	if pc == "" {
		return verifiedIdentity{}, fmt.Errorf("%w: no principal class claim", ErrLocalIdentity)
	}
	if len(idp.PrincipalClasses) > 0 && !slices.Contains(idp.PrincipalClasses, pc) {
		return verifiedIdentity{}, fmt.Errorf("%w: principal class %q is not permitted", ErrLocalIdentity, pc)
	}
	id := config.Identity{Name: IdentityPrefix + cl.Subject, PrincipalClass: pc}
	id.TenantClass, _ = cl.Extra[orDefault(names.TenantClass, "tenant_class")].(string)
	switch w := cl.Extra[orDefault(names.Workflows, "workflows")].(type) {
	case string:
		id.Workflows = strings.Fields(w)
	case []any:
		for _, x := range w {
			s, ok := x.(string)
			if !ok {
				return verifiedIdentity{}, fmt.Errorf("%w: workflows claim is not a list of strings", ErrLocalIdentity)
			}
			id.Workflows = append(id.Workflows, s)
		}
	case nil:
	default:
		return verifiedIdentity{}, errors.Join(ErrLocalIdentity, errors.New("workflows claim is neither a string nor a list"))
	}
	return verifiedIdentity{id, cl.Expiry}, nil
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}
