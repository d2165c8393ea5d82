package decide

// Compiling verified artifacts into the request-independent decision
// table of a Snapshot (NewSnapshot).

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/mcpready/mcpready/agent/access"
	"github.com/mcpready/mcpready/agent/circuit"
	"github.com/mcpready/mcpready/agent/pin"
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

type evidenceRef struct {
	id                   string
	principal, tenant    string
	region               string // the hosts' region the evidence was observed from
	auth                 string // the auth class it was observed under
	input                string // the input class it was observed for
	observed, expires    int64  // unix nanos; expires is the earlier of expires_at and observed+max_age
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
	// valueRules: approval rules that apply only above a value read from
	// the arguments (approval.go).
	valueRules []valueRule
	// required: the entry's argumentContract.requiredArguments.
	required []string
	// inputRules: indexes into Snapshot.inputClasses of the rules whose
	// tools pattern matches the entry (inputclass.go).
	inputRules []int
	// owner: the incident owner of the first incidentOwners rule matching key.
	owner string
	// unknownConfirmation: the Declaration's humanConfirmation for the
	// tool when it is a value the agent does not know (taken as required).
	unknownConfirmation string
	// domains: failure domains of the entry and its Declaration, sorted;
	// domainKey the same joined with "," (Route.Domains); domainMask one bit
	// per domain (Snapshot.domainNames), when the snapshot has at most 64.
	domains    []string
	domainKey  string
	domainMask uint64
	// cost: the declared price per call ("<amount> <currency>"), "unknown"
	// when a ceiling applies and no usable price is declared (ALLOW), ""
	// when none is declared (Route.Cost).
	cost string
	// price: the declared amount per call; priced: one is declared.
	price  float64
	priced bool
	// quotaUnit, quotaByTenant, providerQuota, providerWindow: the Route
	// fields of those names.
	quotaUnit      string
	quotaByTenant  bool
	providerQuota  int64
	providerWindow time.Duration
	// keySupport: the provider declares the tool KEYED; keyHeader,
	// keyArgument and keyRetention say where the key travels and for how
	// long the provider keeps it.
	keySupport                     bool
	keyHeader, keyArgument         string
	keyRetention                   time.Duration
	evidence                       []evidenceRef // freshest first
	perAttemptRetry, perAttemptOne time.Duration // 0: derive from deadline
	declaredTotal                  time.Duration // Declaration.timeouts.recommendedTotal; 0: none
	retryOn                        RetryConditions
	// expires: unix nanos of the entry's provenance expiry, endOfLife of
	// the declared end of life, deprecated of the declared deprecation; 0 =
	// none. expiresRej and endOfLifeRej are their rejections, with shared
	// records.
	expires, endOfLife, deprecated int64
	expiresRej, endOfLifeRej       rejection
	expiresPB, endOfLifePB         *mcpreadyv1.Candidate
	// priceFrom and priceUntil bound when the declared price holds (unix
	// nanoseconds, 0: unbounded); outside them the cost is UNKNOWN:
	// unpricedRej when the policy refuses that, else unpricedCost.
	priceFrom, priceUntil int64
	unpricedRej           rejection
	unpricedPB            *mcpreadyv1.Candidate
	unpricedCost          string
	access                access.Expect         // step 2, per call (Request.Access)
	admitted              *mcpreadyv1.Candidate // shared, immutable
	selected              *mcpreadyv1.Candidate // admitted, marked selected (WithSelected); shared, immutable
	staticPB              [maxSteps]*mcpreadyv1.Candidate
	fixedPB               [len(fixedRejections)]*mcpreadyv1.Candidate
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
	// ambiguous: an exact name that more than one server and tool pair
	// spells (tool names may contain '/'); it is refused, never listed.
	ambiguous bool
	cands     []cand
	preferred atomic.Int32 // entry idx of the last best route, or -1
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
	warnings []string
	// argNames: the top-level argument names the value rules read.
	argNames      []string
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
	// domainNames: every failure domain, the index its bit in
	// entry.domainMask; domainSlow when there are more than 64 (then the
	// masks are unused).
	domainNames []string
	domainSlow  bool
	quotaLimit  int64
	quotaWindow time.Duration
	// inputClasses: the policy's input class rules, compiled (inputclass.go).
	inputClasses []inputClass
	wfCeiling    float64
	// methods: the method rules of non-tool requests (methods.go).
	methods methodTable
}

// NewSnapshot precomputes everything request-independent. It fails only on
// a missing policy, an entry without identity or an input class rule that
// does not compile.
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
		quotaLimit:    p.GetCost().GetMaxQuotaUnits(),
		wfCeiling:     p.GetCost().GetMaxCostPerWorkflow(),
		quotaWindow:   p.GetCost().GetQuotaWindow().AsDuration(),
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
	if s.quotaWindow <= 0 {
		s.quotaWindow = time.Minute
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
	if err := s.compileInputClasses(p.GetInputClasses()); err != nil {
		return nil, err
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
	// (other endpoints or versions) are each other's fallbacks. A key that
	// is also a class name stays the class's (shadowed, warned of).
	var shadowed []string
	for _, e := range s.entries {
		g := s.groups[e.key]
		if g == nil {
			g = &group{name: e.key, fallback: true}
			g.preferred.Store(noPreference)
			s.groups[e.key] = g
			s.exactNames = append(s.exactNames, e.key)
		}
		if g.class {
			shadowed = append(shadowed, e.key)
		} else {
			if len(g.cands) > 0 && (g.cands[0].e.server != e.server || g.cands[0].e.tool != e.tool) {
				g.ambiguous = true
			}
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
	s.indexDomains()
	s.methods = compileMethods(p, s.entries)
	s.warnings = unknownNames(in)
	for _, key := range slices.Compact(slices.Sorted(slices.Values(shadowed))) {
		s.warnings = append(s.warnings, fmt.Sprintf("%q is the name of an equivalence class: the tool of that name is reachable only as a member of a class", key))
	}
	for _, e := range s.entries {
		for _, r := range e.valueRules {
			if !slices.Contains(s.argNames, r.path[0]) {
				s.argNames = append(s.argNames, r.path[0])
			}
		}
		if e.unknownConfirmation != "" {
			s.warnings = append(s.warnings, fmt.Sprintf("entry %s: the Declaration's humanConfirmation %q is not one of required, required-above-value or none; every call needs approval",
				e.name, e.unknownConfirmation))
		}
	}
	for _, name := range s.classNames {
		if g := s.groups[name]; g.mixedSchemas() {
			s.warnings = append(s.warnings, fmt.Sprintf("equivalence class %q: its candidates' input schemas differ (%s); a view where more than one of them is visible does not list it and refuses calls to it",
				name, g.entryNames()))
		}
	}
	for _, name := range s.exactNames {
		if g := s.groups[name]; g.ambiguous {
			s.warnings = append(s.warnings, fmt.Sprintf("%q is refused: it names more than one tool (%s)", name, g.pairs()))
		}
	}
	return s, nil
}

// mixedSchemas: g's candidates do not all declare one input schema.
func (g *group) mixedSchemas() bool {
	for _, c := range g.cands[min(1, len(g.cands)):] {
		if c.e.spec.GetIdentity().GetInputSchemaDigest() != g.cands[0].e.spec.GetIdentity().GetInputSchemaDigest() {
			return true
		}
	}
	return false
}

// entryNames lists g's candidates' entry names.
func (g *group) entryNames() string {
	names := make([]string, len(g.cands))
	for i, c := range g.cands {
		names[i] = c.e.name
	}
	return strings.Join(names, ", ")
}

// priceWindow records when e's declared price pr holds and what the
// policy p makes of the call outside that window, where the price is
// UNKNOWN (as if none were declared).
func (e *entry) priceWindow(p *mcpreadyv1.Policy, pr *mcpreadyv1.DeclaredPricing) {
	if t := pr.GetEffectiveFrom(); t != nil {
		e.priceFrom = t.AsTime().UnixNano()
	}
	if t := pr.GetEffectiveUntil(); t != nil {
		e.priceUntil = t.AsTime().UnixNano()
	}
	ceiling := p.GetCost().GetMaxCostPerCall()
	switch {
	case ceiling <= 0:
	case p.GetCost().GetOnUnknownPrice() == mcpreadyv1.UnknownEvidenceAction_UNKNOWN_EVIDENCE_ACTION_ALLOW:
		e.unpricedCost = "unknown"
	default:
		e.unpricedRej = rejection{readiness.CodeCostUnknown, fmt.Sprintf("the policy caps the cost per call at %g and the provider's price holds only %s", ceiling, window(pr))}
		e.unpricedPB = e.candidate(readiness.StepBudget, e.unpricedRej)
	}
}

// window describes when a declared price holds.
func window(pr *mcpreadyv1.DeclaredPricing) string {
	var parts []string
	if t := pr.GetEffectiveFrom(); t != nil {
		parts = append(parts, "from "+t.AsTime().UTC().Format(time.RFC3339))
	}
	if t := pr.GetEffectiveUntil(); t != nil {
		parts = append(parts, "until "+t.AsTime().UTC().Format(time.RFC3339))
	}
	return strings.Join(parts, " ")
}

// unpriced reports whether e's declared price does not hold at now.
func (e *entry) unpriced(now int64) bool {
	return e.priceFrom != 0 && now < e.priceFrom || e.priceUntil != 0 && now >= e.priceUntil
}

// pairs lists the distinct server and tool pairs of g's candidates.
func (g *group) pairs() string {
	var out []string
	for _, c := range g.cands {
		p := fmt.Sprintf("server %q tool %q", c.e.server, c.e.tool)
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return strings.Join(out, ", ")
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
		required:   re.GetArgumentContract().GetRequiredArguments(),
		tenants:    re.GetTenantClasses(),
		region:     re.GetRegion(),
	}
	set := func(step readiness.Step, code readiness.Code, format string, a ...any) {
		if e.static[step].code == "" {
			e.static[step] = rejection{code, fmt.Sprintf(format, a...)}
		}
	}

	for _, o := range p.GetIncidentOwners() {
		if match(o.GetMatch(), e.key) {
			e.owner = o.GetOwner()
			break
		}
	}

	// 1 eligibility.
	if !matchAny(p.GetInventory(), name) && !matchAny(p.GetInventory(), e.key) {
		set(readiness.StepEligibility, readiness.CodeNotInInventory, "entry %s is not in the approved inventory", name)
	}
	if eps := p.GetApprovedEndpoints(); len(eps) > 0 && !matchAny(eps, id.GetEndpoint()) {
		set(readiness.StepEligibility, readiness.CodeEndpointNotApproved, "endpoint %q is not approved", id.GetEndpoint())
	}
	if ep := id.GetEndpoint(); (strings.HasPrefix(ep, "http://") || strings.HasPrefix(ep, "https://")) && !pin.InScope(re.GetNetworkScope(), []string{ep}) {
		// No request is ever sent outside the entry's networkScope (stdio
		// endpoints have no host); listing and calling agree on it.
		set(readiness.StepEligibility, readiness.CodeEndpointOutOfScope, "endpoint %s is outside the entry's networkScope", ep)
	}
	if st := re.GetState(); st != mcpreadyv1.LifecycleState_LIFECYCLE_STATE_QUALIFIED {
		set(readiness.StepEligibility, readiness.CodeLifecycle, "lifecycle state is %s, not QUALIFIED", strings.TrimPrefix(st.String(), "LIFECYCLE_STATE_"))
	}
	if len(s.protocols) > 0 && !contains(s.protocols, id.GetProtocolVersion()) {
		set(readiness.StepEligibility, readiness.CodeProtocolVersion, "entry protocol version %q is not permitted by policy", id.GetProtocolVersion())
	}
	if pvs := decl.GetProtocolVersions(); len(pvs) > 0 && id.GetProtocolVersion() != "" && !contains(pvs, id.GetProtocolVersion()) {
		set(readiness.StepEligibility, readiness.CodeProtocolVersion, "entry protocol version %q is not one the provider's Declaration lists (%s)",
			id.GetProtocolVersion(), strings.Join(pvs, ", "))
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
	e.access = accessExpect(p, re, decl).Memoized()
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
	if rs := decl.GetRegions(); len(rs) > 0 && e.region != "" && !contains(rs, e.region) {
		set(readiness.StepResidency, readiness.CodeResidency, "entry region %q is not one the provider's Declaration says the server runs in (%s)", e.region, strings.Join(rs, ", "))
	}
	// Where the provider keeps the data, by its Declaration, is held to
	// the same rules as where the server runs.
	for _, r := range decl.GetDataResidency() {
		if allowed := res.GetAllowedRegions(); len(allowed) > 0 && !contains(allowed, r) {
			set(readiness.StepResidency, readiness.CodeResidency, "the provider declares it keeps data in region %q, not an allowed region", r)
		}
		if contains(res.GetDeniedRegions(), r) {
			set(readiness.StepResidency, readiness.CodeResidency, "the provider declares it keeps data in region %q, which is denied", r)
		}
	}
	dataHandling(res, decl.GetDataHandling(), set)
	if dcs := res.GetAllowedDataClasses(); len(dcs) > 0 && !slices.Contains(dcs, re.GetDataAccess()) {
		set(readiness.StepResidency, readiness.CodeDataClass, "data access class %s is not allowed", strings.TrimPrefix(re.GetDataAccess().String(), "DATA_ACCESS_CLASS_"))
	}

	// 5 side-effect safety (static part).
	e.providerSE = re.GetSideEffect()
	confirmation := ""
	for _, t := range decl.GetTools() {
		if t.GetName() != e.tool {
			continue
		}
		confirmation = t.GetHumanConfirmation()
		if t.GetSideEffect() != mcpreadyv1.SideEffectClass_SIDE_EFFECT_CLASS_UNSPECIFIED {
			e.providerSE = t.GetSideEffect()
		}
		if t.GetIdempotency() == mcpreadyv1.IdempotencyClass_IDEMPOTENCY_CLASS_KEYED {
			e.keySupport = true
			e.keyHeader, e.keyArgument = t.GetIdempotencyKeyHeader(), t.GetIdempotencyKeyArgument()
			e.keyRetention = t.GetIdempotencyKeyRetention().AsDuration()
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
	// A provider that declares key support makes a keyed call retryable.
	e.keyed = e.keyed || e.keySupport
	e.quotaUnit = decl.GetQuota().GetUnit()
	if e.quotaUnit == "" {
		e.quotaUnit = "call"
	}
	e.quotaByTenant = slices.Contains(decl.GetQuota().GetPartitionKeys(), "tenant")
	if l, w := decl.GetQuota().GetLimit(), decl.GetQuota().GetWindow().AsDuration(); l > 0 && w > 0 {
		e.providerQuota, e.providerWindow = l, w
	}
	e.domains = failureDomains(re.GetFailureDomains(), decl.GetFailureDomains())
	e.domainKey = strings.Join(e.domains, ",")
	e.approval = re.GetApprovalRequired()
	for _, a := range p.GetApprovals() {
		switch {
		case !a.GetRequired() || !match(a.GetMatch(), e.key):
		case a.GetReversible() && re.GetRollbackSupported():
			// The rule covers irreversible effects only; this one can be undone.
		case a.GetAboveValue() > 0 && a.GetValuePath() != "":
			e.valueRules = append(e.valueRules, valueRule{path: strings.Split(a.GetValuePath(), "."), above: a.GetAboveValue()})
		default:
			e.approval = true
		}
	}
	// The provider's word that a human must confirm the tool's calls.
	switch confirmation {
	case "", "none":
	case "required-above-value":
		// The policy's value rule for the tool says above what; without one
		// there is no value to compare, and every call needs approval.
		e.approval = e.approval || len(e.valueRules) == 0
	default:
		e.approval = true
		if confirmation != "required" {
			e.unknownConfirmation = confirmation
		}
	}

	// 7 cost (declared price vs the policy's ceiling; an unusable price is
	// UNKNOWN, handled as the policy says).
	pr := decl.GetPricing()
	amt, err := strconv.ParseFloat(pr.GetAmount(), 64)
	priced := err == nil && amt == amt && amt >= 0 && perCall(pr.GetUnit())
	if priced {
		e.cost, e.price, e.priced = strings.TrimSpace(pr.GetAmount()+" "+pr.GetCurrency()), amt, true
	}
	if priced && (pr.GetEffectiveFrom() != nil || pr.GetEffectiveUntil() != nil) {
		e.priceWindow(p, pr)
	}
	if ceiling := p.GetCost().GetMaxCostPerCall(); ceiling > 0 {
		cur := p.GetCost().GetCurrency()
		switch {
		case !priced && p.GetCost().GetOnUnknownPrice() == mcpreadyv1.UnknownEvidenceAction_UNKNOWN_EVIDENCE_ACTION_ALLOW:
			e.cost = "unknown"
		case !priced:
			why := "declares no usable price"
			if err == nil && !perCall(pr.GetUnit()) {
				why = fmt.Sprintf("prices per %q, not per call", pr.GetUnit())
			}
			set(readiness.StepBudget, readiness.CodeCostUnknown, "the policy caps the cost per call at %g and the provider %s", ceiling, why)
		case cur != "" && pr.GetCurrency() != "" && cur != pr.GetCurrency():
			set(readiness.StepBudget, readiness.CodeCost, "declared price is in %s, policy ceiling in %s", pr.GetCurrency(), cur)
		case amt > ceiling:
			set(readiness.StepBudget, readiness.CodeCost, "declared price %g exceeds the ceiling %g per call", amt, ceiling)
		}
	}

	// The Policy's per-attempt timeout, else the provider's declared one;
	// else the deadline (or the declared recommended total, when shorter)
	// is shared by the attempts (filter).
	if pa := p.GetRetry().GetPerAttemptTimeout().AsDuration(); pa > 0 {
		e.perAttemptRetry, e.perAttemptOne = pa, pa
	} else if pa := decl.GetTimeouts().GetPerAttempt().AsDuration(); pa > 0 {
		e.perAttemptRetry, e.perAttemptOne = pa, pa
	}
	e.declaredTotal = max(decl.GetTimeouts().GetRecommendedTotal().AsDuration(), 0)
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
	e.selected = selected(e.admitted)
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

// perCall reports whether a declared pricing unit is a price per call (no
// unit is taken as one). A price per token, per month or per anything
// else says nothing about what one call costs.
func perCall(unit string) bool {
	switch vocabulary(unit) {
	case "", "call", "per-call", "request", "per-request", "invocation", "per-invocation":
		return true
	}
	return false
}
