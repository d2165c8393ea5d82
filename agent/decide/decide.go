// Package decide is the host agent's routing decision: given verified
// artifacts (Policy, RegistryEntries, Declarations, Evidence) and one tool
// call request, it resolves the requested capability to a consumer-approved
// equivalence class, runs every candidate through the hard filters in the
// order of DESIGN.md §5, records the step and a stable code for every
// rejection, and ranks the admitted routes (latency last, with hysteresis).
//
// It is pure: no networking, no signature checks (the caller verifies every
// artifact before building a Snapshot), no clocks (the request carries Now;
// a zero Now falls back to time.Now).
// A Snapshot is immutable after NewSnapshot and safe for concurrent use; its
// only mutable state is atomics: the per-class preferred route (hysteresis),
// the previous result lists (shared by equal decisions) and a cache of
// breaker pointers. Decisions are read-only for the same reason.
//
// Safe defaults, by design: an empty Policy.inventory admits nothing; a
// principal class with no PrincipalRule (and no "*" rule) may call nothing;
// a tool with no Policy.side_effects rule is UNKNOWN, which is treated as
// state-changing (called, never retried, never hedged); evidence.on_unknown
// UNSPECIFIED behaves as ALLOW (admitted, ranked below fresh evidence), and
// DENY rejects; evidence below the required independence or minimum
// confidence does not count (it is treated as missing, and DENY rejects
// with the specific code); a server past its declared end of life is not
// eligible, and a deprecated one ranks below the others of its evidence
// and health tier; an exact "<server>/<tool>" request needs a rule that names
// the tool, a rule naming its class is not enough.
package decide

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/mcpready/mcpready/agent/circuit"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/readiness"
)

const (
	defaultDeadline          = 30 * time.Second
	defaultMaxAttempts       = 3
	defaultHysteresis        = 0.2
	defaultMaxRoutes         = 4
	defaultBaseBackoff       = 100 * time.Millisecond
	defaultMaxBackoff        = 2 * time.Second
	maxSteps                 = readiness.StepLatency + 1
	noPreference       int32 = -1
)

// ErrRefused matches every *RefusalError (errors.Is).
var ErrRefused = errors.New("refused by policy")

// RefusalError says why no route was admitted: the rejection of the
// candidate that got furthest through the filters, or the resolution failure.
type RefusalError struct {
	Step   readiness.Step
	Code   readiness.Code
	Reason string
}

func (e *RefusalError) Error() string {
	return fmt.Sprintf("refused at step %d (%s): %s", e.Step, e.Code, e.Reason)
}

// Is makes errors.Is(err, ErrRefused) true.
func (e *RefusalError) Is(target error) bool { return target == ErrRefused }

// Inputs are verified artifacts: the caller has already checked every
// signature against its TrustPolicy. Maps are keyed by metadata.name.
type Inputs struct {
	PolicyName, PolicyVersion string
	Policy                    *mcpreadyv1.Policy
	Entries                   map[string]*mcpreadyv1.RegistryEntry
	// Declarations keyed by server name (Declaration.server_name, which is
	// also its metadata.name).
	Declarations map[string]*mcpreadyv1.Declaration
	Evidence     map[string]*mcpreadyv1.Evidence
	// HysteresisMargin: a challenger replaces the current preferred route
	// only when its latency score is better by more than this fraction.
	// Zero means 0.2.
	HysteresisMargin float64
	// MaxRoutes bounds the fallback chain: at most this many admitted
	// candidates become Routes (the rest stay admitted candidates), so a
	// failing class cannot fan one call out across every member. Zero
	// means 4.
	MaxRoutes int
	// Previous, when set, carries the preferred route of each class over to
	// the new snapshot so a configuration update does not reshuffle traffic.
	Previous *Snapshot
}

// Request is one tool call to decide.
type Request struct {
	// Tool is a capability (equivalence class name) or an exact tool
	// "<server>/<tool>".
	Tool                                string
	Principal, Tenant, Region, Workflow string
	// ProtocolVersion the calling client negotiated; checked against
	// Policy.protocol_versions when both are set.
	ProtocolVersion string
	// IdempotencyKey: the caller supplied an idempotency key.
	IdempotencyKey bool
	// ApprovalAvailable: a human can be asked (the client supports MCP
	// elicitation). Tools that require approval are refused without it.
	ApprovalAvailable bool
	// Deadline is the caller's own remaining budget; zero means none, so the
	// policy deadline applies. The narrower of the two wins.
	Deadline time.Duration
	// Now is the decision time (evidence and entry expiry). Zero means
	// time.Now(), so a forgotten clock never makes stale evidence fresh.
	Now time.Time
}

// Health reports the breaker state of a circuit key (Route.CircuitKey).
// *circuit.Set implements it. A nil Health means everything is Closed.
type Health interface {
	State(key string, now time.Time) circuit.State
}

// DriftGuard may additionally be implemented by the Health passed to Decide:
// entries it reports are rejected at step 1 (drift_blocked) because their
// live tool definition no longer matches the pinned one.
type DriftGuard interface {
	Drifted(entry string) bool
}

// Backoff is the retry backoff of the policy.
type Backoff struct {
	Base, Max time.Duration
}

// Route is one admitted way to serve the call.
type Route struct {
	Entry    string // RegistryEntry name
	Spec     *mcpreadyv1.RegistryEntry
	Identity *mcpreadyv1.ToolIdentity
	// CircuitKey is circuit.Key(endpoint, tool).
	CircuitKey string
	// Class is the equivalence class name, "" for an exact-tool request.
	Class string
	// ProviderSideEffect: from the provider's Declaration, else the entry.
	// ConsumerSideEffect: assigned by Policy.side_effects, else UNKNOWN.
	ProviderSideEffect, ConsumerSideEffect mcpreadyv1.SideEffectClass
	// SideEffectConflict: the consumer says READ_ONLY but the provider
	// declares more; the route is then treated as state-changing.
	SideEffectConflict bool
	// Retryable: consumer READ_ONLY (without conflict), or an idempotency key
	// is present and the entry is KEYED or NATURALLY_IDEMPOTENT.
	Retryable bool
	// ReadOnly: consumer READ_ONLY without conflict (hedging allowed).
	ReadOnly         bool
	ApprovalRequired bool
	// MaxAttempts on this route: Policy.retry.max_attempts (default 3) when
	// Retryable and RetryOn allows some retry, else 1.
	MaxAttempts int
	// RetryOn: the failure conditions a Retryable route is retried on
	// (policy conditions narrowed by the provider's declared ones; zero is
	// the default set).
	RetryOn RetryConditions
	// PerAttempt timeout: Policy.retry.per_attempt_timeout, else the
	// decision deadline / MaxAttempts.
	PerAttempt time.Duration
	// HedgeAfter: Policy.retry.hedge_after for ReadOnly routes, else 0.
	HedgeAfter time.Duration
	// OutputSchemaDigest is the pinned output schema digest ("" if none).
	OutputSchemaDigest string
	// EvidenceID is the Evidence used ("" when Unknown).
	EvidenceID string
	// Unknown: no fresh evidence; admitted by on_unknown ALLOW, ranked below
	// routes with fresh evidence.
	Unknown bool
	// HalfOpen: the breaker is re-admitting gradually; ranked below closed.
	HalfOpen bool
	// Deprecated: the provider's Declaration deprecated the server
	// (deprecated_at passed); ranked below the other routes of its evidence
	// and health tier.
	Deprecated bool
	// P50, P99 latency from evidence (0 when unknown).
	P50, P99 time.Duration
}

// Decision is the outcome of Decide.
type Decision struct {
	// Requested is Request.Tool; Class the resolved equivalence class ("" for
	// an exact tool).
	Requested, Class string
	// Candidates: every candidate considered, with rejected_at_step, code and
	// reason for the rejected ones. The slice and the records are shared
	// with other decisions and must not be modified: use WithSelected for
	// the receipt.
	Candidates []*mcpreadyv1.Candidate
	// Routes: admitted, best first; the fallback order. Only the first when
	// the class does not allow fallback; at most Inputs.MaxRoutes. Shared
	// with other decisions: read-only.
	Routes        []Route
	PolicyVersion string
	// EvidenceIDs used by the routes (shared, read-only).
	EvidenceIDs []string
	// Deadline is the one end-to-end deadline of the call.
	Deadline time.Duration
	Backoff  Backoff
	// Refusal is non-nil (a *RefusalError) when no route is admitted.
	Refusal error
}

// WithSelected returns the candidates for a receipt, with the one for entry
// copied and marked selected (the shared candidates stay untouched).
func (d *Decision) WithSelected(entry string) []*mcpreadyv1.Candidate {
	out := make([]*mcpreadyv1.Candidate, len(d.Candidates))
	copy(out, d.Candidates)
	for i, c := range out {
		if c.GetEntry() == entry {
			sel := proto.CloneOf(c)
			sel.Selected = true
			out[i] = sel
		}
	}
	return out
}

// Visible is one tool a principal may see in tools/list.
type Visible struct {
	// Name: the class name for a capability, "<server>/<tool>" for an exact
	// tool.
	Name        string
	Class       bool
	Description string // the class description ("" for exact tools)
	// Server and Tool of an exact tool ("" for a class).
	Server, Tool string
	// Entries that could serve it (before health and evidence checks).
	Entries []string
}

type rejection struct {
	code   readiness.Code
	reason string
}

// Per-request rejections with fixed reasons. The request's own values
// (principal, tenant, region, workflow, protocol version) are recorded in
// the receipt beside the candidates, so reasons need not repeat them; each
// entry keeps one shared Candidate record per fixed rejection, so these
// outcomes allocate nothing per call.
var (
	rejDrift               = rejection{readiness.CodeDriftBlocked, "the live tool definition drifted from the pinned one"}
	rejWorkflow            = rejection{readiness.CodeWorkflow, "BLOCKED: the workflow is not on the entry's allowlist"}
	rejClientProtocol      = rejection{readiness.CodeProtocolVersion, "the client's protocol version is not permitted by policy"}
	rejEntryTenant         = rejection{readiness.CodeTenant, "the tenant class is outside the entry's tenant boundary"}
	rejRuleTenant          = rejection{readiness.CodeTenant, "no rule for the principal class covers the tenant class"}
	rejPrincipalDenied     = rejection{readiness.CodePrincipalDenied, "a rule denies the principal class this tool"}
	rejPrincipalNotAllowed = rejection{readiness.CodePrincipalDenied, "no rule allows the principal class this tool"}
	rejSameRegion          = rejection{readiness.CodeResidency, "same-region only: the server is not in the caller's region"}
	rejNotEquivalent       = rejection{readiness.CodeNotEquivalent, "same tool name only: not an approved member of the equivalence class"}
	rejApproval            = rejection{readiness.CodeApprovalUnavailable, "human approval is required and the client cannot be asked"}
	rejIdempotency         = rejection{readiness.CodeIdempotencyRequired, "policy requires an idempotency key for calls that may change state"}
	rejCircuit             = rejection{readiness.CodeCircuitOpen, "circuit breaker is open"}
	rejNoEvidence          = rejection{readiness.CodeEvidenceUnknown, "no accepted evidence covers this tool for this principal and tenant"}
	fixedRejections        = [...]struct {
		step readiness.Step
		rej  rejection
	}{
		{readiness.StepEligibility, rejDrift}, {readiness.StepEligibility, rejWorkflow}, {readiness.StepEligibility, rejClientProtocol},
		{readiness.StepTrust, rejEntryTenant}, {readiness.StepTrust, rejRuleTenant}, {readiness.StepTrust, rejPrincipalDenied}, {readiness.StepTrust, rejPrincipalNotAllowed},
		{readiness.StepResidency, rejSameRegion}, {readiness.StepSemantic, rejNotEquivalent},
		{readiness.StepSideEffect, rejApproval}, {readiness.StepSideEffect, rejIdempotency},
		{readiness.StepHealth, rejCircuit}, {readiness.StepHealth, rejNoEvidence},
	}
)

type evidenceRef struct {
	id                   string
	principal, tenant    string
	observed, expires    int64 // unix nanos; expires is the earlier of expires_at and observed+max_age
	p50, p99             time.Duration
	hasLatency, tooSmall bool
	// unfit: why the evidence never counts (required independence or
	// minimum confidence not met); zero when it may.
	unfit rejection
}

type entry struct {
	idx                                 int
	name, key, server, tool, circuitKey string
	spec                                *mcpreadyv1.RegistryEntry
	static                              [maxSteps]rejection
	workflows, tenants                  []string
	region                              string
	providerSE, consumerSE              mcpreadyv1.SideEffectClass
	conflict, readOnly, keyed, approval bool
	stateChanging                       bool
	evidence                            []evidenceRef // freshest first
	perAttemptRetry, perAttemptOne      time.Duration // 0: derive from deadline
	retryOn                             RetryConditions
	// expires: unix nanos of the entry's provenance expiry, endOfLife of
	// the declared end of life, deprecated of the declared deprecation; 0 =
	// none. expiresRej and endOfLifeRej are their rejections, with shared
	// records.
	expires, endOfLife, deprecated int64
	expiresRej, endOfLifeRej       rejection
	expiresPB, endOfLifePB         *mcpreadyv1.Candidate
	admitted                       *mcpreadyv1.Candidate // shared, immutable
	staticPB                       [maxSteps]*mcpreadyv1.Candidate
	fixedPB                        [len(fixedRejections)]*mcpreadyv1.Candidate
}

type cand struct {
	e      *entry
	member bool // member of the approved class (false: look-alike by name)
	// verdict per principal rule: +1 allow, -1 deny, 0 no match.
	verdict []int8
}

type group struct {
	name, description string
	class             bool
	fallback          bool
	fallbackApproval  bool
	cands             []cand
	preferred         atomic.Int32 // entry idx of the last best route, or -1
	// last is the candidate list of the previous decision; a decision with
	// the same outcome for every candidate shares it instead of allocating.
	last       atomic.Pointer[[]*mcpreadyv1.Candidate]
	lastRoutes atomic.Pointer[routeSet]
}

type rule struct {
	tenants []string
}

// Snapshot is the precomputed, immutable decision table of one verified
// configuration.
type Snapshot struct {
	warnings      []string
	policyVersion string
	policy        *mcpreadyv1.Policy
	entries       []*entry
	groups        map[string]*group // classes and exact tools by name
	classNames    []string          // sorted
	exactNames    []string          // sorted
	rules         []rule
	principals    map[string][]int // principal class -> rule indexes (incl. "*")
	wildcardRules []int
	protocols     []string
	sameRegion    bool
	denyUnknown   bool
	deadline      time.Duration
	maxAttempts   int
	hedgeAfter    time.Duration
	backoff       Backoff
	requireKey    bool
	margin        float64
	maxRoutes     int
	breakers      atomic.Pointer[breakerCache]
}

// NewSnapshot precomputes everything request-independent. It fails only on
// a missing policy or an entry without identity.
func NewSnapshot(in Inputs) (*Snapshot, error) {
	p := in.Policy
	if p == nil {
		return nil, errors.New("decide: no policy")
	}
	s := &Snapshot{
		policyVersion: in.PolicyVersion,
		policy:        p,
		groups:        map[string]*group{},
		principals:    map[string][]int{},
		protocols:     p.GetProtocolVersions(),
		sameRegion:    p.GetResidency().GetSameRegionOnly(),
		denyUnknown:   p.GetEvidence().GetOnUnknown() == mcpreadyv1.UnknownEvidenceAction_UNKNOWN_EVIDENCE_ACTION_DENY,
		deadline:      p.GetDeadline().AsDuration(),
		maxAttempts:   int(p.GetRetry().GetMaxAttempts()),
		hedgeAfter:    p.GetRetry().GetHedgeAfter().AsDuration(),
		backoff:       Backoff{Base: p.GetRetry().GetBaseBackoff().AsDuration(), Max: p.GetRetry().GetMaxBackoff().AsDuration()},
		requireKey:    p.GetRetry().GetRequireIdempotencyKeyForWrites(),
		margin:        in.HysteresisMargin,
		maxRoutes:     in.MaxRoutes,
	}
	if s.maxRoutes <= 0 {
		s.maxRoutes = defaultMaxRoutes
	}
	if s.policyVersion == "" {
		s.policyVersion = p.GetProvenance().GetVersion()
	}
	if s.deadline <= 0 {
		s.deadline = defaultDeadline
	}
	if s.maxAttempts <= 0 {
		s.maxAttempts = defaultMaxAttempts
	}
	if s.backoff.Base <= 0 {
		s.backoff.Base = defaultBaseBackoff
	}
	if s.backoff.Max < s.backoff.Base {
		s.backoff.Max = max(defaultMaxBackoff, s.backoff.Base)
	}
	if s.margin <= 0 || s.margin >= 1 {
		s.margin = defaultHysteresis
	}

	names := make([]string, 0, len(in.Entries))
	for n := range in.Entries {
		names = append(names, n)
	}
	sort.Strings(names)
	evidenceBy := indexEvidence(p, in.Evidence)
	for _, n := range names {
		re := in.Entries[n]
		id := re.GetIdentity()
		if id.GetServerName() == "" || id.GetToolName() == "" {
			return nil, fmt.Errorf("decide: registry entry %q has no server or tool name", n)
		}
		e := s.newEntry(len(s.entries), n, re, in.Declarations[id.GetServerName()])
		e.evidence = evidenceBy[id.GetServerName()+"/"+id.GetToolName()].applicable(re, in.Declarations[id.GetServerName()])
		s.entries = append(s.entries, e)
	}

	// Principal rules: "*" applies to every principal class.
	for i, pr := range p.GetPrincipals() {
		s.rules = append(s.rules, rule{tenants: pr.GetTenantClasses()})
		if pr.GetPrincipalClass() == "*" {
			s.wildcardRules = append(s.wildcardRules, i)
			continue
		}
		s.principals[pr.GetPrincipalClass()] = append(s.principals[pr.GetPrincipalClass()], i)
	}
	for k, v := range s.principals {
		s.principals[k] = append(v, s.wildcardRules...)
	}

	// Equivalence classes: members by pattern, look-alikes by tool name.
	for _, ec := range p.GetEquivalenceClasses() {
		if ec.GetName() == "" {
			continue
		}
		g := &group{name: ec.GetName(), description: ec.GetDescription(), class: true,
			fallback: ec.GetFallbackAllowed(), fallbackApproval: ec.GetFallbackRequiresApproval()}
		lookalike := map[string]bool{}
		for _, m := range ec.GetMembers() {
			if i := strings.LastIndexByte(m, '/'); i >= 0 && !strings.ContainsRune(m[i+1:], '*') {
				lookalike[m[i+1:]] = true
			}
		}
		for _, e := range s.entries {
			member := matchAny(ec.GetMembers(), e.key)
			if member || lookalike[e.tool] {
				g.cands = append(g.cands, s.newCand(e, member, g.name, true))
			}
		}
		g.preferred.Store(noPreference)
		s.groups[g.name] = g
		s.classNames = append(s.classNames, g.name)
	}
	// Exact tools: every "<server>/<tool>" key; entries with the same key
	// (other endpoints or versions) are each other's fallbacks.
	for _, e := range s.entries {
		g := s.groups[e.key]
		if g == nil {
			g = &group{name: e.key, fallback: true}
			g.preferred.Store(noPreference)
			s.groups[e.key] = g
			s.exactNames = append(s.exactNames, e.key)
		}
		if !g.class {
			g.cands = append(g.cands, s.newCand(e, true, "", false))
		}
	}
	sort.Strings(s.classNames)
	sort.Strings(s.exactNames)

	if prev := in.Previous; prev != nil {
		byName := map[string]int{}
		for _, e := range s.entries {
			byName[e.name] = e.idx
		}
		for name, g := range s.groups {
			if pg := prev.groups[name]; pg != nil {
				if pi := pg.preferred.Load(); pi >= 0 {
					if i, ok := byName[prev.entries[pi].name]; ok {
						g.preferred.Store(int32(i))
					}
				}
			}
		}
	}
	s.warnings = unknownNames(in)
	return s, nil
}

// newCand precomputes each principal rule's verdict for e in a group. Class
// groups match rules on the class name or the member key; exact groups only
// on the key (a class permission does not grant the exact tool).
func (s *Snapshot) newCand(e *entry, member bool, className string, class bool) cand {
	c := cand{e: e, member: member, verdict: make([]int8, len(s.policy.GetPrincipals()))}
	for i, pr := range s.policy.GetPrincipals() {
		hit := func(patterns []string) bool {
			return matchAny(patterns, e.key) || (class && matchAny(patterns, className))
		}
		switch {
		case hit(pr.GetDeny()):
			c.verdict[i] = -1
		case hit(pr.GetAllow()):
			c.verdict[i] = 1
		}
	}
	return c
}

func (s *Snapshot) newEntry(idx int, name string, re *mcpreadyv1.RegistryEntry, decl *mcpreadyv1.Declaration) *entry {
	p := s.policy
	id := re.GetIdentity()
	e := &entry{
		idx: idx, name: name, spec: re,
		server: id.GetServerName(), tool: id.GetToolName(),
		key:        id.GetServerName() + "/" + id.GetToolName(),
		circuitKey: circuit.Key(id.GetEndpoint(), id.GetToolName()),
		workflows:  re.GetWorkflowAllowlist(),
		tenants:    re.GetTenantClasses(),
		region:     re.GetRegion(),
	}
	set := func(step readiness.Step, code readiness.Code, format string, a ...any) {
		if e.static[step].code == "" {
			e.static[step] = rejection{code, fmt.Sprintf(format, a...)}
		}
	}

	// 1 eligibility.
	if !matchAny(p.GetInventory(), name) && !matchAny(p.GetInventory(), e.key) {
		set(readiness.StepEligibility, readiness.CodeNotInInventory, "entry %s is not in the approved inventory", name)
	}
	if eps := p.GetApprovedEndpoints(); len(eps) > 0 && !matchAny(eps, id.GetEndpoint()) {
		set(readiness.StepEligibility, readiness.CodeEndpointNotApproved, "endpoint %q is not approved", id.GetEndpoint())
	}
	if st := re.GetState(); st != mcpreadyv1.LifecycleState_LIFECYCLE_STATE_QUALIFIED {
		set(readiness.StepEligibility, readiness.CodeLifecycle, "lifecycle state is %s, not QUALIFIED", strings.TrimPrefix(st.String(), "LIFECYCLE_STATE_"))
	}
	if len(s.protocols) > 0 && !contains(s.protocols, id.GetProtocolVersion()) {
		set(readiness.StepEligibility, readiness.CodeProtocolVersion, "entry protocol version %q is not permitted by policy", id.GetProtocolVersion())
	}
	// Time-dependent static facts are checked per request (see expiry).

	// 2 trust and authority.
	if owners := p.GetApprovedOwners(); len(owners) > 0 {
		owner := decl.GetOwner()
		if owner == "" {
			owner = re.GetProvenance().GetOwner()
		}
		if !contains(owners, owner) {
			set(readiness.StepTrust, readiness.CodeOwnerNotApproved, "owner %q is not approved", owner)
		}
	}
	auth := p.GetAuth()
	if issuers := auth.GetPermittedIssuers(); len(issuers) > 0 {
		for _, as := range decl.GetAuth().GetAuthorizationServers() {
			if !contains(issuers, as) {
				set(readiness.StepTrust, readiness.CodeIssuerNotPermitted, "authorization server %q is not a permitted issuer", as)
			}
		}
	}
	if schemes := auth.GetRequiredSchemes(); len(schemes) > 0 {
		ok := contains(schemes, re.GetAuthority().GetCredentialMode())
		for _, m := range decl.GetAuth().GetMethods() {
			ok = ok || contains(schemes, m)
		}
		if !ok {
			set(readiness.StepTrust, readiness.CodeAuthScheme, "no required auth scheme (%s) is declared", strings.Join(schemes, ", "))
		}
	}
	if permitted := auth.GetPermittedScopes(); len(permitted) > 0 {
		for _, sc := range re.GetAuthority().GetScopes() {
			if !contains(permitted, sc) {
				set(readiness.StepTrust, readiness.CodeScopeNotPermitted, "scope %q exceeds the permitted scopes", sc)
			}
		}
	}

	// 3 security and residency (the caller's region is checked per request).
	res := p.GetResidency()
	if allowed := res.GetAllowedRegions(); len(allowed) > 0 && !contains(allowed, e.region) {
		set(readiness.StepResidency, readiness.CodeResidency, "region %q is not an allowed region", e.region)
	}
	if contains(res.GetDeniedRegions(), e.region) {
		set(readiness.StepResidency, readiness.CodeResidency, "region %q is denied", e.region)
	}
	if dcs := res.GetAllowedDataClasses(); len(dcs) > 0 && !slices.Contains(dcs, re.GetDataAccess()) {
		set(readiness.StepResidency, readiness.CodeDataClass, "data access class %s is not allowed", strings.TrimPrefix(re.GetDataAccess().String(), "DATA_ACCESS_CLASS_"))
	}

	// 5 side-effect safety (static part).
	e.providerSE = re.GetSideEffect()
	for _, t := range decl.GetTools() {
		if t.GetName() == e.tool && t.GetSideEffect() != mcpreadyv1.SideEffectClass_SIDE_EFFECT_CLASS_UNSPECIFIED {
			e.providerSE = t.GetSideEffect()
		}
	}
	if e.providerSE == mcpreadyv1.SideEffectClass_SIDE_EFFECT_CLASS_UNSPECIFIED {
		e.providerSE = mcpreadyv1.SideEffectClass_SIDE_EFFECT_CLASS_UNKNOWN
	}
	e.consumerSE = mcpreadyv1.SideEffectClass_SIDE_EFFECT_CLASS_UNKNOWN
	for _, r := range p.GetSideEffects() {
		if match(r.GetMatch(), e.key) {
			if r.GetAssigned() != mcpreadyv1.SideEffectClass_SIDE_EFFECT_CLASS_UNSPECIFIED {
				e.consumerSE = r.GetAssigned()
			}
			break
		}
	}
	readOnly := mcpreadyv1.SideEffectClass_SIDE_EFFECT_CLASS_READ_ONLY
	e.conflict = e.consumerSE == readOnly && e.providerSE != readOnly &&
		e.providerSE != mcpreadyv1.SideEffectClass_SIDE_EFFECT_CLASS_UNKNOWN
	e.readOnly = e.consumerSE == readOnly && !e.conflict
	e.stateChanging = !e.readOnly
	switch re.GetIdempotency() {
	case mcpreadyv1.IdempotencyClass_IDEMPOTENCY_CLASS_KEYED, mcpreadyv1.IdempotencyClass_IDEMPOTENCY_CLASS_NATURALLY_IDEMPOTENT:
		e.keyed = true
	}
	e.approval = re.GetApprovalRequired()
	for _, a := range p.GetApprovals() {
		if a.GetRequired() && match(a.GetMatch(), e.key) {
			e.approval = true
		}
	}

	// 7 cost (declared price vs the policy's ceiling).
	if ceiling := p.GetCost().GetMaxCostPerCall(); ceiling > 0 {
		pr := decl.GetPricing()
		if amt, err := strconv.ParseFloat(pr.GetAmount(), 64); err == nil {
			cur := p.GetCost().GetCurrency()
			switch {
			case cur != "" && pr.GetCurrency() != "" && cur != pr.GetCurrency():
				set(readiness.StepBudget, readiness.CodeCost, "declared price is in %s, policy ceiling in %s", pr.GetCurrency(), cur)
			case amt > ceiling:
				set(readiness.StepBudget, readiness.CodeCost, "declared price %g exceeds the ceiling %g per call", amt, ceiling)
			}
		}
	}

	if pa := p.GetRetry().GetPerAttemptTimeout().AsDuration(); pa > 0 {
		e.perAttemptRetry, e.perAttemptOne = pa, pa
	}
	e.retryOn = retryConditions(p.GetRetry(), decl)
	if exp := re.GetProvenance().GetExpiresAt(); exp != nil {
		e.expires = exp.AsTime().UnixNano()
		e.expiresRej = rejection{readiness.CodeEntryExpired, "registry entry expired at " + exp.AsTime().UTC().Format(time.RFC3339)}
		e.expiresPB = e.candidate(readiness.StepEligibility, e.expiresRej)
	}
	if eol := decl.GetEndOfLifeAt(); eol != nil {
		e.endOfLife = eol.AsTime().UnixNano()
		e.endOfLifeRej = rejection{readiness.CodeEndOfLife, "the provider declared the server's end of life at " + eol.AsTime().UTC().Format(time.RFC3339)}
		e.endOfLifePB = e.candidate(readiness.StepEligibility, e.endOfLifeRej)
	}
	if dep := decl.GetDeprecatedAt(); dep != nil {
		e.deprecated = dep.AsTime().UnixNano()
	}
	e.admitted = e.candidate(0, rejection{})
	for step := range e.static {
		if e.static[step].code != "" {
			e.staticPB[step] = e.candidate(readiness.Step(step), e.static[step])
		}
	}
	for i, f := range fixedRejections {
		e.fixedPB[i] = e.candidate(f.step, f.rej)
	}
	return e
}

// record returns the Candidate of e for an outcome: a shared record for
// admission and for request-independent rejections, else a new one.
func (e *entry) record(step readiness.Step, rj rejection) *mcpreadyv1.Candidate {
	if step == 0 {
		return e.admitted
	}
	if pb := e.staticPB[step]; pb != nil && e.static[step] == rj {
		return pb
	}
	switch {
	case step == readiness.StepEligibility && e.expiresPB != nil && rj == e.expiresRej:
		return e.expiresPB
	case step == readiness.StepEligibility && e.endOfLifePB != nil && rj == e.endOfLifeRej:
		return e.endOfLifePB
	}
	for i := range fixedRejections {
		if f := &fixedRejections[i]; f.step == step && f.rej == rj {
			return e.fixedPB[i]
		}
	}
	return e.candidate(step, rj)
}

// candidate builds the receipt Candidate of e with rejection rj at step.
func (e *entry) candidate(step readiness.Step, rj rejection) *mcpreadyv1.Candidate {
	return &mcpreadyv1.Candidate{Entry: e.name, ServerName: e.server, ToolName: e.tool, Endpoint: e.spec.GetIdentity().GetEndpoint(),
		RejectedAtStep: step, RejectionCode: string(rj.code), RejectionReason: rj.reason}
}

// Tier bits of an admitted candidate; a lower tier ranks first, so unknown
// evidence weighs most, then a half-open breaker, then deprecation.
const (
	tierDeprecated = 1 << iota
	tierHalfOpen
	tierUnknown
)

// admitted is one candidate that passed steps 1-7, kept pointer-free so
// ranking sorts it without write barriers.
type admitted struct {
	ci         int32 // index in group.cands
	ev         int32 // index in entry.evidence, -1 when unknown
	tier       int8  // tierDeprecated | tierHalfOpen | tierUnknown
	retryable  bool
	attempts   int8 // MaxAttempts of the route (1 unless retryable)
	score      float64
	perAttempt time.Duration
}

// Decide runs req through the filters. It never blocks; it allocates only
// the returned Decision.
func (s *Snapshot) Decide(req Request, h Health) Decision {
	if req.Now.IsZero() {
		req.Now = time.Now()
	}
	d := Decision{Requested: req.Tool, PolicyVersion: s.policyVersion, Backoff: s.backoff}
	d.Deadline = s.deadline
	if req.Deadline > 0 && req.Deadline < d.Deadline {
		d.Deadline = req.Deadline
	}
	g := s.groups[req.Tool]
	if g == nil {
		d.Refusal = &RefusalError{Step: readiness.StepResolve, Code: readiness.CodeUnknownTool,
			Reason: fmt.Sprintf("%q is neither an approved capability nor an inventoried tool", req.Tool)}
		return d
	}
	if g.class {
		d.Class = g.name
	}
	var rbuf [16]int
	x := call{req: &req, gr: s.grantFor(req.Principal, req.Tenant, rbuf[:]), now: req.Now.UnixNano(), deadline: d.Deadline}
	var drift DriftGuard
	if h != nil {
		drift, _ = h.(DriftGuard)
		if src, ok := h.(BreakerSource); ok {
			x.brk = s.breakersFor(src)
		}
	}

	n := len(g.cands)
	var shared []*mcpreadyv1.Candidate // the previous list, while it still matches
	if p := g.last.Load(); p != nil && len(*p) == n {
		shared = *p
	}
	var own []*mcpreadyv1.Candidate // allocated at the first difference
	var buf [64]admitted
	adm := buf[:0]
	bestStep, bestIdx := readiness.Step(-1), 0
	var bestRej rejection
	for i := range g.cands {
		c := &g.cands[i]
		e := c.e
		a := admitted{ci: int32(i)}
		step, rej := s.evaluate(c, g, &x, h, drift, &a)
		pb := e.record(step, rej)
		switch {
		case own != nil:
			own[i] = pb
		case shared == nil || shared[i] != pb:
			own = make([]*mcpreadyv1.Candidate, n)
			copy(own, shared[:min(i, len(shared))])
			own[i] = pb
		}
		if step > 0 {
			if step > bestStep {
				bestStep, bestIdx, bestRej = step, i, rej
			}
			continue
		}
		adm = append(adm, a)
	}
	if own != nil {
		d.Candidates = own
		last := own
		g.last.Store(&last)
	} else {
		d.Candidates = shared
	}
	if len(adm) == 0 {
		if bestStep < 0 {
			d.Refusal = &RefusalError{Step: readiness.StepResolve, Code: readiness.CodeUnknownTool, Reason: fmt.Sprintf("%q has no candidates", req.Tool)}
		} else {
			d.Refusal = &RefusalError{Step: bestStep, Code: bestRej.code, Reason: g.cands[bestIdx].e.name + ": " + bestRej.reason}
		}
		return d
	}
	k := s.maxRoutes
	if !g.fallback || (g.fallbackApproval && !req.ApprovalAvailable) {
		k = 1
	}
	s.rank(g, adm, k)
	adm = adm[:min(k, len(adm))]
	// Build on the stack; share the previous decision's routes when equal.
	var rb [8]Route
	var eb [8]string
	routes, ev := rb[:0], eb[:0]
	for i := range adm {
		var r Route
		s.fill(&r, g, &adm[i])
		if i > 0 && g.fallbackApproval {
			r.ApprovalRequired = true
		}
		routes = append(routes, r)
		if r.EvidenceID != "" {
			ev = append(ev, r.EvidenceID)
		}
	}
	last := g.lastRoutes.Load()
	if last == nil || !slices.Equal(last.routes, routes) || !slices.Equal(last.evidence, ev) {
		last = &routeSet{routes: slices.Clone(routes)}
		if len(ev) > 0 {
			last.evidence = slices.Clone(ev)
		}
		g.lastRoutes.Store(last)
	}
	d.Routes, d.EvidenceIDs = last.routes, last.evidence
	return d
}

// routeSet is a decision's routes and evidence ids, shared by later
// decisions with the same result.
type routeSet struct {
	routes   []Route
	evidence []string
}

// evaluate runs steps 1-7 for one candidate; it returns the failing step (0
// when admitted) and fills a for admitted candidates.
func (s *Snapshot) evaluate(c *cand, g *group, x *call, h Health, drift DriftGuard, a *admitted) (readiness.Step, rejection) {
	e, req, now, deadline := c.e, x.req, x.now, x.deadline
	// 1 eligibility.
	if rj := e.static[readiness.StepEligibility]; rj.code != "" {
		return readiness.StepEligibility, rj
	}
	if rj, bad := s.expiry(e, now); bad {
		return readiness.StepEligibility, rj
	}
	if drift != nil && drift.Drifted(e.name) {
		return readiness.StepEligibility, rejDrift
	}
	if len(e.workflows) > 0 && !contains(e.workflows, req.Workflow) {
		return readiness.StepEligibility, rejWorkflow
	}
	if req.ProtocolVersion != "" && len(s.protocols) > 0 && !contains(s.protocols, req.ProtocolVersion) {
		return readiness.StepEligibility, rejClientProtocol
	}
	// 2 trust and authority.
	if rj := e.static[readiness.StepTrust]; rj.code != "" {
		return readiness.StepTrust, rj
	}
	if rj, bad := s.authorise(c, req, x.gr); bad {
		return readiness.StepTrust, rj
	}
	// 3 security and residency.
	if rj := e.static[readiness.StepResidency]; rj.code != "" {
		return readiness.StepResidency, rj
	}
	if s.sameRegion && (e.region == "" || e.region != req.Region) {
		return readiness.StepResidency, rejSameRegion
	}
	// 4 semantic suitability.
	if !c.member {
		return readiness.StepSemantic, rejNotEquivalent
	}
	// 5 side-effect safety.
	if e.approval && !req.ApprovalAvailable {
		return readiness.StepSideEffect, rejApproval
	}
	if s.requireKey && e.stateChanging && !req.IdempotencyKey {
		return readiness.StepSideEffect, rejIdempotency
	}
	// 6 current health.
	if h != nil {
		var st circuit.State
		if x.brk != nil {
			st = x.brk[e.idx].State(req.Now)
		} else {
			st = h.State(e.circuitKey, req.Now)
		}
		switch st {
		case circuit.Open:
			return readiness.StepHealth, rejCircuit
		case circuit.HalfOpen:
			a.tier |= tierHalfOpen
		}
	}
	ev, rj, unknown := s.freshEvidence(e, req, now)
	if unknown {
		if s.denyUnknown {
			return readiness.StepHealth, rj
		}
		a.tier |= tierUnknown
	}
	if e.deprecated != 0 && e.deprecated <= now {
		a.tier |= tierDeprecated
	}
	a.ev = int32(ev)
	// 7 deadline and cost.
	if rj := e.static[readiness.StepBudget]; rj.code != "" {
		return readiness.StepBudget, rj
	}
	a.retryable = e.readOnly || (req.IdempotencyKey && e.keyed)
	a.attempts = 1
	a.perAttempt = e.perAttemptOne
	if a.retryable && !e.retryOn.None() {
		a.attempts = int8(s.maxAttempts)
		a.perAttempt = e.perAttemptRetry
	}
	if a.perAttempt <= 0 {
		a.perAttempt = deadline / time.Duration(a.attempts)
	}
	a.perAttempt = min(a.perAttempt, deadline)
	a.score = math.Inf(1)
	if ev >= 0 {
		if r := &e.evidence[ev]; r.hasLatency {
			if r.p50 > a.perAttempt {
				return readiness.StepBudget, rejection{readiness.CodeDeadlineBudget, fmt.Sprintf("observed p50 %v exceeds the per-attempt budget %v", r.p50, a.perAttempt)}
			}
			// Latency score: the mean of p50 and p99, so the median and
			// the tail both count.
			a.score = float64(r.p50+r.p99) / 2
		}
	}
	return 0, rejection{}
}

// fill builds the Route of an admitted candidate.
func (s *Snapshot) fill(r *Route, g *group, a *admitted) {
	e := g.cands[a.ci].e
	id := e.spec.GetIdentity()
	r.Entry, r.Spec, r.Identity, r.CircuitKey = e.name, e.spec, id, e.circuitKey
	if g.class {
		r.Class = g.name
	}
	r.ProviderSideEffect, r.ConsumerSideEffect, r.SideEffectConflict = e.providerSE, e.consumerSE, e.conflict
	r.ReadOnly, r.ApprovalRequired, r.Retryable = e.readOnly, e.approval, a.retryable
	r.MaxAttempts, r.RetryOn = int(a.attempts), e.retryOn
	r.PerAttempt = a.perAttempt
	if e.readOnly {
		r.HedgeAfter = s.hedgeAfter
	}
	r.OutputSchemaDigest = id.GetOutputSchemaDigest()
	r.HalfOpen = a.tier&tierHalfOpen != 0
	r.Deprecated = a.tier&tierDeprecated != 0
	r.Unknown = a.ev < 0
	if a.ev >= 0 {
		ev := &e.evidence[a.ev]
		r.EvidenceID, r.P50, r.P99 = ev.id, ev.p50, ev.p99
	}
}

// expiry checks the time-dependent eligibility facts of an entry: its
// provenance expiry and the declared end of life of its server.
func (s *Snapshot) expiry(e *entry, now int64) (rejection, bool) {
	switch {
	case e.expires != 0 && e.expires <= now:
		return e.expiresRej, true
	case e.endOfLife != 0 && e.endOfLife <= now:
		return e.endOfLifeRej, true
	}
	return rejection{}, false
}

// BreakerSource may be implemented by the Health passed to Decide (as
// *circuit.Set does): the snapshot then caches each entry's *circuit.Breaker
// and reads breaker state without a map lookup per candidate.
type BreakerSource interface {
	Breaker(key string) *circuit.Breaker
}

type breakerCache struct {
	b []*circuit.Breaker // by entry index
}

// breakersFor returns the cached breakers of src, rebuilding the cache when
// src is a different set (detected by the first entry's breaker pointer).
func (s *Snapshot) breakersFor(src BreakerSource) []*circuit.Breaker {
	if len(s.entries) == 0 {
		return nil
	}
	first := src.Breaker(s.entries[0].circuitKey)
	if c := s.breakers.Load(); c != nil && c.b[0] == first {
		return c.b
	}
	c := &breakerCache{b: make([]*circuit.Breaker, len(s.entries))}
	for i, e := range s.entries {
		c.b[i] = src.Breaker(e.circuitKey)
	}
	s.breakers.Store(c)
	return c.b
}

// call is the per-request context of one Decide. It holds no interfaces so
// that escape analysis keeps it (and the request) on the stack.
type call struct {
	req      *Request
	gr       grant
	brk      []*circuit.Breaker // nil: ask Health
	now      int64
	deadline time.Duration
}

// grant is the principal rules that apply to one request: those for its
// principal class (and "*") whose tenant classes admit its tenant.
// tenantExcluded: the principal has rules, but none for this tenant.
type grant struct {
	rules          []int
	tenantExcluded bool
}

func (s *Snapshot) grantFor(principal, tenant string, buf []int) grant {
	rules, known := s.principals[principal]
	if !known {
		rules = s.wildcardRules
	}
	g := grant{rules: buf[:0]}
	for _, ri := range rules {
		if t := s.rules[ri].tenants; len(t) > 0 && !contains(t, tenant) {
			continue
		}
		g.rules = append(g.rules, ri)
	}
	g.tenantExcluded = len(rules) > 0 && len(g.rules) == 0
	return g
}

// authorise applies the principal rules (precomputed verdicts) and the
// entry's tenant classes.
func (s *Snapshot) authorise(c *cand, req *Request, g grant) (rejection, bool) {
	if len(c.e.tenants) > 0 && !contains(c.e.tenants, req.Tenant) {
		return rejEntryTenant, true
	}
	allowed := false
	for _, ri := range g.rules {
		switch c.verdict[ri] {
		case -1:
			return rejPrincipalDenied, true
		case 1:
			allowed = true
		}
	}
	switch {
	case allowed:
		return rejection{}, false
	case g.tenantExcluded:
		return rejRuleTenant, true
	}
	return rejPrincipalNotAllowed, true
}

// freshEvidence picks the freshest evidence applicable to the request's
// principal and tenant that counts (fit and not expired). unknown is true
// when none does; rj then says why the freshest applicable one did not.
func (s *Snapshot) freshEvidence(e *entry, req *Request, now int64) (int, rejection, bool) {
	why := -1
	for i := range e.evidence {
		ev := &e.evidence[i]
		if (ev.principal != "" && ev.principal != req.Principal) || (ev.tenant != "" && ev.tenant != req.Tenant) || ev.tooSmall {
			continue
		}
		if ev.unfit.code == "" && now < ev.expires {
			return i, rejection{}, false
		}
		if why < 0 {
			why = i
		}
	}
	if why >= 0 {
		ev := &e.evidence[why]
		if ev.unfit.code != "" {
			return -1, ev.unfit, true
		}
		return -1, rejection{readiness.CodeEvidenceExpired, fmt.Sprintf("evidence %s expired at %s", ev.id, time.Unix(0, ev.expires).UTC().Format(time.RFC3339))}, true
	}
	return -1, rejNoEvidence, true
}

// rank moves the best k admitted candidates, in order, to the front of
// adm: fresh evidence before unknown, closed before half-open, then latency
// score, then entry name. The group's current preferred entry takes first
// place unless the best challenger in the same tier beats its score by more
// than the hysteresis margin. Only the first k are ordered (selection, not a
// full sort: k is small).
func (s *Snapshot) rank(g *group, adm []admitted, k int) {
	k = min(k, len(adm))
	for i := 0; i < k; i++ {
		m := i
		for j := i + 1; j < len(adm); j++ {
			if better(&adm[j], &adm[m]) {
				m = j
			}
		}
		adm[i], adm[m] = adm[m], adm[i]
	}
	if p := g.preferred.Load(); p >= 0 && len(adm) > 1 {
		for i := 1; i < len(adm); i++ {
			if g.cands[adm[i].ci].e.idx == int(p) {
				if adm[i].tier == adm[0].tier && adm[0].score >= adm[i].score*(1-s.margin) {
					cur := adm[i]
					copy(adm[1:i+1], adm[:i])
					adm[0] = cur
				}
				break
			}
		}
	}
	if best := int32(g.cands[adm[0].ci].e.idx); g.preferred.Load() != best {
		g.preferred.Store(best)
	}
}

func better(x, y *admitted) bool {
	switch {
	case x.tier != y.tier:
		return x.tier < y.tier
	case x.score != y.score:
		return x.score < y.score
	}
	return x.ci < y.ci
}

// Visible lists what a principal may see in tools/list: each equivalence
// class with at least one candidate passing steps 1-4, and each exact tool
// the principal is permitted by name. Health, evidence, approval and
// idempotency are checked per call, not here. Sorted: classes, then tools.
func (s *Snapshot) Visible(principal, tenant, region, workflow string, now time.Time) []Visible {
	gr := s.grantFor(principal, tenant, nil)
	req := &Request{Principal: principal, Tenant: tenant, Region: region, Workflow: workflow, Now: now}
	var out []Visible
	for _, list := range [][]string{s.classNames, s.exactNames} {
		for _, name := range list {
			g := s.groups[name]
			var entries []string
			for i := range g.cands {
				if s.listable(&g.cands[i], req, gr, now.UnixNano()) {
					entries = append(entries, g.cands[i].e.name)
				}
			}
			if len(entries) == 0 {
				continue
			}
			v := Visible{Name: g.name, Class: g.class, Description: g.description, Entries: entries}
			if !g.class {
				e := g.cands[0].e
				v.Server, v.Tool = e.server, e.tool
			}
			out = append(out, v)
		}
	}
	return out
}

func (s *Snapshot) listable(c *cand, req *Request, gr grant, now int64) bool {
	e := c.e
	if e.static[readiness.StepEligibility].code != "" || e.static[readiness.StepTrust].code != "" || e.static[readiness.StepResidency].code != "" || !c.member {
		return false
	}
	if _, bad := s.expiry(e, now); bad {
		return false
	}
	if len(e.workflows) > 0 && !contains(e.workflows, req.Workflow) {
		return false
	}
	if _, bad := s.authorise(c, req, gr); bad {
		return false
	}
	return !s.sameRegion || (e.region != "" && e.region == req.Region)
}

// Entry returns the verified RegistryEntry by name (nil if absent).
func (s *Snapshot) Entry(name string) *mcpreadyv1.RegistryEntry {
	if i := s.indexOf(name); int(i) < len(s.entries) && s.entries[i].name == name {
		return s.entries[i].spec
	}
	return nil
}

// PolicyVersion is the version of the policy the snapshot was built from.
func (s *Snapshot) PolicyVersion() string { return s.policyVersion }

func (s *Snapshot) indexOf(name string) int32 {
	i, _ := slices.BinarySearchFunc(s.entries, name, func(e *entry, n string) int { return strings.Compare(e.name, n) })
	return int32(i)
}
