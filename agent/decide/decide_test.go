package decide

import (
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/mcpready/mcpready/agent/circuit"
	"github.com/mcpready/mcpready/agent/pin"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/readiness"
)

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

const (
	readOnly = mcpreadyv1.SideEffectClass_SIDE_EFFECT_CLASS_READ_ONLY
	stateCh  = mcpreadyv1.SideEffectClass_SIDE_EFFECT_CLASS_STATE_CHANGING
	unknown  = mcpreadyv1.SideEffectClass_SIDE_EFFECT_CLASS_UNKNOWN
)

func newRegEntry(server, tool, endpoint, region string) *mcpreadyv1.RegistryEntry {
	return &mcpreadyv1.RegistryEntry{
		Identity: &mcpreadyv1.ToolIdentity{ServerName: server, ServerVersion: "1.0.0", ToolName: tool, Endpoint: endpoint,
			ProtocolVersion: "2025-11-25", InputSchemaDigest: "sha256:in", OutputSchemaDigest: "sha256:out"},
		Authority:  &mcpreadyv1.Authority{Scopes: []string{"docs:read"}},
		SideEffect: readOnly, DataAccess: mcpreadyv1.DataAccessClass_DATA_ACCESS_CLASS_PUBLIC,
		Idempotency: mcpreadyv1.IdempotencyClass_IDEMPOTENCY_CLASS_NATURALLY_IDEMPOTENT,
		State:       mcpreadyv1.LifecycleState_LIFECYCLE_STATE_QUALIFIED,
		Region:      region,
	}
}

func evidence(server, tool, endpoint string, p50, p99 float64, observed time.Time) *mcpreadyv1.Evidence {
	return &mcpreadyv1.Evidence{
		Provenance: &mcpreadyv1.Provenance{Issuer: "prober"},
		Subject: &mcpreadyv1.Subject{ServerName: server, ToolName: tool, ServerVersion: "1.0.0", Endpoint: endpoint,
			InputSchemaDigest: "sha256:in", OutputSchemaDigest: "sha256:out"},
		ObservedAt: timestamppb.New(observed),
		ExpiresAt:  timestamppb.New(observed.Add(time.Hour)),
		Sample:     &mcpreadyv1.Sample{Attempted: 100, Eligible: 100},
		Rates:      []*mcpreadyv1.LayerRate{{Layer: mcpreadyv1.ReadinessLayer_READINESS_LAYER_INVOCATION, Successes: 99, Denominator: 100}},
		Latency:    &mcpreadyv1.Latency{P50Ms: p50, P99Ms: p99, Count: 100},
	}
}

// fixture: class docs_lookup = {com.example/docs, com.other/docs}
// docs.lookup; com.evil/x offers a look-alike docs.lookup; a state-changing
// com.example/tickets/create exists outside any class.
func fixture() Inputs {
	return Inputs{
		PolicyName: "p", PolicyVersion: "v7",
		Policy: &mcpreadyv1.Policy{
			Inventory:        []string{"*"},
			ProtocolVersions: []string{"2025-11-25", "2026-07-28"},
			Evidence: &mcpreadyv1.EvidenceRules{AcceptedIssuers: []string{"prober"},
				MaxAge:    map[string]*durationpb.Duration{"invocation": durationpb.New(30 * time.Minute)},
				OnUnknown: mcpreadyv1.UnknownEvidenceAction_UNKNOWN_EVIDENCE_ACTION_ALLOW},
			Auth: &mcpreadyv1.AuthRules{PermittedScopes: []string{"docs:read", "tickets:write"}},
			SideEffects: []*mcpreadyv1.SideEffectRule{
				{Match: "*/docs.lookup", Assigned: readOnly},
				{Match: "com.example/tickets/*", Assigned: stateCh},
			},
			Deadline: durationpb.New(10 * time.Second),
			Retry:    &mcpreadyv1.RetryRules{MaxAttempts: 2, HedgeAfter: durationpb.New(50 * time.Millisecond)},
			EquivalenceClasses: []*mcpreadyv1.EquivalenceClass{{Name: "docs_lookup", Description: "look up docs",
				Members: []string{"com.example/docs/docs.lookup", "com.other/docs/docs.lookup"}, FallbackAllowed: true}},
			Principals: []*mcpreadyv1.PrincipalRule{
				{PrincipalClass: "dev", Allow: []string{"docs_lookup", "com.example/*", "com.evil/*"}, TenantClasses: []string{"acme"}},
				{PrincipalClass: "intern", Allow: []string{"docs_lookup"}, Deny: []string{"com.other/*"}},
			},
		},
		Entries: map[string]*mcpreadyv1.RegistryEntry{
			"docs-a":  newRegEntry("com.example/docs", "docs.lookup", "https://a.example/mcp", "eu"),
			"docs-b":  newRegEntry("com.other/docs", "docs.lookup", "https://b.example/mcp", "eu"),
			"evil":    newRegEntry("com.evil/x", "docs.lookup", "https://evil.example/mcp", "eu"),
			"tickets": newRegEntry("com.example/tickets", "create", "https://t.example/mcp", "eu"),
		},
		Declarations: map[string]*mcpreadyv1.Declaration{},
		Evidence: map[string]*mcpreadyv1.Evidence{
			"ev-a": evidence("com.example/docs", "docs.lookup", "https://a.example/mcp", 20, 80, t0.Add(-5*time.Minute)),
			"ev-b": evidence("com.other/docs", "docs.lookup", "https://b.example/mcp", 10, 40, t0.Add(-5*time.Minute)),
		},
	}
}

// listReq is a tools/list request of a caller.
func listReq(principal, tenant, region, workflow string) Request {
	return Request{Principal: principal, Tenant: tenant, Region: region, Workflow: workflow, Now: t0}
}

func baseReq() Request {
	return Request{Tool: "docs_lookup", Principal: "dev", Tenant: "acme", Region: "eu", Workflow: "wf", Now: t0}
}

func snap(t testing.TB, in Inputs) *Snapshot {
	t.Helper()
	s, err := NewSnapshot(in)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func candidate(d Decision, name string) *mcpreadyv1.Candidate {
	for _, c := range d.Candidates {
		if c.GetEntry() == name {
			return c
		}
	}
	return nil
}

func routeNames(d Decision) []string {
	var out []string
	for _, r := range d.Routes {
		out = append(out, r.Entry)
	}
	return out
}

type health map[string]circuit.State

func (h health) State(key string, _ time.Time) circuit.State { return h[key] }

type drifted string

func (d drifted) Drifted(e string) bool { return e == string(d) }

func TestResolution(t *testing.T) {
	s := snap(t, fixture())
	d := s.Decide(baseReq(), nil)
	if d.Refusal != nil {
		t.Fatal(d.Refusal)
	}
	if d.Class != "docs_lookup" || len(d.Candidates) != 3 {
		t.Fatalf("class %q, %d candidates", d.Class, len(d.Candidates))
	}
	// The look-alike by name is considered and rejected as not equivalent.
	if c := candidate(d, "evil"); readiness.Code(c.GetRejectionCode()) != readiness.CodeNotEquivalent || c.GetRejectedAtStep() != readiness.StepSemantic {
		t.Fatalf("evil: %v", c)
	}
	if got := routeNames(d); len(got) != 2 || got[0] != "docs-b" || got[1] != "docs-a" {
		t.Fatalf("routes %v (docs-b is faster)", got)
	}
	if d.PolicyVersion != "v7" || len(d.EvidenceIDs) != 2 {
		t.Fatalf("policy version %q evidence %v", d.PolicyVersion, d.EvidenceIDs)
	}

	// Exact tool requests: allowed only when the exact tool is permitted.
	req := baseReq()
	req.Tool = "com.example/docs/docs.lookup"
	if d := s.Decide(req, nil); d.Refusal != nil || len(d.Routes) != 1 || d.Class != "" {
		t.Fatalf("exact: %+v", d)
	}
	req.Tool = "com.other/docs/docs.lookup" // only permitted via the class
	d = s.Decide(req, nil)
	if !errors.Is(d.Refusal, ErrRefused) || readiness.Code(candidate(d, "docs-b").GetRejectionCode()) != readiness.CodePrincipalDenied {
		t.Fatalf("exact via class permission: %v", d.Refusal)
	}
	req.Tool = "docs.lookup" // a bare tool name is never resolved by name
	d = s.Decide(req, nil)
	var re *RefusalError
	if !errors.As(d.Refusal, &re) || re.Code != readiness.CodeUnknownTool || re.Step != readiness.StepResolve {
		t.Fatalf("bare name: %v", d.Refusal)
	}
}

// rejectionCase makes entry fail at step with code.
type rejectionCase struct {
	name   string
	mutate func(in *Inputs, req *Request)
	entry  string
	step   int
	code   readiness.Code
	h      Health // nil: every breaker closed
}

// rejectionCases has at least one case for every code the filters record.
func rejectionCases() []rejectionCase {
	return []rejectionCase{
		{"inventory", func(in *Inputs, _ *Request) { in.Policy.Inventory = []string{"docs-b", "evil"} }, "docs-a", 1, readiness.CodeNotInInventory, nil},
		{"endpoint", func(in *Inputs, _ *Request) { in.Policy.ApprovedEndpoints = []string{"https://b.example/*"} }, "docs-a", 1, readiness.CodeEndpointNotApproved, nil},
		{"network scope", func(in *Inputs, _ *Request) { in.Entries["docs-a"].NetworkScope = []string{"elsewhere.example"} }, "docs-a", 1, readiness.CodeEndpointOutOfScope, nil},
		{"lifecycle", func(in *Inputs, _ *Request) {
			in.Entries["docs-a"].State = mcpreadyv1.LifecycleState_LIFECYCLE_STATE_SUSPENDED
		}, "docs-a", 1, readiness.CodeLifecycle, nil},
		{"candidate", func(in *Inputs, _ *Request) {
			in.Entries["docs-a"].State = mcpreadyv1.LifecycleState_LIFECYCLE_STATE_CANDIDATE
		}, "docs-a", 1, readiness.CodeLifecycle, nil},
		{"entry expired", func(in *Inputs, _ *Request) {
			in.Entries["docs-a"].Provenance = &mcpreadyv1.Provenance{ExpiresAt: timestamppb.New(t0.Add(-time.Second))}
		}, "docs-a", 1, readiness.CodeEntryExpired, nil},
		{"workflow", func(in *Inputs, _ *Request) { in.Entries["docs-a"].WorkflowAllowlist = []string{"other"} }, "docs-a", 1, readiness.CodeWorkflow, nil},
		{"entry protocol", func(in *Inputs, _ *Request) { in.Entries["docs-a"].Identity.ProtocolVersion = "2024-11-05" }, "docs-a", 1, readiness.CodeProtocolVersion, nil},
		{"client protocol", func(_ *Inputs, req *Request) { req.ProtocolVersion = "2024-11-05" }, "docs-a", 1, readiness.CodeProtocolVersion, nil},
		{"owner", func(in *Inputs, _ *Request) {
			in.Policy.ApprovedOwners = []string{"team-b"}
			in.Declarations["com.other/docs"] = &mcpreadyv1.Declaration{ServerName: "com.other/docs", Owner: "team-b"}
		}, "docs-a", 2, readiness.CodeOwnerNotApproved, nil},
		{"issuer", func(in *Inputs, _ *Request) {
			in.Policy.Auth.PermittedIssuers = []string{"https://login.example"}
			in.Declarations["com.example/docs"] = &mcpreadyv1.Declaration{ServerName: "com.example/docs",
				Auth: &mcpreadyv1.DeclaredAuth{AuthorizationServers: []string{"https://evil-idp.example"}}}
		}, "docs-a", 2, readiness.CodeIssuerNotPermitted, nil},
		{"auth scheme", func(in *Inputs, _ *Request) { in.Policy.Auth.RequiredSchemes = []string{"oauth2"} }, "docs-a", 2, readiness.CodeAuthScheme, nil},
		{"scope", func(in *Inputs, _ *Request) { in.Entries["docs-a"].Authority.Scopes = []string{"docs:admin"} }, "docs-a", 2, readiness.CodeScopeNotPermitted, nil},
		{"principal unknown", func(_ *Inputs, req *Request) { req.Principal = "stranger" }, "docs-a", 2, readiness.CodePrincipalDenied, nil},
		{"principal deny", func(_ *Inputs, req *Request) { req.Principal = "intern" }, "docs-b", 2, readiness.CodePrincipalDenied, nil},
		{"principal tenant", func(_ *Inputs, req *Request) { req.Tenant = "globex" }, "docs-a", 2, readiness.CodeTenant, nil},
		{"entry tenant", func(in *Inputs, _ *Request) { in.Entries["docs-a"].TenantClasses = []string{"initech"} }, "docs-a", 2, readiness.CodeTenant, nil},
		{"allowed regions", func(in *Inputs, _ *Request) {
			in.Policy.Residency = &mcpreadyv1.ResidencyRules{AllowedRegions: []string{"us"}}
		}, "docs-a", 3, readiness.CodeResidency, nil},
		{"denied region", func(in *Inputs, _ *Request) {
			in.Policy.Residency = &mcpreadyv1.ResidencyRules{DeniedRegions: []string{"eu"}}
		}, "docs-a", 3, readiness.CodeResidency, nil},
		{"same region", func(in *Inputs, req *Request) {
			in.Policy.Residency = &mcpreadyv1.ResidencyRules{SameRegionOnly: true}
			req.Region = "us"
		}, "docs-a", 3, readiness.CodeResidency, nil},
		{"data class", func(in *Inputs, _ *Request) {
			in.Policy.Residency = &mcpreadyv1.ResidencyRules{AllowedDataClasses: []mcpreadyv1.DataAccessClass{mcpreadyv1.DataAccessClass_DATA_ACCESS_CLASS_TENANT_PRIVATE}}
		}, "docs-a", 3, readiness.CodeDataClass, nil},
		{"not equivalent", func(*Inputs, *Request) {}, "evil", 4, readiness.CodeNotEquivalent, nil},
		{"approval unavailable", func(in *Inputs, _ *Request) {
			in.Policy.Approvals = []*mcpreadyv1.ApprovalRule{{Match: "com.example/docs/*", Required: true}}
		}, "docs-a", 5, readiness.CodeApprovalUnavailable, nil},
		{"entry approval", func(in *Inputs, _ *Request) { in.Entries["docs-a"].ApprovalRequired = true }, "docs-a", 5, readiness.CodeApprovalUnavailable, nil},
		{"idempotency key", func(in *Inputs, _ *Request) {
			in.Policy.Retry.RequireIdempotencyKeyForWrites = true
			in.Policy.SideEffects = nil // docs.lookup becomes UNKNOWN: treated as state-changing
		}, "docs-a", 5, readiness.CodeIdempotencyRequired, nil},
		{"evidence unknown", func(in *Inputs, _ *Request) {
			in.Policy.Evidence.OnUnknown = mcpreadyv1.UnknownEvidenceAction_UNKNOWN_EVIDENCE_ACTION_DENY
			delete(in.Evidence, "ev-a")
		}, "docs-a", 6, readiness.CodeEvidenceUnknown, nil},
		{"evidence expired", func(in *Inputs, _ *Request) {
			in.Policy.Evidence.OnUnknown = mcpreadyv1.UnknownEvidenceAction_UNKNOWN_EVIDENCE_ACTION_DENY
			in.Evidence["ev-a"].ObservedAt = timestamppb.New(t0.Add(-time.Hour)) // max age 30m
		}, "docs-a", 6, readiness.CodeEvidenceExpired, nil},
		{"evidence other issuer", func(in *Inputs, _ *Request) {
			in.Policy.Evidence.OnUnknown = mcpreadyv1.UnknownEvidenceAction_UNKNOWN_EVIDENCE_ACTION_DENY
			in.Evidence["ev-a"].Provenance.Issuer = "self-reported"
		}, "docs-a", 6, readiness.CodeEvidenceUnknown, nil},
		{"evidence version drift", func(in *Inputs, _ *Request) {
			in.Policy.Evidence.OnUnknown = mcpreadyv1.UnknownEvidenceAction_UNKNOWN_EVIDENCE_ACTION_DENY
			in.Entries["docs-a"].Identity.ServerVersion = "2.0.0"
		}, "docs-a", 6, readiness.CodeEvidenceUnknown, nil},
		{"evidence other tenant", func(in *Inputs, _ *Request) {
			in.Policy.Evidence.OnUnknown = mcpreadyv1.UnknownEvidenceAction_UNKNOWN_EVIDENCE_ACTION_DENY
			in.Evidence["ev-a"].TenantClass = "globex"
		}, "docs-a", 6, readiness.CodeEvidenceUnknown, nil},
		{"evidence small sample", func(in *Inputs, _ *Request) {
			in.Policy.Evidence.OnUnknown = mcpreadyv1.UnknownEvidenceAction_UNKNOWN_EVIDENCE_ACTION_DENY
			in.Policy.Evidence.MinSampleSize = 1000
		}, "docs-a", 6, readiness.CodeEvidenceUnknown, nil},
		{"deadline budget", func(_ *Inputs, req *Request) { req.Deadline = 30 * time.Millisecond }, "docs-a", 7, readiness.CodeDeadlineBudget, nil},
		{"cost", func(in *Inputs, _ *Request) {
			in.Policy.Cost = &mcpreadyv1.CostRules{MaxCostPerCall: 0.01, Currency: "USD"}
			in.Declarations["com.example/docs"] = &mcpreadyv1.Declaration{ServerName: "com.example/docs",
				Pricing: &mcpreadyv1.DeclaredPricing{Amount: "0.05", Currency: "USD"}}
		}, "docs-a", 7, readiness.CodeCost, nil},
		{"drift", func(_ *Inputs, req *Request) { req.Drift = drifted("docs-a") }, "docs-a", 1, readiness.CodeDriftBlocked, nil},
		{"policy deadline budget", func(in *Inputs, _ *Request) { in.Policy.Deadline = durationpb.New(30 * time.Millisecond) }, "docs-a", 7, readiness.CodeDeadlineBudget, nil},
		{name: "circuit open", mutate: func(*Inputs, *Request) {}, entry: "docs-a", step: 6, code: readiness.CodeCircuitOpen,
			h: health{circuit.Key("https://a.example/mcp", "docs.lookup"): circuit.Open}},
	}
}

func TestRejections(t *testing.T) {
	cases := rejectionCases()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := fixture()
			req := baseReq()
			tc.mutate(&in, &req)
			d := snap(t, in).Decide(req, tc.h)
			c := candidate(d, tc.entry)
			if c == nil {
				t.Fatalf("no candidate %s", tc.entry)
			}
			if int(c.GetRejectedAtStep()) != tc.step || readiness.Code(c.GetRejectionCode()) != tc.code || c.GetRejectionReason() == "" {
				t.Fatalf("got step %d code %q reason %q, want %d %q", c.GetRejectedAtStep(), readiness.Code(c.GetRejectionCode()), c.GetRejectionReason(), tc.step, tc.code)
			}
			for _, r := range d.Routes {
				if r.Entry == tc.entry {
					t.Fatalf("rejected %s is routed", tc.entry)
				}
			}
		})
	}
}

// The earliest failing step is recorded, never a later one.
func TestStepOrder(t *testing.T) {
	in := fixture()
	in.Entries["docs-a"].State = mcpreadyv1.LifecycleState_LIFECYCLE_STATE_STALE    // step 1
	in.Policy.Residency = &mcpreadyv1.ResidencyRules{DeniedRegions: []string{"eu"}} // step 3
	d := snap(t, in).Decide(baseReq(), health{circuit.Key("https://a.example/mcp", "docs.lookup"): circuit.Open})
	if c := candidate(d, "docs-a"); c.GetRejectedAtStep() != 1 {
		t.Fatalf("%v", c)
	}
	// Everything refused: the refusal is the furthest-reaching rejection.
	var re *RefusalError
	if !errors.As(d.Refusal, &re) || re.Step != readiness.StepResidency {
		t.Fatalf("refusal %v", d.Refusal)
	}
}

func TestHealth(t *testing.T) {
	s := snap(t, fixture())
	keyB := circuit.Key("https://b.example/mcp", "docs.lookup")
	d := s.Decide(baseReq(), health{keyB: circuit.Open})
	if c := candidate(d, "docs-b"); readiness.Code(c.GetRejectionCode()) != readiness.CodeCircuitOpen || c.GetRejectedAtStep() != 6 {
		t.Fatalf("%v", c)
	}
	if got := routeNames(d); len(got) != 1 || got[0] != "docs-a" {
		t.Fatalf("routes %v", got)
	}
	// Half-open ranks below closed even when faster.
	d = snap(t, fixture()).Decide(baseReq(), health{keyB: circuit.HalfOpen})
	if got := routeNames(d); got[0] != "docs-a" || !d.Routes[1].HalfOpen {
		t.Fatalf("routes %v", got)
	}
	// Drift blocks at step 1.
	req := baseReq()
	req.Drift = drifted("docs-a")
	d = s.Decide(req, health{})
	if c := candidate(d, "docs-a"); readiness.Code(c.GetRejectionCode()) != readiness.CodeDriftBlocked {
		t.Fatalf("%v", c)
	}
}

func TestUnknownEvidenceRanksLast(t *testing.T) {
	in := fixture()
	delete(in.Evidence, "ev-a")
	in.Evidence["ev-b"].Latency = &mcpreadyv1.Latency{P50Ms: 900, P99Ms: 2000} // slow but known
	d := snap(t, in).Decide(baseReq(), nil)
	if got := routeNames(d); len(got) != 2 || got[0] != "docs-b" || !d.Routes[1].Unknown || d.Routes[1].EvidenceID != "" {
		t.Fatalf("routes %v", d.Routes)
	}
	// Expired evidence is unknown too (ALLOW).
	in = fixture()
	in.Evidence["ev-b"].ExpiresAt = timestamppb.New(t0.Add(-time.Minute))
	d = snap(t, in).Decide(baseReq(), nil)
	if got := routeNames(d); got[0] != "docs-a" || !d.Routes[1].Unknown {
		t.Fatalf("routes %v", got)
	}
}

func TestSideEffectsAndRetry(t *testing.T) {
	in := fixture()
	in.Policy.Principals[0].Allow = append(in.Policy.Principals[0].Allow, "com.example/tickets/*")
	in.Entries["tickets"].Idempotency = mcpreadyv1.IdempotencyClass_IDEMPOTENCY_CLASS_KEYED
	in.Entries["tickets"].SideEffect = stateCh
	s := snap(t, in)

	d := s.Decide(baseReq(), nil)
	r := d.Routes[0]
	if !r.Retryable || !r.ReadOnly || r.MaxAttempts != 2 || r.HedgeAfter != 50*time.Millisecond || r.PerAttempt != 5*time.Second ||
		r.ConsumerSideEffect != readOnly || d.Deadline != 10*time.Second {
		t.Fatalf("read-only route %+v", r)
	}

	req := baseReq()
	req.Tool = "com.example/tickets/create"
	d = s.Decide(req, nil)
	r = d.Routes[0]
	if r.Retryable || r.ReadOnly || r.MaxAttempts != 1 || r.HedgeAfter != 0 || r.PerAttempt != 10*time.Second || r.ConsumerSideEffect != stateCh {
		t.Fatalf("state-changing without key %+v", r)
	}
	req.IdempotencyKey = true
	if r := s.Decide(req, nil).Routes[0]; !r.Retryable || r.ReadOnly || r.HedgeAfter != 0 || r.MaxAttempts != 2 {
		t.Fatalf("keyed %+v", r)
	}

	// No consumer rule: UNKNOWN, called but never retried, even with a key
	// when the entry is not idempotent.
	in = fixture()
	in.Policy.SideEffects = nil
	in.Entries["docs-a"].Idempotency = mcpreadyv1.IdempotencyClass_IDEMPOTENCY_CLASS_NOT_IDEMPOTENT
	req = baseReq()
	req.Tool = "com.example/docs/docs.lookup"
	req.IdempotencyKey = true
	if r := snap(t, in).Decide(req, nil).Routes[0]; r.ConsumerSideEffect != unknown || r.Retryable {
		t.Fatalf("unknown %+v", r)
	}

	// Consumer says read-only, provider declares state-changing: conflict,
	// treated as state-changing.
	in = fixture()
	in.Declarations["com.example/docs"] = &mcpreadyv1.Declaration{ServerName: "com.example/docs",
		Tools: []*mcpreadyv1.DeclaredTool{{Name: "docs.lookup", SideEffect: stateCh}}}
	req.IdempotencyKey = false
	if r := snap(t, in).Decide(req, nil).Routes[0]; !r.SideEffectConflict || r.Retryable || r.ProviderSideEffect != stateCh {
		t.Fatalf("conflict %+v", r)
	}
}

func TestFallbackRules(t *testing.T) {
	in := fixture()
	in.Policy.EquivalenceClasses[0].FallbackAllowed = false
	if d := snap(t, in).Decide(baseReq(), nil); len(d.Routes) != 1 {
		t.Fatalf("no fallback: %v", routeNames(d))
	}
	in = fixture()
	in.Policy.EquivalenceClasses[0].FallbackRequiresApproval = true
	s := snap(t, in)
	if d := s.Decide(baseReq(), nil); len(d.Routes) != 1 {
		t.Fatalf("fallback needs approval, none available: %v", routeNames(d))
	}
	req := baseReq()
	req.ApprovalAvailable = true
	d := s.Decide(req, nil)
	if len(d.Routes) != 2 || d.Routes[0].ApprovalRequired || !d.Routes[1].ApprovalRequired {
		t.Fatalf("fallback approval: %+v", d.Routes)
	}
}

func TestHysteresis(t *testing.T) {
	in := fixture()
	s := snap(t, in)
	if got := routeNames(s.Decide(baseReq(), nil)); got[0] != "docs-b" {
		t.Fatalf("%v", got)
	}
	// docs-a becomes faster by less than the margin: docs-b stays preferred.
	in2 := fixture()
	in2.Evidence["ev-a"].Latency = &mcpreadyv1.Latency{P50Ms: 9, P99Ms: 36} // 22.5 vs 25: 10% better
	in2.Previous = s
	s2 := snap(t, in2)
	if got := routeNames(s2.Decide(baseReq(), nil)); got[0] != "docs-b" {
		t.Fatalf("swapped within margin: %v", got)
	}
	// Better by more than the margin: swap.
	in3 := fixture()
	in3.Evidence["ev-a"].Latency = &mcpreadyv1.Latency{P50Ms: 5, P99Ms: 20} // 12.5 vs 25
	in3.Previous = s2
	s3 := snap(t, in3)
	if got := routeNames(s3.Decide(baseReq(), nil)); got[0] != "docs-a" {
		t.Fatalf("no swap beyond margin: %v", got)
	}
	// Without a previous snapshot there is no preference: pure ranking.
	in4 := fixture()
	in4.Evidence["ev-a"].Latency = &mcpreadyv1.Latency{P50Ms: 9, P99Ms: 36}
	if got := routeNames(snap(t, in4).Decide(baseReq(), nil)); got[0] != "docs-a" {
		t.Fatalf("%v", got)
	}
}

func TestVisible(t *testing.T) {
	in := fixture()
	in.Entries["tickets"].WorkflowAllowlist = []string{"support"}
	s := snap(t, in)
	names := func(vs []Visible) []string {
		var out []string
		for _, v := range vs {
			out = append(out, v.Name)
		}
		return out
	}
	got := names(s.Visible(listReq("dev", "acme", "eu", "wf"), nil))
	want := []string{"docs_lookup", "com.evil/x/docs.lookup", "com.example/docs/docs.lookup"}
	if len(got) != len(want) {
		t.Fatalf("got %v want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("got %v want %v", got, want)
		}
	}
	if got := names(s.Visible(listReq("dev", "acme", "eu", "support"), nil)); len(got) != 4 {
		t.Fatalf("support workflow: %v", got)
	}
	vs := s.Visible(listReq("intern", "any", "eu", "wf"), nil)
	if len(vs) != 1 || !vs[0].Class || len(vs[0].Entries) != 1 || vs[0].Entries[0] != "docs-a" {
		t.Fatalf("intern: %+v", vs)
	}
	if vs := s.Visible(listReq("stranger", "", "", ""), nil); len(vs) != 0 {
		t.Fatalf("stranger sees %v", names(vs))
	}
}

func TestSnapshotErrors(t *testing.T) {
	if _, err := NewSnapshot(Inputs{}); err == nil {
		t.Fatal("no policy accepted")
	}
	in := fixture()
	in.Entries["bad"] = &mcpreadyv1.RegistryEntry{}
	if _, err := NewSnapshot(in); err == nil {
		t.Fatal("entry without identity accepted")
	}
	// Inputs are not mutated and snapshots are independent.
	in = fixture()
	before := proto.Clone(in.Policy)
	snap(t, in)
	if !proto.Equal(before, in.Policy) {
		t.Fatal("policy mutated")
	}
}

func TestGlob(t *testing.T) {
	for _, tc := range []struct {
		p, s string
		ok   bool
	}{
		{"*", "com.example/docs/docs.lookup", true},
		{"com.example/*", "com.example/docs/docs.lookup", true},
		{"*/docs.lookup", "com.example/docs/docs.lookup", true},
		{"com.*/docs/*", "com.example/docs/x", true},
		{"com.example/docs", "com.example/docs/x", false},
		{"a*b*c", "aXbYc", true},
		{"a*b*c", "aXbY", false},
		{"", "", true},
		{"", "x", false},
	} {
		if match(tc.p, tc.s) != tc.ok {
			t.Errorf("match(%q, %q) != %v", tc.p, tc.s, tc.ok)
		}
	}
}

func TestConcurrentDecide(t *testing.T) {
	s := snap(t, fixture())
	done := make(chan bool)
	for i := 0; i < 8; i++ {
		go func() {
			for j := 0; j < 500; j++ {
				if d := s.Decide(baseReq(), nil); d.Refusal != nil || len(d.Routes) != 2 {
					t.Error("bad decision")
				}
			}
			done <- true
		}()
	}
	for i := 0; i < 8; i++ {
		<-done
	}
}

// A *circuit.Set is read through cached breaker pointers; a different set
// (or a new snapshot) rebuilds the cache.
func TestCircuitSetHealth(t *testing.T) {
	s := snap(t, fixture())
	keyB := circuit.Key("https://b.example/mcp", "docs.lookup")
	cs := circuit.NewSet(circuit.Config{ConsecutiveFailures: 1, BaseEjection: time.Minute})
	if got := routeNames(s.Decide(baseReq(), cs)); len(got) != 2 {
		t.Fatalf("%v", got)
	}
	cs.Report(keyB, false, t0) // the cached breaker sees the new state
	d := s.Decide(baseReq(), cs)
	if c := candidate(d, "docs-b"); readiness.Code(c.GetRejectionCode()) != readiness.CodeCircuitOpen {
		t.Fatalf("%v", c)
	}
	req := baseReq()
	req.Now = t0.Add(time.Minute) // ejection over: half-open, ranked last
	if d := s.Decide(req, cs); d.Routes[0].Entry != "docs-a" || !d.Routes[1].HalfOpen {
		t.Fatalf("%v", routeNames(d))
	}
	fresh := circuit.NewSet(circuit.Config{})
	if got := routeNames(s.Decide(baseReq(), fresh)); len(got) != 2 {
		t.Fatalf("other set: %v", got)
	}
	if c := candidate(s.Decide(baseReq(), cs), "docs-b"); readiness.Code(c.GetRejectionCode()) != readiness.CodeCircuitOpen {
		t.Fatalf("back to first set: %v", c)
	}
}

func TestWithSelected(t *testing.T) {
	s := snap(t, fixture())
	d := s.Decide(baseReq(), nil)
	sel := d.WithSelected("docs-b")
	for i, c := range sel {
		if c.GetSelected() != (c.GetEntry() == "docs-b") {
			t.Fatalf("%v", c)
		}
		if d.Candidates[i].GetSelected() {
			t.Fatal("shared candidate modified")
		}
	}
	if s.Decide(baseReq(), nil).Candidates[0].GetSelected() {
		t.Fatal("selection leaked into later decisions")
	}
}

// The front's guards: breakers (Health) and the drift blocklist (passed
// explicitly as Request.Drift) together.
func TestGuardsCombination(t *testing.T) {
	set, block := circuit.NewSet(circuit.Config{ConsecutiveFailures: 1}), &pin.Blocklist{}
	s := snap(t, fixture())
	block.Block("docs-b", []mcpreadyv1.DriftLabel{mcpreadyv1.DriftLabel_DRIFT_LABEL_DEFINITION_DRIFT})
	set.Report(circuit.Key("https://a.example/mcp", "docs.lookup"), false, t0)
	req := baseReq()
	req.Drift = block
	d := s.Decide(req, set)
	if readiness.Code(candidate(d, "docs-b").GetRejectionCode()) != readiness.CodeDriftBlocked || readiness.Code(candidate(d, "docs-a").GetRejectionCode()) != readiness.CodeCircuitOpen {
		t.Fatalf("%v", d.Candidates)
	}
	var re *RefusalError
	if !errors.As(d.Refusal, &re) || re.Code != readiness.CodeCircuitOpen {
		t.Fatalf("%v", d.Refusal)
	}
}

// FuzzMatch checks the glob matcher against a regexp reference.
func FuzzMatch(f *testing.F) {
	f.Add("com.*/docs/*", "com.example/docs/x")
	f.Add("a*b*c", "aXbY")
	f.Add("**", "")
	f.Fuzz(func(t *testing.T, p, s string) {
		if len(p) > 64 || len(s) > 256 || !utf8.ValidString(p) || !utf8.ValidString(s) {
			return
		}
		parts := strings.Split(p, "*")
		for i := range parts {
			parts[i] = regexp.QuoteMeta(parts[i])
		}
		re := regexp.MustCompile(`(?s)\A` + strings.Join(parts, ".*") + `\z`)
		if got, want := match(p, s), re.MatchString(s); got != want {
			t.Fatalf("match(%q, %q) = %v, reference %v", p, s, got, want)
		}
	})
}

// Decisions that share a candidate list never see each other's outcomes.
func TestSharedCandidateLists(t *testing.T) {
	s := snap(t, fixture())
	intern := baseReq()
	intern.Principal, intern.Tenant = "intern", "x"
	for i := 0; i < 3; i++ {
		a := s.Decide(baseReq(), nil)
		b := s.Decide(intern, nil)
		a2 := s.Decide(baseReq(), nil)
		a3 := s.Decide(baseReq(), nil)
		if readiness.Code(candidate(a, "docs-b").GetRejectionCode()) != "" || readiness.Code(candidate(a2, "docs-b").GetRejectionCode()) != "" {
			t.Fatal("dev decision polluted")
		}
		if readiness.Code(candidate(b, "docs-b").GetRejectionCode()) != readiness.CodePrincipalDenied {
			t.Fatalf("intern: %v", candidate(b, "docs-b"))
		}
		if &a2.Candidates[0] != &a3.Candidates[0] || readiness.Code(candidate(a3, "docs-b").GetRejectionCode()) != "" {
			t.Fatal("identical outcomes should share one list")
		}
	}
}
