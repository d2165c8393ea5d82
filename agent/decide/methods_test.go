package decide

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/readiness"
)

// methodFixture: dev (tenant acme) may read and list file:///public/* and
// get and list the prompt "greet" on com.example/docs; every class ("*")
// may complete greet there; intern has tools but no method rule.
func methodFixture() Inputs {
	in := fixture()
	in.Policy.Principals[0].Methods = []*mcpreadyv1.MethodRule{
		{Server: "com.example/*", Allow: []string{"resources/read", "resources/list", "resources/templates/list", "resources/subscribe"}, Resources: []string{"file:///public/*"}},
		{Server: "com.example/docs", Allow: []string{"prompts/*"}, Prompts: []string{"greet"}},
	}
	in.Policy.Principals = append(in.Policy.Principals, &mcpreadyv1.PrincipalRule{PrincipalClass: "*",
		Methods: []*mcpreadyv1.MethodRule{{Server: "com.example/docs", Allow: []string{"completion/complete"}, Prompts: []string{"greet"}}}})
	return in
}

func methodReq(principal, method, name string) MethodRequest {
	return MethodRequest{Method: method, Server: "com.example/docs", Name: name, Principal: principal, Tenant: "acme", Now: t0}
}

func TestAdmitMethod(t *testing.T) {
	s := snap(t, methodFixture())
	for _, tc := range []struct {
		name string
		req  MethodRequest
		code readiness.Code // "" admitted
	}{
		{"read public", methodReq("dev", "resources/read", "file:///public/a"), ""},
		{"read secret", methodReq("dev", "resources/read", "file:///secret/x"), readiness.CodeResourceNotPermitted},
		{"dot-dot", methodReq("dev", "resources/read", "file:///public/../secret/x"), readiness.CodeResourceNotPermitted},
		{"encoded dot-dot", methodReq("dev", "resources/read", "file:///public/%2E%2e/secret/x"), readiness.CodeResourceNotPermitted},
		{"backslash dot-dot", methodReq("dev", "resources/read", `file:///public/..\secret`), readiness.CodeResourceNotPermitted},
		{"subscribe secret", methodReq("dev", "resources/subscribe", "file:///secret/x"), readiness.CodeResourceNotPermitted},
		{"unsubscribe public", methodReq("dev", "resources/unsubscribe", "file:///public/a"), ""},
		{"prompt greet", methodReq("dev", "prompts/get", "greet"), ""},
		{"prompt secret", methodReq("dev", "prompts/get", "secret"), readiness.CodePromptNotPermitted},
		{"prompts on another server", MethodRequest{Method: "prompts/get", Server: "com.example/tickets", Name: "greet", Principal: "dev", Tenant: "acme", Now: t0}, readiness.CodeMethodNotPermitted},
		{"other tenant", MethodRequest{Method: "resources/read", Server: "com.example/docs", Name: "file:///public/a", Principal: "dev", Tenant: "other", Now: t0}, readiness.CodeMethodNotPermitted},
		{"no rule", methodReq("intern", "resources/read", "file:///public/a"), readiness.CodeMethodNotPermitted},
		{"no rule list", methodReq("intern", "resources/list", ""), readiness.CodeMethodNotPermitted},
		{"completion via *", MethodRequest{Method: "completion/complete", Server: "com.example/docs", Name: "greet", Ref: RefPrompt, Principal: "intern", Now: t0}, ""},
		{"completion other prompt", MethodRequest{Method: "completion/complete", Server: "com.example/docs", Name: "x", Ref: RefPrompt, Principal: "intern", Now: t0}, readiness.CodePromptNotPermitted},
		{"completion of a resource", MethodRequest{Method: "completion/complete", Server: "com.example/docs", Name: "file:///public/{x}", Ref: RefResource, Principal: "intern", Now: t0}, readiness.CodeResourceNotPermitted},
		{"completion without ref", MethodRequest{Method: "completion/complete", Server: "com.example/docs", Principal: "intern", Now: t0}, readiness.CodeMethodNotPermitted},
		{"initialize with tools", MethodRequest{Method: "initialize", Server: "com.example/docs", Principal: "nobody", Tools: true, Now: t0}, ""},
		{"initialize with a rule", methodReq("dev", "initialize", ""), ""},
		{"initialize with neither", MethodRequest{Method: "logging/setLevel", Server: "com.example/tickets", Principal: "intern", Now: t0}, readiness.CodeMethodNotPermitted},
		{"initialize by the * rule", methodReq("nobody", "server/discover", ""), ""},
		{"unknown server", MethodRequest{Method: "resources/read", Server: "com.example/none", Name: "file:///public/a", Principal: "dev", Tenant: "acme", Now: t0}, readiness.CodeNotInInventory},
		{"unknown method", methodReq("dev", "resources/delete", "file:///public/a"), readiness.CodeMethodNotPermitted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, rj := s.AdmitMethod(tc.req)
			switch {
			case tc.code == "" && rj != nil:
				t.Fatalf("refused: %v", rj)
			case tc.code != "" && (rj == nil || rj.Code != tc.code):
				t.Fatalf("got %v, want %s", rj, tc.code)
			}
		})
	}
}

// The server must pass the steps that concern a server, whatever the
// rules: a server out of the inventory, of an unapproved owner, outside the
// caller's tenant, or in a denied region serves no method (not even
// housekeeping by a rule).
func TestAdmitMethodServer(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*Inputs, *MethodRequest)
		step   readiness.Step
		code   readiness.Code
	}{
		{"inventory", func(in *Inputs, _ *MethodRequest) { in.Policy.Inventory = []string{"com.other/*"} }, readiness.StepEligibility, readiness.CodeNotInInventory},
		{"expired", func(in *Inputs, _ *MethodRequest) {
			in.Entries["docs-a"].Provenance = &mcpreadyv1.Provenance{ExpiresAt: timestamppb.New(t0.Add(-time.Minute))}
		}, readiness.StepEligibility, readiness.CodeEntryExpired},
		{"client protocol", func(_ *Inputs, req *MethodRequest) { req.ProtocolVersion = "2024-11-05" }, readiness.StepEligibility, readiness.CodeProtocolVersion},
		{"workflow", func(in *Inputs, _ *MethodRequest) { in.Entries["docs-a"].WorkflowAllowlist = []string{"other"} }, readiness.StepEligibility, readiness.CodeWorkflow},
		{"owner", func(in *Inputs, _ *MethodRequest) { in.Policy.ApprovedOwners = []string{"someone-else"} }, readiness.StepTrust, readiness.CodeOwnerNotApproved},
		{"entry tenant", func(in *Inputs, _ *MethodRequest) { in.Entries["docs-a"].TenantClasses = []string{"globex"} }, readiness.StepTrust, readiness.CodeTenant},
		{"denied region", func(in *Inputs, _ *MethodRequest) {
			in.Policy.Residency = &mcpreadyv1.ResidencyRules{DeniedRegions: []string{"eu"}}
		}, readiness.StepResidency, readiness.CodeResidency},
		{"same region", func(in *Inputs, req *MethodRequest) {
			in.Policy.Residency = &mcpreadyv1.ResidencyRules{SameRegionOnly: true}
			req.Region = "us"
		}, readiness.StepResidency, readiness.CodeResidency},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := methodFixture()
			for _, method := range []string{"resources/read", "initialize"} {
				req := methodReq("dev", method, "file:///public/a")
				req.Region, req.Workflow = "eu", "wf"
				if _, rj := snap(t, in).AdmitMethod(req); rj != nil {
					t.Fatalf("%s refused before the change: %v", method, rj)
				}
				tc.mutate(&in, &req)
				_, rj := snap(t, in).AdmitMethod(req)
				if rj == nil || rj.Code != tc.code || rj.Step != tc.step {
					t.Fatalf("%s: got %v, want %s at step %d", method, rj, tc.code, tc.step)
				}
				in = methodFixture()
			}
		})
	}
}

// Listing and reading agree: an item is shown exactly when the request
// that reads (gets) it is admitted, and a rule that grants the listing but
// not the read shows nothing.
func TestMethodListingAgrees(t *testing.T) {
	in := methodFixture()
	in.Policy.Principals[1].Methods = []*mcpreadyv1.MethodRule{{Server: "*", Allow: []string{"resources/list"}, Resources: []string{"*"}}}
	s := snap(t, in)
	items := map[string][]string{
		"resources/list":           {"file:///public/a", "file:///secret/x", "file:///public/../x", "test://doc"},
		"resources/templates/list": {"file:///public/{name}", "file:///{+path}", "file:///public/{a}/{b}", "file:///public/{bad", "file:///public/{x}/../y"},
		"prompts/list":             {"greet", "secret"},
	}
	for _, principal := range []string{"dev", "intern"} {
		for list, names := range items {
			acc, rj := s.AdmitMethod(methodReq(principal, list, ""))
			if rj != nil {
				if principal == "dev" {
					t.Fatalf("%s %s: %v", principal, list, rj)
				}
				continue
			}
			get, kind := listed(list)
			for _, n := range names {
				_, rj := s.AdmitMethod(methodReq(principal, get, n))
				refused := rj != nil
				if kind == kindTemplate {
					// A template is shown when every expansion may be read.
					g, ok := templateGlob(n)
					_, rj = s.AdmitMethod(methodReq(principal, get, g))
					refused = rj != nil || !ok
				}
				if acc.Shows(n) == refused {
					t.Errorf("%s %s %q: shown %v, read refused %v", principal, list, n, acc.Shows(n), refused)
				}
			}
		}
	}
	acc, _ := s.AdmitMethod(methodReq("intern", "resources/list", ""))
	if acc.Shows("test://doc") {
		t.Error("a listing grant without a read grant shows a resource")
	}
}

func TestTemplateGlob(t *testing.T) {
	for tpl, want := range map[string]string{
		"file:///public/{name}":         "file:///public/*",
		"file:///{+path}":               "file:///*",
		"db://{schema}/{table}{?limit}": "db://*/**",
		"plain://x":                     "plain://x",
		"bad://{x":                      "",
		"bad://x}":                      "",
		"bad://{{x}}":                   "",
	} {
		got, ok := templateGlob(tpl)
		if got != want || ok != (want != "") {
			t.Errorf("templateGlob(%q) = %q, %v; want %q", tpl, got, ok, want)
		}
	}
}

// FuzzTemplateCovered: whenever a resources pattern covers a template's
// glob, it matches every expansion of the template (each expression
// replaced by the same fill), so a listed template never leads to a URI
// the rule does not reach.
func FuzzTemplateCovered(f *testing.F) {
	f.Add("file:///public/*", "file:///public/{name}", "a/../b")
	f.Add("file:///public/*/x", "file:///public/{a}/x", "")
	f.Add("*", "{x}", "}")
	f.Add("db://*/t", "db://{s}/{t}", "a")
	f.Fuzz(func(t *testing.T, pattern, tpl, fill string) {
		g, ok := templateGlob(tpl)
		if !ok || !match(pattern, g) {
			return
		}
		var b strings.Builder
		open := false
		for _, c := range []byte(tpl) {
			switch {
			case c == '{':
				open = true
			case c == '}':
				open = false
				b.WriteString(fill)
			case !open:
				b.WriteByte(c)
			}
		}
		if !match(pattern, b.String()) {
			t.Fatalf("pattern %q covers template %q (glob %q) but not its expansion %q", pattern, tpl, g, b.String())
		}
	})
}

// BenchmarkAdmitMethod: one resources/read decision, and one
// resources/list admission filtering 100 listed URIs.
func BenchmarkAdmitMethod(b *testing.B) {
	s := snap(b, methodFixture())
	b.Run("read", func(b *testing.B) {
		req := methodReq("dev", "resources/read", "file:///public/docs/page-42")
		b.ReportAllocs()
		for b.Loop() {
			if _, rj := s.AdmitMethod(req); rj != nil {
				b.Fatal(rj)
			}
		}
	})
	b.Run("list100", func(b *testing.B) {
		uris := make([]string, 100)
		for i := range uris {
			uris[i] = fmt.Sprintf("file:///%s/docs/page-%d", []string{"public", "secret"}[i%2], i)
		}
		req := methodReq("dev", "resources/list", "")
		b.ReportAllocs()
		for b.Loop() {
			acc, rj := s.AdmitMethod(req)
			if rj != nil {
				b.Fatal(rj)
			}
			n := 0
			for _, u := range uris {
				if acc.Shows(u) {
					n++
				}
			}
			if n != 50 {
				b.Fatal(n)
			}
		}
	})
}

// dotSegmentsRef is dotSegments written plainly, for FuzzDotSegments.
func dotSegmentsRef(uri string) bool {
	for _, sep := range []string{"%2f", "%2F", "%5c", "%5C", "\\"} {
		uri = strings.ReplaceAll(uri, sep, "/")
	}
	for _, seg := range strings.Split(uri, "/") {
		seg = strings.ReplaceAll(strings.ReplaceAll(seg, "%2e", "."), "%2E", ".")
		if seg == "." || seg == ".." {
			return true
		}
	}
	return false
}

func TestDotSegments(t *testing.T) {
	for uri, want := range map[string]bool{
		"file:///public/a": false, "file:///public/../x": true, "file:///public/./x": true, "file:///public/..": true,
		"file:///public/%2E%2e/x": true, "file:///public/.%2e": true, `file:///public\..\x`: true,
		"file:///public/...": false, "file:///public/.hidden": false, "file:///public/a..b": false, "%2e": true,
		"file:///public/..%2fsecret": true, "file:///public/..%5Csecret": true, "file:///public/%2e%2E%2Fx": true,
	} {
		if got := dotSegments(uri); got != want {
			t.Errorf("dotSegments(%q) = %v, want %v", uri, got, want)
		}
	}
}

// FuzzDotSegments: the allocation-free scan agrees with the plain one.
func FuzzDotSegments(f *testing.F) {
	for _, s := range []string{"file:///a/../b", "%2e%2E", `a\.\b`, "x/%2", "/./", "a/%2e%2", ".%2e%2e"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, uri string) {
		if got, want := dotSegments(uri), dotSegmentsRef(uri); got != want {
			t.Fatalf("dotSegments(%q) = %v, the plain scan says %v", uri, got, want)
		}
	})
}
