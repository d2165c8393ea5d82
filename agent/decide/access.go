package decide

// Step 2's per-call access check: the token the call would present,
// checked by the access layer against facts compiled here.

import (
	"slices"
	"strings"
	"time"

	"github.com/mcpready/mcpready/agent/access"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
)

// AccessGuard checks, per call and without I/O, the token a route's
// upstream would be presented (Request.Access); *access.Guard implements
// it. A rejection makes the candidate ineligible at step 2, so fallback
// within the class proceeds.
type AccessGuard interface {
	Check(server string, x *access.Expect, now time.Time) (access.Rejection, bool)
}

// accessExpect is what a call to re may present: the Declaration's
// authorization servers, the Policy's permitted issuers and scopes, the
// entry's qualified scopes and permission set, the tenant both require,
// and its endpoint as the resource.
func accessExpect(p *mcpreadyv1.Policy, re *mcpreadyv1.RegistryEntry, decl *mcpreadyv1.Declaration) access.Expect {
	x := access.Expect{
		DeclaredIssuers:  decl.GetAuth().GetAuthorizationServers(),
		PermittedIssuers: p.GetAuth().GetPermittedIssuers(),
		PermittedScopes:  p.GetAuth().GetPermittedScopes(),
	}
	if q := append(slices.Clone(re.GetAuthority().GetScopes()), re.GetAuthority().GetPermissionSet()...); len(q) > 0 {
		x.QualifiedScopes = q
	}
	for _, t := range []string{p.GetAuth().GetRequiredTenant(), re.GetAuthority().GetTenant()} {
		if t != "" && !slices.Contains(x.Tenants, t) {
			x.Tenants = append(x.Tenants, t)
		}
	}
	if ep := re.GetIdentity().GetEndpoint(); strings.HasPrefix(ep, "https://") || strings.HasPrefix(ep, "http://") {
		x.Resource = ep
	}
	return x
}

// AccessExpect is what a call to the named entry may present (the facts
// step 2 checks the token against), nil for an unknown entry. The caller
// must not modify it.
func (s *Snapshot) AccessExpect(entry string) *access.Expect {
	if i := s.indexOf(entry); int(i) < len(s.entries) && s.entries[i].name == entry {
		return &s.entries[i].access
	}
	return nil
}
