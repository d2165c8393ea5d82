package decide

import (
	"slices"
	"testing"

	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/readiness"
)

// Evidence observed under other conditions than a request's (another
// region, another protocol version, another registry revision, another
// principal or tenant class named in its subject) does not speak for that
// request: before, any of them counted, so evidence gathered from one
// region's hosts, or against an older registry record, ranked and admitted
// routes everywhere.
func TestEvidenceConditions(t *testing.T) {
	cases := []struct {
		name    string
		mutate  func(ev *mcpreadyv1.Evidence, in *Inputs)
		req     func(r *Request)
		applies bool
	}{
		{"no conditions", func(ev *mcpreadyv1.Evidence, in *Inputs) {}, nil, true},
		{"same region", func(ev *mcpreadyv1.Evidence, in *Inputs) { ev.Region = "eu" }, nil, true},
		{"other region", func(ev *mcpreadyv1.Evidence, in *Inputs) { ev.Region = "us" }, nil, false},
		{"region on a host with none", func(ev *mcpreadyv1.Evidence, in *Inputs) { ev.Region = "eu" }, func(r *Request) { r.Region = "" }, false},
		{"subject region", func(ev *mcpreadyv1.Evidence, in *Inputs) { ev.Subject.Region = "eu" }, nil, true},
		{"other subject region", func(ev *mcpreadyv1.Evidence, in *Inputs) { ev.Subject.Region = "us" }, nil, false},
		{"regions disagree", func(ev *mcpreadyv1.Evidence, in *Inputs) { ev.Region, ev.Subject.Region = "eu", "us" }, nil, false},
		{"same protocol", func(ev *mcpreadyv1.Evidence, in *Inputs) { ev.ProtocolVersion = "2025-11-25" }, nil, true},
		{"other protocol", func(ev *mcpreadyv1.Evidence, in *Inputs) { ev.ProtocolVersion = "2025-06-18" }, nil, false},
		{"subject protocols include it", func(ev *mcpreadyv1.Evidence, in *Inputs) {
			ev.Subject.ProtocolVersions = []string{"2025-06-18", "2025-11-25"}
		}, nil, true},
		{"subject protocols exclude it", func(ev *mcpreadyv1.Evidence, in *Inputs) { ev.Subject.ProtocolVersions = []string{"2025-06-18"} }, nil, false},
		{"same registry revision", func(ev *mcpreadyv1.Evidence, in *Inputs) {
			ev.Subject.RegistryRecordVersion = "3"
			in.Entries["docs-a"].Provenance = &mcpreadyv1.Provenance{Version: "3"}
		}, nil, true},
		{"older registry revision", func(ev *mcpreadyv1.Evidence, in *Inputs) {
			ev.Subject.RegistryRecordVersion = "2"
			in.Entries["docs-a"].Provenance = &mcpreadyv1.Provenance{Version: "3"}
		}, nil, false},
		{"subject principal", func(ev *mcpreadyv1.Evidence, in *Inputs) { ev.Subject.PrincipalClass = "dev" }, nil, true},
		{"other subject principal", func(ev *mcpreadyv1.Evidence, in *Inputs) { ev.Subject.PrincipalClass = "intern" }, nil, false},
		{"principals disagree", func(ev *mcpreadyv1.Evidence, in *Inputs) {
			ev.PrincipalClass, ev.Subject.PrincipalClass = "dev", "intern"
		}, nil, false},
		{"subject tenant", func(ev *mcpreadyv1.Evidence, in *Inputs) { ev.Subject.TenantClass = "acme" }, nil, true},
		{"other subject tenant", func(ev *mcpreadyv1.Evidence, in *Inputs) { ev.Subject.TenantClass = "globex" }, nil, false},
		{"tenants disagree", func(ev *mcpreadyv1.Evidence, in *Inputs) { ev.TenantClass, ev.Subject.TenantClass = "globex", "acme" }, nil, false},
		{"same auth class", func(ev *mcpreadyv1.Evidence, in *Inputs) { ev.AuthClass = readiness.AuthKeyless }, authClasses, true},
		{"other auth class", func(ev *mcpreadyv1.Evidence, in *Inputs) { ev.AuthClass = readiness.AuthBearer }, authClasses, false},
		{"keyless evidence, token upstream", func(ev *mcpreadyv1.Evidence, in *Inputs) { ev.AuthClass = readiness.AuthKeyless },
			func(r *Request) {
				r.AuthClass = func(server, endpoint string) string { return readiness.AuthOAuth("client_credentials") }
			}, false},
		{"auth class, endpoint called another way", func(ev *mcpreadyv1.Evidence, in *Inputs) {
			ev.AuthClass = readiness.AuthKeyless
			in.Entries["docs-a"].Identity.Endpoint = "https://b.example/mcp"
			ev.Subject.Endpoint = ""
		}, authClasses, false},
		{"auth class, agent's unknown", func(ev *mcpreadyv1.Evidence, in *Inputs) { ev.AuthClass = readiness.AuthKeyless }, nil, false},
		{"no auth class, agent's unknown", func(ev *mcpreadyv1.Evidence, in *Inputs) {}, nil, true},
		{"input class, call in it", bulkEvidence(""), bulkArgs, true},
		{"input class, call in another", bulkEvidence(""), func(r *Request) { r.Arguments = []byte(`{"ids":[1]}`) }, false},
		{"input class, call without arguments", bulkEvidence(""), nil, false},
		{"input class, rule for other tools", bulkEvidence("com.example/other/*"), bulkArgs, false},
		{"input class, rule for this tool", bulkEvidence("com.example/docs/docs.*"), bulkArgs, true},
		{"input class, earlier rule cannot be evaluated", func(ev *mcpreadyv1.Evidence, in *Inputs) {
			bulkEvidence("")(ev, in)
			in.Policy.InputClasses = append([]*mcpreadyv1.InputClassRule{{Name: "odd", When: "args.missing.field > 1"}}, in.Policy.InputClasses...)
		}, bulkArgs, true},
		{"input class, earlier rule holds", func(ev *mcpreadyv1.Evidence, in *Inputs) {
			bulkEvidence("")(ev, in)
			in.Policy.InputClasses = append([]*mcpreadyv1.InputClassRule{{Name: "any-ids", When: "has(args.ids)"}}, in.Policy.InputClasses...)
		}, bulkArgs, false},
		{"no input class, call in one", func(ev *mcpreadyv1.Evidence, in *Inputs) {
			bulkEvidence("")(ev, in)
			ev.Subject.InputClass = ""
		}, bulkArgs, false},
		{"no input class, call in none", func(ev *mcpreadyv1.Evidence, in *Inputs) {
			bulkEvidence("")(ev, in)
			ev.Subject.InputClass = ""
		}, func(r *Request) { r.Arguments = []byte(`{"ids":[1]}`) }, true},
		{"input class, tool without classes", func(ev *mcpreadyv1.Evidence, in *Inputs) { ev.Subject.InputClass = "bulk" }, bulkArgs, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := fixture()
			in.Policy.Evidence.OnUnknown = mcpreadyv1.UnknownEvidenceAction_UNKNOWN_EVIDENCE_ACTION_DENY
			tc.mutate(in.Evidence["ev-a"], &in)
			req := baseReq()
			req.Tool = "com.example/docs/docs.lookup"
			if tc.req != nil {
				tc.req(&req)
			}
			d := snap(t, in).Decide(req, nil)
			c := candidate(d, "docs-a")
			if tc.applies {
				if len(d.Routes) != 1 || d.Routes[0].EvidenceID != "ev-a" {
					t.Fatalf("want admitted on ev-a: routes %+v, candidate %v", d.Routes, c)
				}
				if want := in.Evidence["ev-a"].Subject.InputClass; want != "" && d.Routes[0].InputClass != want {
					t.Fatalf("route's input class %q, want %q", d.Routes[0].InputClass, want)
				}
				return
			}
			if len(d.Routes) != 0 || readiness.Code(c.GetRejectionCode()) != readiness.CodeEvidenceUnknown {
				t.Fatalf("want refused as %s (no evidence applies): routes %+v, candidate %v", readiness.CodeEvidenceUnknown, d.Routes, c)
			}
		})
	}
}

// bulkEvidence makes the evidence describe calls in input class "bulk",
// which the policy defines for the tools tools matches (every tool for "")
// as calls with more than two ids.
func bulkEvidence(tools string) func(ev *mcpreadyv1.Evidence, in *Inputs) {
	return func(ev *mcpreadyv1.Evidence, in *Inputs) {
		ev.Subject.InputClass = "bulk"
		in.Policy.InputClasses = []*mcpreadyv1.InputClassRule{{Name: "bulk", Tools: tools, When: "size(args.ids) > 2"}}
	}
}

// bulkArgs are arguments in input class "bulk".
func bulkArgs(r *Request) { r.Arguments = []byte(`{"ids":[1,2,3]}`) }

// authClasses: the agent calls docs-a's endpoint keyless, any other with a
// bearer token.
func authClasses(r *Request) {
	r.AuthClass = func(server, endpoint string) string {
		if server == "com.example/docs" && endpoint == "https://a.example/mcp" {
			return readiness.AuthKeyless
		}
		return readiness.AuthBearer
	}
}

// Policy.evidence.acceptedMethods counts only evidence gathered by the
// methods it names (synthetic probes, passive traffic, or both): evidence
// of another method, or stating none, is not accepted, as evidence from an
// issuer the policy does not accept. An empty list accepts every method.
func TestAcceptedEvidenceMethods(t *testing.T) {
	synthetic, passive := mcpreadyv1.EvidenceMethod_EVIDENCE_METHOD_SYNTHETIC, mcpreadyv1.EvidenceMethod_EVIDENCE_METHOD_PASSIVE
	cases := []struct {
		name     string
		accepted []mcpreadyv1.EvidenceMethod
		method   mcpreadyv1.EvidenceMethod
		applies  bool
	}{
		{"any method", nil, synthetic, true},
		{"any method, none stated", nil, mcpreadyv1.EvidenceMethod_EVIDENCE_METHOD_UNSPECIFIED, true},
		{"passive accepted", []mcpreadyv1.EvidenceMethod{passive}, passive, true},
		{"synthetic not accepted", []mcpreadyv1.EvidenceMethod{passive}, synthetic, false},
		{"none stated, not accepted", []mcpreadyv1.EvidenceMethod{passive, synthetic}, mcpreadyv1.EvidenceMethod_EVIDENCE_METHOD_UNSPECIFIED, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := fixture()
			in.Policy.Evidence.OnUnknown = mcpreadyv1.UnknownEvidenceAction_UNKNOWN_EVIDENCE_ACTION_DENY
			in.Policy.Evidence.AcceptedMethods = tc.accepted
			in.Evidence["ev-a"].Method = tc.method
			req := baseReq()
			req.Tool = "com.example/docs/docs.lookup"
			d := snap(t, in).Decide(req, nil)
			if got := len(d.Routes) == 1 && d.Routes[0].EvidenceID == "ev-a"; got != tc.applies {
				t.Fatalf("evidence counted: %v, want %v (routes %+v, candidate %v)", got, tc.applies, d.Routes, candidate(d, "docs-a"))
			}
		})
	}
}

// A listing has no arguments, so no input class: a tool the policy divides
// into classes is listed when evidence of any of its classes counts (a
// call in that class would be admitted), and not when none does. Before,
// a listing counted only evidence naming no class, and with onUnknown
// DENY hid a tool whose evidence all named one.
func TestListingCountsEvidenceOfAnyInputClass(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(ev *mcpreadyv1.Evidence, in *Inputs)
		listed bool
	}{
		{"evidence of a class", bulkEvidence(""), true},
		{"evidence of a class, tool without classes", func(ev *mcpreadyv1.Evidence, in *Inputs) { ev.Subject.InputClass = "bulk" }, false},
		{"evidence of none", func(ev *mcpreadyv1.Evidence, in *Inputs) { bulkEvidence("")(ev, in); ev.Subject.InputClass = "" }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := fixture()
			in.Policy.Evidence.OnUnknown = mcpreadyv1.UnknownEvidenceAction_UNKNOWN_EVIDENCE_ACTION_DENY
			tc.mutate(in.Evidence["ev-a"], &in)
			v, ok := snap(t, in).VisibleNamed(baseReq(), nil, "com.example/docs/docs.lookup")
			if listed := ok && slices.Contains(v.Entries, "docs-a"); listed != tc.listed {
				t.Fatalf("docs-a listed: %v, want %v (%+v)", listed, tc.listed, v)
			}
		})
	}
}

// An agent refuses a policy whose input classes do not compile, as apply
// does: a control plane that let one through (an older one, say) does not
// get a snapshot that would classify calls by nothing.
func TestSnapshotRefusesBadInputClass(t *testing.T) {
	for _, r := range []*mcpreadyv1.InputClassRule{{Name: "bulk"}, {Name: "bulk", When: "size(args"}, {Name: "Bulk", When: "true"}} {
		in := fixture()
		in.Policy.InputClasses = []*mcpreadyv1.InputClassRule{r}
		if _, err := NewSnapshot(in); err == nil {
			t.Errorf("rule %+v: snapshot built", r)
		}
	}
}
