package demo

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/mcpready/mcpready/agent/enroll"
	"github.com/mcpready/mcpready/artifact"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/readiness"
	"github.com/mcpready/mcpready/sign"
)

// Names used by the demo artifacts and the demo agent configuration.
const (
	// TrustPolicyName and PolicyName are the metadata.name of the demo's
	// TrustPolicy and Policy.
	TrustPolicyName = "default"
	PolicyName      = "default"
	// Issuer is the organisation that signs the demo's policy and registry.
	Issuer = "example-org"
	// PrincipalClass and TenantClass are the default local principal's.
	PrincipalClass = "developer"
	TenantClass    = "demo"
	// CapabilityDocsLookup is the equivalence class shown to AI agents.
	CapabilityDocsLookup = "docs_lookup"
	// QualificationSuite names the (demo) qualification suite.
	QualificationSuite = "mcpready-demo-qualification/v1"
)

// EntryName is the registry entry name of one tool, "<server>/<tool>",
// as `mcpready enroll` names entries.
var EntryName = enroll.EntryName

// EvidenceName is the name of the demo's synthetic evidence for one entry.
func EvidenceName(server, tool string) string { return EntryName(server, tool) + "/synthetic" }

// Listed pairs a running server with what a client listed from it.
type Listed struct {
	Upstream
	Server *ListedServer
}

// Params are the inputs of Build.
type Params struct {
	// Keys must hold every name in KeyNames; only public halves are used.
	Keys Keys
	// AgentID is the node id of the demo agent, which may sign
	// ReceiptBatch artifacts named "<AgentID>/<sequence>".
	AgentID string
	// Servers are the demo servers with their listed tools.
	Servers []Listed
	// Now stamps issued_at, qualified_at and evidence windows.
	Now time.Time
}

// Item is one artifact and the name of the key that signs it.
type Item struct {
	Object *artifact.Object
	Key    string
}

// Signed is one signed artifact.
type Signed struct {
	Item
	// Bundle is the Sigstore bundle JSON to apply.
	Bundle []byte
}

// ErrParams reports incomplete Build parameters.
var ErrParams = errors.New("demo: invalid parameters")

// Build returns the demo artifact set in apply order: the TrustPolicy, then
// Declarations, Evidence, RegistryEntries and the Policy.
func Build(p Params) ([]Item, error) {
	for _, n := range KeyNames {
		if p.Keys[n] == nil {
			return nil, fmt.Errorf("%w: key %q missing", ErrParams, n)
		}
	}
	if p.AgentID == "" || len(p.Servers) == 0 || p.Now.IsZero() {
		return nil, fmt.Errorf("%w: AgentID, Servers and Now are required", ErrParams)
	}
	tp, err := trustPolicy(p)
	if err != nil {
		return nil, err
	}
	items := []Item{{tp, KeyRoot}}
	servers := slices.Clone(p.Servers)
	sort.Slice(servers, func(i, j int) bool { return servers[i].Name < servers[j].Name })
	var entries, evidence []Item
	for _, s := range servers {
		if s.Server == nil || len(s.Server.Tools) == 0 {
			return nil, fmt.Errorf("%w: server %s has no listed tools", ErrParams, s.Name)
		}
		items = append(items, Item{declaration(s, p.Now), declarationKey(s.Name)})
		for _, t := range s.Server.Tools {
			e, err := registryEntry(s, t, p.Now)
			if err != nil {
				return nil, err
			}
			entries = append(entries, Item{e, KeyOrg})
			evidence = append(evidence, Item{syntheticEvidence(s, t, e.Spec.(*mcpreadyv1.RegistryEntry), p.Now), KeyProber})
		}
	}
	items = append(items, evidence...)
	items = append(items, entries...)
	items = append(items, Item{policy(p.Now), KeyOrg})
	return items, nil
}

// SignAll signs every item with its key.
func SignAll(items []Item, keys Keys) ([]Signed, error) {
	out := make([]Signed, 0, len(items))
	for _, it := range items {
		k := keys[it.Key]
		if k == nil {
			return nil, fmt.Errorf("%w: key %q missing", ErrParams, it.Key)
		}
		b, _, err := sign.Sign(it.Object, k)
		if err != nil {
			return nil, fmt.Errorf("demo: sign %s %s: %w", it.Object.Kind, it.Object.Metadata.Name, err)
		}
		out = append(out, Signed{Item: it, Bundle: b})
	}
	return out, nil
}

func declarationKey(server string) string {
	switch server {
	case ServerDocsA:
		return KeyProviderA
	case ServerDocsB:
		return KeyProviderB
	}
	return KeyOrg
}

func provenance(issuer, version string, now time.Time, expires time.Duration) *mcpreadyv1.Provenance {
	pv := &mcpreadyv1.Provenance{
		Issuer:             issuer,
		VerificationMethod: "sigstore-bundle-key",
		Version:            version,
		IssuedAt:           timestamppb.New(now),
		Owner:              Issuer,
	}
	if expires > 0 {
		pv.ExpiresAt = timestamppb.New(now.Add(expires))
	}
	return pv
}

func grant(keys Keys, name string, kinds []artifact.Kind, scopes []string, now time.Time) (*mcpreadyv1.KeyGrant, error) {
	pub := keys[name].Public()
	id, err := sign.KeyID(pub)
	if err != nil {
		return nil, err
	}
	pem, err := sign.MarshalPublicKey(pub)
	if err != nil {
		return nil, err
	}
	g := &mcpreadyv1.KeyGrant{
		KeyId:     id,
		PublicKey: string(pem),
		Name:      name,
		Scopes:    scopes,
		NotBefore: timestamppb.New(now.Add(-time.Hour)),
		NotAfter:  timestamppb.New(now.AddDate(1, 0, 0)),
	}
	for _, k := range kinds {
		g.Kinds = append(g.Kinds, string(k))
	}
	return g, nil
}

func trustPolicy(p Params) (*artifact.Object, error) {
	type g struct {
		key    string
		kinds  []artifact.Kind
		scopes []string
		// issuer and independence: the Evidence claims the key may make
		issuer, independence string
	}
	grants := []g{
		{key: KeyOrg, kinds: []artifact.Kind{artifact.KindRegistryEntry, artifact.KindPolicy, artifact.KindTombstone, artifact.KindDeclaration}},
		{key: KeyProviderA, kinds: []artifact.Kind{artifact.KindDeclaration}, scopes: []string{ServerDocsA}},
		{key: KeyProviderB, kinds: []artifact.Kind{artifact.KindDeclaration}, scopes: []string{ServerDocsB}},
		// the control plane's key: controlplane/aggregate's passive Evidence
		{key: KeyObserver, kinds: []artifact.Kind{artifact.KindEvidence, artifact.KindRegistryEntry}, issuer: "mcpready-controlplane", independence: "consumer-passive"},
		{key: KeyProber, kinds: []artifact.Kind{artifact.KindEvidence}, issuer: "observer", independence: "same-organisation"},
		{key: KeyAgent, kinds: []artifact.Kind{artifact.KindReceiptBatch, artifact.KindDriftReport}, scopes: []string{p.AgentID + "/*"}},
	}
	tp := &mcpreadyv1.TrustPolicy{Provenance: provenance(Issuer, "1", p.Now, 0)}
	for _, x := range grants {
		kg, err := grant(p.Keys, x.key, x.kinds, x.scopes, p.Now)
		if err != nil {
			return nil, fmt.Errorf("demo: grant for %s: %w", x.key, err)
		}
		kg.EvidenceIssuer, kg.Independence = x.issuer, x.independence
		tp.Keys = append(tp.Keys, kg)
	}
	return artifact.New(artifact.KindTrustPolicy, TrustPolicyName, tp), nil
}

// toolClass is the demo's knowledge of each tool: what the provider
// declares and how the organisation classifies it.
type toolClass struct {
	sideEffect  mcpreadyv1.SideEffectClass
	idempotency mcpreadyv1.IdempotencyClass
	dataAccess  mcpreadyv1.DataAccessClass
	approval    bool
}

var toolClasses = map[string]toolClass{
	ToolDocsLookup:          {mcpreadyv1.SideEffectClass_SIDE_EFFECT_CLASS_READ_ONLY, mcpreadyv1.IdempotencyClass_IDEMPOTENCY_CLASS_NATURALLY_IDEMPOTENT, mcpreadyv1.DataAccessClass_DATA_ACCESS_CLASS_PUBLIC, false},
	ToolGetListing:          {mcpreadyv1.SideEffectClass_SIDE_EFFECT_CLASS_READ_ONLY, mcpreadyv1.IdempotencyClass_IDEMPOTENCY_CLASS_NATURALLY_IDEMPOTENT, mcpreadyv1.DataAccessClass_DATA_ACCESS_CLASS_TENANT_PRIVATE, false},
	ToolUpdateListingStatus: {mcpreadyv1.SideEffectClass_SIDE_EFFECT_CLASS_STATE_CHANGING, mcpreadyv1.IdempotencyClass_IDEMPOTENCY_CLASS_NOT_IDEMPOTENT, mcpreadyv1.DataAccessClass_DATA_ACCESS_CLASS_TENANT_PRIVATE, true},
	ToolDeleteListing:       {mcpreadyv1.SideEffectClass_SIDE_EFFECT_CLASS_DESTRUCTIVE, mcpreadyv1.IdempotencyClass_IDEMPOTENCY_CLASS_NOT_IDEMPOTENT, mcpreadyv1.DataAccessClass_DATA_ACCESS_CLASS_TENANT_PRIVATE, true},
}

func classOf(tool string) toolClass {
	if c, ok := toolClasses[tool]; ok {
		return c
	}
	return toolClass{mcpreadyv1.SideEffectClass_SIDE_EFFECT_CLASS_UNKNOWN, mcpreadyv1.IdempotencyClass_IDEMPOTENCY_CLASS_UNSPECIFIED, mcpreadyv1.DataAccessClass_DATA_ACCESS_CLASS_UNSPECIFIED, false}
}

func networkScope(server string) []string {
	return []string{strings.TrimPrefix(server, "com.example/") + ".example"}
}

// endpointScope is an entry's networkScope: the server's own domain and
// the host it is served from (the agent dials only endpoints inside it).
func endpointScope(s Listed) []string {
	scope := networkScope(s.Name)
	if u, err := url.Parse(s.URL); err == nil && u.Hostname() != "" {
		scope = append(scope, u.Hostname())
	}
	return scope
}

func declaration(s Listed, now time.Time) *artifact.Object {
	issuer := s.Owner
	d := &mcpreadyv1.Declaration{
		Provenance:       provenance(issuer, s.Version, now, 0),
		ServerName:       s.Name,
		ServerVersion:    s.Version,
		Endpoint:         s.URL,
		Owner:            s.Owner,
		Operator:         s.Owner,
		ProtocolVersions: mcp.SupportedProtocolVersions(),
		Auth:             &mcpreadyv1.DeclaredAuth{Methods: []string{"none"}, TenantModel: "single-tenant demo"},
		Regions:          []string{s.Region},
		DataResidency:    []string{s.Region},
		Timeouts: &mcpreadyv1.DeclaredTimeouts{
			RecommendedTotal: durationpb.New(5 * time.Second),
			PerAttempt:       durationpb.New(2 * time.Second),
		},
		RetryableConditions: []string{"http-503", "http-429", "transport-reset"},
		DataHandling:        &mcpreadyv1.DataHandling{Retention: "none (in-memory demo)", Classification: "public"},
		Contacts:            &mcpreadyv1.Contacts{Support: "support@" + networkScope(s.Name)[0], Incident: "incident@" + networkScope(s.Name)[0]},
	}
	for _, t := range s.Server.Tools {
		c := classOf(t.Name)
		dt := &mcpreadyv1.DeclaredTool{Name: t.Name, SideEffect: c.sideEffect, Idempotency: c.idempotency}
		if c.approval {
			dt.HumanConfirmation = "required"
		}
		d.Tools = append(d.Tools, dt)
	}
	return artifact.New(artifact.KindDeclaration, s.Name, d)
}

func requiredArguments(t *mcp.Tool) []string {
	m, ok := t.InputSchema.(map[string]any)
	if !ok {
		return nil
	}
	var out []string
	if req, ok := m["required"].([]any); ok {
		for _, r := range req {
			if s, ok := r.(string); ok {
				out = append(out, s)
			}
		}
	}
	sort.Strings(out)
	return out
}

func registryEntry(s Listed, t *mcp.Tool, now time.Time) (*artifact.Object, error) {
	d, err := Digests(t)
	if err != nil {
		return nil, err
	}
	c := classOf(t.Name)
	e := &mcpreadyv1.RegistryEntry{
		Provenance: provenance(Issuer, "1", now, 0),
		Identity: &mcpreadyv1.ToolIdentity{
			ServerName:         s.Name,
			ServerVersion:      s.Version,
			ToolName:           t.Name,
			Endpoint:           s.URL,
			ProtocolVersion:    s.Server.ProtocolVersion,
			InputSchemaDigest:  d.InputSchema,
			OutputSchemaDigest: d.OutputSchema,
			DefinitionDigest:   d.Definition,
		},
		ArgumentContract:  &mcpreadyv1.ArgumentContract{RequiredArguments: requiredArguments(t)},
		Authority:         &mcpreadyv1.Authority{CredentialMode: "none", TenantBoundary: "shared"},
		SideEffect:        c.sideEffect,
		DataAccess:        c.dataAccess,
		NetworkScope:      endpointScope(s),
		Idempotency:       c.idempotency,
		ApprovalRequired:  c.approval,
		RollbackSupported: t.Name == ToolUpdateListingStatus,
		Qualification: &mcpreadyv1.Qualification{
			Suite:                 QualificationSuite,
			EvidenceRef:           EvidenceName(s.Name, t.Name),
			QualifiedAt:           timestamppb.New(now),
			FixturesPassed:        3,
			FixturesTotal:         3,
			NegativeFixturePassed: true,
		},
		State:           mcpreadyv1.LifecycleState_LIFECYCLE_STATE_QUALIFIED,
		DiscoverySource: "mcpready up (demo)",
		Region:          s.Region,
	}
	return artifact.New(artifact.KindRegistryEntry, EntryName(s.Name, t.Name), e), nil
}

// syntheticEvidence is the qualification evidence the demo observer signs
// for each entry: a small synthetic probe, honest about its blind spots.
func syntheticEvidence(s Listed, t *mcp.Tool, e *mcpreadyv1.RegistryEntry, now time.Time) *artifact.Object {
	id := e.GetIdentity()
	layers := []mcpreadyv1.ReadinessLayer{
		mcpreadyv1.ReadinessLayer_READINESS_LAYER_REACHABILITY,
		mcpreadyv1.ReadinessLayer_READINESS_LAYER_PROTOCOL,
		mcpreadyv1.ReadinessLayer_READINESS_LAYER_INVOCATION,
		mcpreadyv1.ReadinessLayer_READINESS_LAYER_RESULT_VALIDITY,
	}
	ev := &mcpreadyv1.Evidence{
		Provenance: provenance("observer", "1", now, 24*time.Hour),
		Subject: &mcpreadyv1.Subject{
			SubjectId:          EntryName(s.Name, t.Name),
			ServerName:         s.Name,
			Endpoint:           s.URL,
			ServerVersion:      s.Version,
			ToolName:           t.Name,
			InputSchemaDigest:  id.GetInputSchemaDigest(),
			OutputSchemaDigest: id.GetOutputSchemaDigest(),
			ProtocolVersions:   []string{id.GetProtocolVersion()},
			PrincipalClass:     PrincipalClass,
			TenantClass:        TenantClass,
			Region:             s.Region,
			InputClass:         "fixture",
			AssertedAt:         timestamppb.New(now),
		},
		Observer:        &mcpreadyv1.Observer{Id: "observer", Software: "mcpready up (demo)", Independence: "same-organisation"},
		Method:          mcpreadyv1.EvidenceMethod_EVIDENCE_METHOD_SYNTHETIC,
		AuthClass:       readiness.AuthKeyless,
		TenantClass:     TenantClass,
		PrincipalClass:  PrincipalClass,
		Region:          s.Region,
		NetworkClass:    "loopback",
		ProtocolVersion: id.GetProtocolVersion(),
		WindowStart:     timestamppb.New(now.Add(-time.Minute)),
		WindowEnd:       timestamppb.New(now),
		ObservedAt:      timestamppb.New(now),
		ExpiresAt:       timestamppb.New(now.Add(24 * time.Hour)),
		Sample:          &mcpreadyv1.Sample{Attempted: 3, Eligible: 3},
		Latency:         &mcpreadyv1.Latency{P50Ms: 1, P90Ms: 2, P95Ms: 2, P99Ms: 3, Count: 3},
		Coverage:        "tools/list and three schema-valid fixtures",
		BlindSpots:      []string{"synthetic only", "loopback network", "no production traffic"},
	}
	if classOf(t.Name).sideEffect != mcpreadyv1.SideEffectClass_SIDE_EFFECT_CLASS_READ_ONLY {
		// Write tools are qualified by listing only: fixtures never change state.
		ev.Sample = &mcpreadyv1.Sample{Attempted: 1, Eligible: 1}
		ev.BlindSpots = append(ev.BlindSpots, "no write tools observed: qualified by tools/list and schema only")
		layers = layers[:2]
	}
	for _, l := range layers {
		n := ev.Sample.Eligible
		ev.Rates = append(ev.Rates, &mcpreadyv1.LayerRate{Layer: l, Successes: n, Denominator: n, Rate: 1, SuccessDefinition: "fixture passed"})
	}
	return artifact.New(artifact.KindEvidence, EvidenceName(s.Name, t.Name), ev)
}

func policy(now time.Time) *artifact.Object {
	readOnly := mcpreadyv1.SideEffectClass_SIDE_EFFECT_CLASS_READ_ONLY
	p := &mcpreadyv1.Policy{
		Provenance:  provenance(Issuer, "1", now, 0),
		PolicyOwner: "platform-team@example.org",
		// Every QUALIFIED entry is in the inventory, so a server enrolled
		// with `mcpready enroll --qualify` is usable at once.
		Inventory: []string{"*"},
		Evidence: &mcpreadyv1.EvidenceRules{
			// The demo's synthetic evidence, and the passive evidence the
			// control plane aggregates from receipts (aggregate's default
			// observer id).
			AcceptedIssuers: []string{"observer", "mcpready-controlplane"},
			MaxAge: map[string]*durationpb.Duration{
				mcpreadyv1.ReadinessLayer_READINESS_LAYER_REACHABILITY.String(): durationpb.New(24 * time.Hour),
				mcpreadyv1.ReadinessLayer_READINESS_LAYER_INVOCATION.String():   durationpb.New(24 * time.Hour),
			},
			MinSampleSize: 1,
			OnUnknown:     mcpreadyv1.UnknownEvidenceAction_UNKNOWN_EVIDENCE_ACTION_ALLOW,
		},
		ProtocolVersions: mcp.SupportedProtocolVersions(),
		SideEffects: []*mcpreadyv1.SideEffectRule{
			{Match: "com.example/*/" + ToolDocsLookup, Assigned: readOnly, AssignmentEvidence: "demo qualification: pure lookup"},
			{Match: EntryName(ServerListings, ToolGetListing), Assigned: readOnly, AssignmentEvidence: "demo qualification: read only"},
			{Match: EntryName(ServerListings, ToolUpdateListingStatus), Assigned: mcpreadyv1.SideEffectClass_SIDE_EFFECT_CLASS_STATE_CHANGING},
			{Match: EntryName(ServerListings, ToolDeleteListing), Assigned: mcpreadyv1.SideEffectClass_SIDE_EFFECT_CLASS_DESTRUCTIVE},
		},
		Approvals: []*mcpreadyv1.ApprovalRule{
			{Match: EntryName(ServerListings, ToolUpdateListingStatus), Required: true, Reversible: true},
		},
		Deadline: durationpb.New(10 * time.Second),
		// Deny-list rather than allow-list: freshly enrolled entries carry no
		// region and must stay usable; docs-us (us-east) is excluded.
		Residency: &mcpreadyv1.ResidencyRules{DeniedRegions: []string{RegionOther}},
		Retry: &mcpreadyv1.RetryRules{
			MaxAttempts:         3,
			PerAttemptTimeout:   durationpb.New(3 * time.Second),
			BaseBackoff:         durationpb.New(50 * time.Millisecond),
			MaxBackoff:          durationpb.New(time.Second),
			BudgetRatio:         0.2,
			RetryableConditions: []string{"transport", "http-502", "http-503", "http-504", "http-429"},
		},
		EquivalenceClasses: []*mcpreadyv1.EquivalenceClass{{
			Name:            CapabilityDocsLookup,
			Description:     "Look up a topic in the product documentation. Served by approved documentation providers, with fallback.",
			Members:         []string{EntryName(ServerDocsA, ToolDocsLookup), EntryName(ServerDocsB, ToolDocsLookup), EntryName(ServerDocsUS, ToolDocsLookup)},
			FallbackAllowed: true,
		}},
		Circuit: &mcpreadyv1.CircuitRules{
			ConsecutiveFailures: 5,
			BaseEjection:        durationpb.New(10 * time.Second),
			MaxEjection:         durationpb.New(2 * time.Minute),
			ReadmitRatio:        0.25,
		},
		IncidentOwners: []*mcpreadyv1.IncidentOwner{{Match: "com.example/*", Owner: "platform-team@example.org"}},
		Principals: []*mcpreadyv1.PrincipalRule{{
			PrincipalClass: PrincipalClass,
			Allow:          []string{"*"},
			Deny:           []string{EntryName(ServerListings, ToolDeleteListing)},
			TenantClasses:  []string{TenantClass},
			// On the docs servers' transparent views: list and read the
			// published pages, nothing else.
			Methods: []*mcpreadyv1.MethodRule{{Server: "com.example/docs-*", Allow: []string{"resources/list", "resources/read"}, Resources: []string{DocsPages}}},
		}},
		Results: &mcpreadyv1.ResultRules{MaxResultBytes: 1 << 20, InjectionTripwire: true},
	}
	return artifact.New(artifact.KindPolicy, PolicyName, p)
}
