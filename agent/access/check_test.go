package access

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/mcpready/mcpready/internal/oauthtest"
	"github.com/mcpready/mcpready/readiness"
)

// TestCheck: one case per check; each fails without it.
func TestCheck(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	good := func() *Facts {
		return &Facts{Issuer: "https://as.example", Audience: []string{"https://mcp.example/mcp"}, Scopes: []string{"read"},
			Expiry: now.Add(time.Hour), Tenant: "t1", AuthorizationServers: []string{"https://as.example"}}
	}
	x := &Expect{Resource: "https://mcp.example/mcp", DeclaredIssuers: []string{"https://as.example"}, PermittedIssuers: []string{"https://as.example"},
		PermittedScopes: []string{"read", "write"}, QualifiedScopes: []string{"read"}, Tenants: []string{"t1"}}
	if rj, ok := Check(good(), x, now); !ok {
		t.Fatalf("good token rejected: %+v", rj)
	}
	cases := map[string]struct {
		mut  func(f *Facts, x *Expect)
		want readiness.Code
	}{
		"issuer not named by the resource": {func(f *Facts, _ *Expect) { f.AuthorizationServers = []string{"https://other.example"} }, readiness.CodeIssuerMismatch},
		"issuer not declared":              {func(_ *Facts, x *Expect) { x.DeclaredIssuers = []string{"https://other.example"} }, readiness.CodeIssuerMismatch},
		"issuer not permitted":             {func(_ *Facts, x *Expect) { x.PermittedIssuers = []string{"https://other.example"} }, readiness.CodeIssuerNotPermitted},
		"audience":                         {func(f *Facts, _ *Expect) { f.Audience = []string{"https://mcp.example/other"} }, readiness.CodeAudienceMismatch},
		"no audience":                      {func(f *Facts, _ *Expect) { f.Audience = nil }, readiness.CodeAudienceMismatch},
		"expired":                          {func(f *Facts, _ *Expect) { f.Expiry = now }, readiness.CodeTokenExpired},
		"scope not permitted":              {func(f *Facts, _ *Expect) { f.Scopes = []string{"read", "admin"} }, readiness.CodeScopeNotPermitted},
		"permission drift":                 {func(f *Facts, _ *Expect) { f.Scopes = []string{"read", "write"} }, readiness.CodePermissionDrift},
		"other tenant":                     {func(f *Facts, _ *Expect) { f.Tenant = "t2" }, readiness.CodeTenantMismatch},
		"no tenant claim":                  {func(f *Facts, _ *Expect) { f.Tenant = "" }, readiness.CodeTenantMismatch},
		"entry and policy tenants differ":  {func(_ *Facts, x *Expect) { x.Tenants = []string{"t1", "t2"} }, readiness.CodeTenantMismatch},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			f, xx := good(), *x
			tc.mut(f, &xx)
			rj, ok := Check(f, &xx, now)
			if ok || rj.Code != tc.want {
				t.Fatalf("got %+v %v, want %s", rj, ok, tc.want)
			}
		})
	}
}

func TestLifetimeClass(t *testing.T) {
	now := time.Unix(0, 0)
	for d, want := range map[time.Duration]string{-time.Second: LifetimeExpired, 30 * time.Second: LifetimeMinute, 5 * time.Minute: LifetimeShort, 30 * time.Minute: LifetimeHour, 2 * time.Hour: LifetimeLong} {
		if got := LifetimeClass(now.Add(d), now); got != want {
			t.Errorf("%v: %s, want %s", d, got, want)
		}
	}
}

func FuzzCheck(f *testing.F) {
	f.Add("https://as.example", "https://mcp.example/mcp", "read", "t1", int64(3600))
	f.Fuzz(func(t *testing.T, iss, aud, scope, tenant string, left int64) {
		now := time.Unix(1_800_000_000, 0)
		fa := &Facts{Issuer: iss, Audience: []string{aud}, Scopes: []string{scope}, Tenant: tenant, Expiry: now.Add(time.Duration(left) * time.Second)}
		x := &Expect{Resource: "https://mcp.example/mcp", DeclaredIssuers: []string{"https://as.example"}, QualifiedScopes: []string{"read"}, Tenants: []string{"t1"}}
		rj, ok := Check(fa, x, now)
		if ok && (iss != "https://as.example" || scope != "read" || tenant != "t1" || left <= 0) {
			t.Fatalf("admitted %+v", fa)
		}
		if !ok && rj.Code == "" {
			t.Fatal("rejection without a code")
		}
	})
}

func FuzzParseChallenge(f *testing.F) {
	f.Add(`Bearer error="insufficient_scope", scope="a b", resource_metadata="https://x/.well-known/oauth-protected-resource"`)
	f.Add(`Bearer realm=`)
	f.Fuzz(func(t *testing.T, h string) {
		_ = ParseChallenge(http.Header{"Www-Authenticate": {h}})
	})
}

func FuzzVerify(f *testing.F) {
	f.Add("eyJhbGciOiJSUzI1NiJ9.e30.sig")
	f.Add("not-a-jwt")
	ks := &KeySets{}
	f.Fuzz(func(t *testing.T, tok string) {
		if _, err := ks.Verify(context.Background(), tok, "http://127.0.0.1:1/keys", "https://as.example"); err == nil {
			t.Fatal("an unverifiable token verified")
		}
	})
}

// TestCheckMemo: the memo of a passed check answers only for the same
// token (Facts) and Expect, and never past the token's expiry: another
// token with more scopes, the same token once expired, and the same token
// against a recompiled (narrower) Expect are all checked afresh and
// rejected. Concurrent checks agree with Check (run under -race).
func TestCheckMemo(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	x := Expect{Resource: "https://mcp.example/mcp", QualifiedScopes: []string{"read"}}.Memoized()
	good := &Facts{Issuer: "https://as.example", Audience: []string{"https://mcp.example/mcp"}, Scopes: []string{"read"}, Expiry: now.Add(time.Minute)}
	if _, ok := checkMemo(good, &x, now); !ok {
		t.Fatal("good token rejected")
	}
	if p := x.memo.last.Load(); p == nil || p.f != good {
		t.Fatal("the pass was not remembered")
	}
	drift := &Facts{Issuer: good.Issuer, Audience: good.Audience, Scopes: []string{"read", "write"}, Expiry: good.Expiry}
	if rj, ok := checkMemo(drift, &x, now); ok || rj.Code != readiness.CodePermissionDrift {
		t.Fatalf("another token after a pass: %+v %v", rj, ok)
	}
	if _, ok := checkMemo(good, &x, now); !ok {
		t.Fatal("good token rejected on the second check")
	}
	if rj, ok := checkMemo(good, &x, now.Add(time.Minute)); ok || rj.Code != readiness.CodeTokenExpired {
		t.Fatalf("memoized token past its expiry: %+v %v", rj, ok)
	}
	narrower := Expect{Resource: x.Resource, QualifiedScopes: []string{"list"}}.Memoized() // a new configuration
	if rj, ok := checkMemo(good, &narrower, now); ok || rj.Code != readiness.CodePermissionDrift {
		t.Fatalf("memo outlived its configuration: %+v %v", rj, ok)
	}

	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 1000 {
				f := good
				if (i+j)%2 == 0 {
					f = drift
				}
				_, want := Check(f, &x, now)
				if _, got := checkMemo(f, &x, now); got != want {
					t.Errorf("memo says %v, Check %v", got, want)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// TestGuardSeesTheCurrentGrant: a Guard reads the principal's state through
// the Expect's memo without the lock; it still checks the grant held now,
// not the absence of one seen when the memo was filled.
func TestGuardSeesTheCurrentGrant(t *testing.T) {
	o, oc := serviceClient(t, "read")
	as := oauthtest.Start(t, oauthtest.Options{Clients: []oauthtest.Client{oc}})
	r := newRig(t, as, oauthtest.Resource{}, o)
	c := New(Options{})
	x := Expect{QualifiedScopes: []string{"other"}}.Memoized()
	check := func() (Rejection, bool) {
		g := c.Guard(Principal{Name: "p"}, func(string) (*Upstream, bool) { return &r.upstream, true })
		defer g.Release()
		return g.Check("echo", &x, time.Now())
	}
	if _, ok := check(); !ok {
		t.Fatal("nothing held yet must not reject")
	}
	if _, err := c.Token(context.Background(), Principal{}, &r.upstream); err != nil {
		t.Fatal(err)
	}
	if rj, ok := check(); ok || rj.Code != readiness.CodePermissionDrift {
		t.Fatalf("after a token was obtained: %+v %v, want permission drift (the grant's read is not qualified)", rj, ok)
	}
}
