package decide

import (
	"testing"
	"time"

	"github.com/mcpready/mcpready/agent/access"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/readiness"
)

// tokens holds the facts of the token each server would be presented and
// checks them with access.Check, as *access.Guard does for cached grants.
type tokens map[string]*access.Facts

func (tk tokens) Check(server string, x *access.Expect, now time.Time) (access.Rejection, bool) {
	f := tk[server]
	if f == nil {
		return access.Rejection{}, true
	}
	return access.Check(f, x, now)
}

// TestAccessCheckPerCall: the token about to be presented is checked at
// step 2 against the Declaration, the Policy and the qualified entry; a
// failing candidate is ineligible and fallback proceeds to the next member
// of the class (before: tokens were never looked at, docs-a was routed).
func TestAccessCheckPerCall(t *testing.T) {
	in := fixture()
	in.Declarations["com.example/docs"] = &mcpreadyv1.Declaration{ServerName: "com.example/docs",
		Auth: &mcpreadyv1.DeclaredAuth{AuthorizationServers: []string{"https://as.example"}}}
	s := snap(t, in)
	good := func() *access.Facts {
		return &access.Facts{Issuer: "https://as.example", Audience: []string{"https://a.example/mcp"}, Scopes: []string{"docs:read"}, Expiry: t0.Add(time.Hour)}
	}
	if d := s.Decide(withAccess(tokens{"com.example/docs": good()}), nil); len(d.Routes) != 2 || d.Routes[0].Entry != "docs-b" && d.Routes[1].Entry != "docs-b" {
		t.Fatalf("good token: routes %v", routeNames(d))
	}
	cases := map[string]struct {
		mut  func(*access.Facts)
		want readiness.Code
	}{
		"foreign issuer":   {func(f *access.Facts) { f.Issuer = "https://evil-as.example" }, readiness.CodeIssuerMismatch},
		"wrong audience":   {func(f *access.Facts) { f.Audience = []string{"https://b.example/mcp"} }, readiness.CodeAudienceMismatch},
		"expired":          {func(f *access.Facts) { f.Expiry = t0 }, readiness.CodeTokenExpired},
		"beyond policy":    {func(f *access.Facts) { f.Scopes = []string{"docs:read", "admin"} }, readiness.CodeScopeNotPermitted},
		"permission drift": {func(f *access.Facts) { f.Scopes = []string{"docs:read", "tickets:write"} }, readiness.CodePermissionDrift},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f := good()
			tc.mut(f)
			d := s.Decide(withAccess(tokens{"com.example/docs": f}), nil)
			c := candidate(d, "docs-a")
			if readiness.Code(c.GetRejectionCode()) != tc.want || c.GetRejectedAtStep() != readiness.StepTrust {
				t.Fatalf("docs-a = %v, want %s at step 2", c, tc.want)
			}
			if got := routeNames(d); len(got) != 1 || got[0] != "docs-b" {
				t.Fatalf("routes %v, want fallback to docs-b", got)
			}
		})
	}
}

func withAccess(g AccessGuard) Request {
	r := baseReq()
	r.Access = g
	return r
}

// TestAccessTenantRequired: the Policy's auth.requiredTenant applies to
// every candidate's token; a token of another tenant, or without the
// tenant claim, makes the candidate ineligible at step 2 (tenant_mismatch)
// and fallback proceeds. Failed before: the tenant was never compared.
func TestAccessTenantRequired(t *testing.T) {
	in := fixture()
	in.Policy.Auth.RequiredTenant = "t1"
	s := snap(t, in)
	for tenant, want := range map[string]readiness.Code{"t1": "", "t2": readiness.CodeTenantMismatch, "": readiness.CodeTenantMismatch} {
		f := &access.Facts{Issuer: "https://as.example", Audience: []string{"https://a.example/mcp"}, Scopes: []string{"docs:read"}, Expiry: t0.Add(time.Hour), Tenant: tenant}
		d := s.Decide(withAccess(tokens{"com.example/docs": f}), nil)
		if c := candidate(d, "docs-a"); readiness.Code(c.GetRejectionCode()) != want {
			t.Errorf("tenant %q: docs-a = %v, want %q", tenant, c, want)
		}
	}
}
