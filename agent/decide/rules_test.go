package decide

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/mcpready/mcpready/agent/circuit"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/readiness"
)

// observed sets the observer independence of fixture evidence ev-a.
func observed(in *Inputs, independence string) {
	in.Evidence["ev-a"].Observer = &mcpreadyv1.Observer{Id: "prober", Independence: independence}
}

func TestEvidenceRules(t *testing.T) {
	invocation := mcpreadyv1.ReadinessLayer_READINESS_LAYER_INVOCATION
	cases := []struct {
		name   string
		mutate func(in *Inputs)
		code   readiness.Code // "" = admitted on evidence wantEv
		wantEv string
	}{
		{"no requirement", func(in *Inputs) {}, "", "ev-a"},
		{"third-party meets third-party", func(in *Inputs) {
			in.Policy.Evidence.RequiredIndependence = "third-party"
			observed(in, "Third_Party")
		}, "", "ev-a"},
		{"consumer below third-party", func(in *Inputs) {
			in.Policy.Evidence.RequiredIndependence = "third-party"
			observed(in, "consumer-passive")
		}, readiness.CodeEvidenceNotIndependent, ""},
		{"consumer meets independent", func(in *Inputs) {
			in.Policy.Evidence.RequiredIndependence = "independent"
			observed(in, "consumer-passive")
		}, "", "ev-a"},
		{"no statement meets nothing", func(in *Inputs) {
			in.Policy.Evidence.RequiredIndependence = "independent"
		}, readiness.CodeEvidenceNotIndependent, ""},
		{"unknown statement", func(in *Inputs) {
			in.Policy.Evidence.RequiredIndependence = "self"
			observed(in, "trust-me")
		}, readiness.CodeEvidenceNotIndependent, ""},
		{"same organisation meets self", func(in *Inputs) {
			in.Policy.Evidence.RequiredIndependence = "self"
			observed(in, "same-organisation")
		}, "", "ev-a"},
		{"same organisation below independent", func(in *Inputs) {
			in.Policy.Evidence.RequiredIndependence = "independent"
			observed(in, "same-organisation")
		}, readiness.CodeEvidenceNotIndependent, ""},
		{"unknown requirement admits nothing", func(in *Inputs) {
			in.Policy.Evidence.RequiredIndependence = "galactic"
			observed(in, "third-party")
		}, readiness.CodeEvidenceNotIndependent, ""},
		{"issuer is the declared owner", func(in *Inputs) {
			in.Policy.Evidence.RequiredIndependence = "independent"
			observed(in, "third-party")
			in.Declarations["com.example/docs"] = &mcpreadyv1.Declaration{ServerName: "com.example/docs", Owner: "prober"}
		}, readiness.CodeEvidenceNotIndependent, ""},
		{"issuer is the declaration issuer", func(in *Inputs) {
			in.Policy.Evidence.RequiredIndependence = "third-party"
			observed(in, "third-party")
			in.Declarations["com.example/docs"] = &mcpreadyv1.Declaration{ServerName: "com.example/docs",
				Provenance: &mcpreadyv1.Provenance{Issuer: "prober"}}
		}, readiness.CodeEvidenceNotIndependent, ""},
		{"issuer is the entry owner", func(in *Inputs) {
			in.Policy.Evidence.RequiredIndependence = "independent"
			observed(in, "third-party")
			in.Entries["docs-a"].Provenance = &mcpreadyv1.Provenance{Owner: "prober"}
		}, readiness.CodeEvidenceNotIndependent, ""},
		{"provider issuer allowed at self", func(in *Inputs) {
			in.Policy.Evidence.RequiredIndependence = "self"
			observed(in, "self")
			in.Declarations["com.example/docs"] = &mcpreadyv1.Declaration{ServerName: "com.example/docs", Owner: "prober"}
		}, "", "ev-a"},
		{"confidence met", func(in *Inputs) { in.Policy.Evidence.MinConfidence = 0.9 }, "", "ev-a"}, // 99/100: 0.946
		{"confidence too low", func(in *Inputs) { in.Policy.Evidence.MinConfidence = 0.95 }, readiness.CodeEvidenceLowConfidence, ""},
		{"small sample, perfect rate", func(in *Inputs) {
			in.Policy.Evidence.MinConfidence = 0.5
			in.Evidence["ev-a"].Rates = []*mcpreadyv1.LayerRate{{Layer: invocation, Successes: 3, Denominator: 3}} // 0.438
		}, readiness.CodeEvidenceLowConfidence, ""},
		{"weakest layer counts", func(in *Inputs) {
			in.Policy.Evidence.MinConfidence = 0.9
			in.Evidence["ev-a"].Rates = append(in.Evidence["ev-a"].Rates,
				&mcpreadyv1.LayerRate{Layer: mcpreadyv1.ReadinessLayer_READINESS_LAYER_RESULT_VALIDITY, Successes: 80, Denominator: 100})
		}, readiness.CodeEvidenceLowConfidence, ""},
		{"layer without denominator skipped", func(in *Inputs) {
			in.Policy.Evidence.MinConfidence = 0.9
			in.Evidence["ev-a"].Rates = append(in.Evidence["ev-a"].Rates,
				&mcpreadyv1.LayerRate{Layer: mcpreadyv1.ReadinessLayer_READINESS_LAYER_RESULT_VALIDITY})
		}, "", "ev-a"},
		{"no rates", func(in *Inputs) {
			in.Policy.Evidence.MinConfidence = 0.1
			in.Evidence["ev-a"].Rates = nil
		}, readiness.CodeEvidenceLowConfidence, ""},
		{"inconsistent counts", func(in *Inputs) {
			in.Policy.Evidence.MinConfidence = 0.1
			in.Evidence["ev-a"].Rates[0].Successes = 101
		}, readiness.CodeEvidenceLowConfidence, ""},
		{"older fit evidence counts", func(in *Inputs) {
			in.Policy.Evidence.MinConfidence = 0.9
			old := evidence("com.example/docs", "docs.lookup", "https://a.example/mcp", 20, 80, t0.Add(-10*time.Minute))
			old.Provenance.Issuer = "prober"
			in.Evidence["ev-a-old"] = old
			in.Evidence["ev-a"].Rates[0].Successes = 50
		}, "", "ev-a-old"},
		{"drift observed", func(in *Inputs) {
			in.Evidence["ev-a"].DriftObserved = []mcpreadyv1.DriftLabel{mcpreadyv1.DriftLabel_DRIFT_LABEL_OUTPUT_SCHEMA_DRIFT}
		}, readiness.CodeEvidenceDrift, ""},
		{"older evidence without drift counts", func(in *Inputs) {
			in.Evidence["ev-a"].DriftObserved = []mcpreadyv1.DriftLabel{mcpreadyv1.DriftLabel_DRIFT_LABEL_SIDE_EFFECT_DRIFT}
			old := evidence("com.example/docs", "docs.lookup", "https://a.example/mcp", 20, 80, t0.Add(-10*time.Minute))
			in.Evidence["ev-a-old"] = old
		}, "", "ev-a-old"},
		{"unspecified drift label", func(in *Inputs) {
			in.Evidence["ev-a"].DriftObserved = []mcpreadyv1.DriftLabel{mcpreadyv1.DriftLabel_DRIFT_LABEL_UNSPECIFIED}
		}, "", "ev-a"},
		{"unfit reported before expired", func(in *Inputs) {
			in.Policy.Evidence.MinConfidence = 0.99
			old := evidence("com.example/docs", "docs.lookup", "https://a.example/mcp", 20, 80, t0.Add(-2*time.Hour))
			in.Evidence["ev-a-old"] = old
		}, readiness.CodeEvidenceLowConfidence, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, action := range []mcpreadyv1.UnknownEvidenceAction{mcpreadyv1.UnknownEvidenceAction_UNKNOWN_EVIDENCE_ACTION_DENY,
				mcpreadyv1.UnknownEvidenceAction_UNKNOWN_EVIDENCE_ACTION_ALLOW} {
				in := fixture()
				in.Policy.Evidence.OnUnknown = action
				tc.mutate(&in)
				req := baseReq()
				req.Tool = "com.example/docs/docs.lookup"
				d := snap(t, in).Decide(req, nil)
				c := candidate(d, "docs-a")
				deny := action == mcpreadyv1.UnknownEvidenceAction_UNKNOWN_EVIDENCE_ACTION_DENY
				switch {
				case tc.code == "":
					if len(d.Routes) != 1 || d.Routes[0].EvidenceID != tc.wantEv || d.Routes[0].Unknown {
						t.Fatalf("%v: routes %+v, candidate %v", action, d.Routes, c)
					}
				case deny:
					if c.GetRejectedAtStep() != readiness.StepHealth || readiness.Code(c.GetRejectionCode()) != tc.code || !strings.Contains(c.GetRejectionReason(), "evidence ev-a") {
						t.Fatalf("DENY: candidate %v, want %s", c, tc.code)
					}
				default: // ALLOW: admitted as unknown
					if len(d.Routes) != 1 || !d.Routes[0].Unknown || d.Routes[0].EvidenceID != "" || readiness.Code(c.GetRejectionCode()) != "" {
						t.Fatalf("ALLOW: routes %+v candidate %v", d.Routes, c)
					}
				}
			}
		})
	}
}

// Unfit evidence ranks its candidate with the unknown ones, below a slower
// candidate whose evidence counts.
func TestUnfitEvidenceRanksLast(t *testing.T) {
	in := fixture()
	in.Policy.Evidence.MinConfidence = 0.9
	in.Evidence["ev-b"].Rates[0].Successes = 60 // docs-b is faster but uncertain
	d := snap(t, in).Decide(baseReq(), nil)
	if got := routeNames(d); len(got) != 2 || got[0] != "docs-a" || !d.Routes[1].Unknown {
		t.Fatalf("routes %v %+v", got, d.Routes)
	}
}

func TestWilsonLower(t *testing.T) {
	for _, tc := range []struct {
		k, n int64
		want float64
	}{{0, 10, 0}, {10, 10, 0.7225}, {99, 100, 0.9455}, {50, 100, 0.4038}, {3, 3, 0.4385}, {9990, 10000, 0.9982}} {
		if got := wilsonLower(tc.k, tc.n); math.Abs(got-tc.want) > 5e-4 {
			t.Errorf("wilsonLower(%d, %d) = %.4f, want %.4f", tc.k, tc.n, got, tc.want)
		}
	}
}

func TestDeclaredLifecycle(t *testing.T) {
	decl := func(in *Inputs, server string, deprecated, eol time.Duration) {
		d := &mcpreadyv1.Declaration{ServerName: server}
		if deprecated != 0 {
			d.DeprecatedAt = timestamppb.New(t0.Add(deprecated))
		}
		if eol != 0 {
			d.EndOfLifeAt = timestamppb.New(t0.Add(eol))
		}
		in.Declarations[server] = d
	}
	keyA := circuit.Key("https://a.example/mcp", "docs.lookup")
	cases := []struct {
		name       string
		mutate     func(in *Inputs)
		h          Health
		routes     []string
		deprecated []bool
		code       readiness.Code // rejection of docs-b
	}{
		// docs-b is the faster one in the fixture.
		{"none", func(in *Inputs) {}, nil, []string{"docs-b", "docs-a"}, []bool{false, false}, ""},
		{"end of life passed", func(in *Inputs) { decl(in, "com.other/docs", -time.Hour, -time.Second) }, nil,
			[]string{"docs-a"}, []bool{false}, readiness.CodeEndOfLife},
		{"end of life now", func(in *Inputs) {
			in.Declarations["com.other/docs"] = &mcpreadyv1.Declaration{ServerName: "com.other/docs", EndOfLifeAt: timestamppb.New(t0)}
		}, nil, []string{"docs-a"}, []bool{false}, readiness.CodeEndOfLife},
		{"end of life ahead", func(in *Inputs) { decl(in, "com.other/docs", 0, time.Hour) }, nil,
			[]string{"docs-b", "docs-a"}, []bool{false, false}, ""},
		{"deprecated ranks below", func(in *Inputs) { decl(in, "com.other/docs", -time.Second, time.Hour) }, nil,
			[]string{"docs-a", "docs-b"}, []bool{false, true}, ""},
		{"deprecation ahead", func(in *Inputs) { decl(in, "com.other/docs", time.Hour, 0) }, nil,
			[]string{"docs-b", "docs-a"}, []bool{false, false}, ""},
		{"both deprecated: latency", func(in *Inputs) {
			decl(in, "com.other/docs", -time.Second, 0)
			decl(in, "com.example/docs", -time.Second, 0)
		}, nil, []string{"docs-b", "docs-a"}, []bool{true, true}, ""},
		{"deprecated above half-open", func(in *Inputs) { decl(in, "com.other/docs", -time.Second, 0) },
			health{keyA: circuit.HalfOpen}, []string{"docs-b", "docs-a"}, []bool{true, false}, ""},
		{"deprecated with evidence above unknown", func(in *Inputs) {
			decl(in, "com.other/docs", -time.Second, 0)
			delete(in.Evidence, "ev-a")
		}, nil, []string{"docs-b", "docs-a"}, []bool{true, false}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := fixture()
			tc.mutate(&in)
			s := snap(t, in)
			d := s.Decide(baseReq(), tc.h)
			got := routeNames(d)
			if strings.Join(got, ",") != strings.Join(tc.routes, ",") {
				t.Fatalf("routes %v, want %v", got, tc.routes)
			}
			for i, r := range d.Routes {
				if r.Deprecated != tc.deprecated[i] {
					t.Errorf("%s deprecated %v, want %v", r.Entry, r.Deprecated, tc.deprecated[i])
				}
			}
			c := candidate(d, "docs-b")
			if readiness.Code(c.GetRejectionCode()) != tc.code || (tc.code != "" && (c.GetRejectedAtStep() != readiness.StepEligibility || !strings.Contains(c.GetRejectionReason(), "end of life"))) {
				t.Fatalf("docs-b: %v, want %q", c, tc.code)
			}
			if tc.code != "" {
				// The same record is shared by later decisions.
				if again := candidate(s.Decide(baseReq(), tc.h), "docs-b"); again != c {
					t.Error("end-of-life record is rebuilt per decision")
				}
				for _, v := range s.Visible(listReq("dev", "acme", "eu", "wf"), tc.h) {
					if v.Name == "docs_lookup" && strings.Join(v.Entries, ",") != "docs-a" {
						t.Errorf("listed entries %v", v.Entries)
					}
				}
			}
		})
	}
}

func TestRetryConditions(t *testing.T) {
	all := []RetryConditions{RetryTransport, RetryTimeout, RetryHTTP429, RetryHTTP500, RetryHTTP502, RetryHTTP503,
		RetryHTTP504, RetryHTTP5xxOther, RetryJSONRPCError}
	cases := []struct {
		name         string
		policy, decl []string
		want         []RetryConditions // contained; all others are not
		maxAttempts  int
		wantString   string
	}{
		{"default", nil, nil, []RetryConditions{RetryTransport, RetryTimeout, RetryHTTP429, RetryHTTP500, RetryHTTP502, RetryHTTP503,
			RetryHTTP504, RetryHTTP5xxOther}, 2, "default"},
		{"policy narrows", []string{"transport", "http-503"}, nil, []RetryConditions{RetryTransport, RetryHTTP503}, 2, "transport,http-503"},
		{"provider narrows policy", []string{"transport", "http-503", "timeout"}, []string{"http-503", "http-429", "timeout"},
			[]RetryConditions{RetryHTTP503, RetryTimeout}, 2, "timeout,http-503"},
		{"provider narrows default", nil, []string{"http-503", "transport-reset"}, []RetryConditions{RetryHTTP503, RetryTransport}, 2,
			"transport,http-503"},
		{"provider cannot widen", nil, []string{"jsonrpc-error", "http-429"}, []RetryConditions{RetryHTTP429}, 2, "http-429"},
		{"consumer widens", []string{"jsonrpc_error", "Timeout"}, nil, []RetryConditions{RetryJSONRPCError, RetryTimeout}, 2,
			"timeout,jsonrpc-error"},
		{"empty intersection", []string{"http-503"}, []string{"http-429"}, nil, 1, "none"},
		{"unknown names only", []string{"bogus"}, nil, nil, 1, "none"},
		{"http-5xx", []string{"HTTP_5XX"}, nil, []RetryConditions{RetryHTTP500, RetryHTTP502, RetryHTTP503, RetryHTTP504, RetryHTTP5xxOther}, 2,
			"http-5xx"},
		{"rate-limited alias", []string{"rate-limited"}, nil, []RetryConditions{RetryHTTP429}, 2, "http-429"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := fixture()
			in.Policy.Retry.RetryableConditions = tc.policy
			in.Declarations["com.example/docs"] = &mcpreadyv1.Declaration{ServerName: "com.example/docs", RetryableConditions: tc.decl}
			req := baseReq()
			req.Tool = "com.example/docs/docs.lookup"
			r := snap(t, in).Decide(req, nil).Routes[0]
			for _, c := range all {
				if want := slices.Contains(tc.want, c); r.RetryOn.Has(c) != want {
					t.Errorf("%v.Has(%v) = %v, want %v", r.RetryOn, c, !want, want)
				}
			}
			if !r.Retryable || r.MaxAttempts != tc.maxAttempts || r.RetryOn.String() != tc.wantString {
				t.Fatalf("retryable %v max %d conditions %q, want max %d %q", r.Retryable, r.MaxAttempts, r.RetryOn, tc.maxAttempts, tc.wantString)
			}
			if tc.maxAttempts == 1 && r.PerAttempt != 10*time.Second {
				t.Errorf("one attempt gets the whole deadline, got %v", r.PerAttempt)
			}
		})
	}
	if RetryConditions(0).Has(0) || RetryConditions(0).None() {
		t.Error("zero value")
	}
}

func FuzzRetryConditions(f *testing.F) {
	for _, s := range []string{"transport", "HTTP_5XX", "http-503,timeout", "bogus", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, list string) {
		names := strings.Split(list, ",")
		c := parseRetryConditions(names)
		if c == 0 || c&retryExplicit == 0 || c.String() == "" || c.String() == "default" {
			t.Fatalf("%q: %v", list, c)
		}
		// Narrowing by the provider never widens the consumer's set.
		n := retryConditions(&mcpreadyv1.RetryRules{RetryableConditions: names}, &mcpreadyv1.Declaration{RetryableConditions: []string{"http-503"}})
		if n&^c != 0 || n.Has(RetryJSONRPCError) {
			t.Fatalf("%q: narrowed %v wider than %v", list, n, c)
		}
	})
}

func FuzzConfidence(f *testing.F) {
	f.Add(int64(99), int64(100))
	f.Add(int64(0), int64(1))
	f.Add(int64(-1), int64(5))
	f.Fuzz(func(t *testing.T, k, n int64) {
		ev := &mcpreadyv1.Evidence{Rates: []*mcpreadyv1.LayerRate{{Successes: k, Denominator: n}}}
		c, why := confidence(ev)
		if math.IsNaN(c) || c < 0 || c > 1 || why == "" {
			t.Fatalf("%d/%d: %v %q", k, n, c, why)
		}
		if n > 0 && k >= 0 && k <= n && c > float64(k)/float64(n) {
			t.Fatalf("%d/%d: lower bound %v above the rate", k, n, c)
		}
	})
}
