package demo

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/mcpready/mcpready/artifact"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/sign"
)

const testAgent = "node-1"

func listAll(t *testing.T, s *Servers) []Listed {
	t.Helper()
	var out []Listed
	for _, u := range s.Upstreams() {
		ls, err := ListTools(context.Background(), u.URL)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, Listed{Upstream: u, Server: ls})
	}
	return out
}

// Generated once by TestMain: key encryption is deliberately slow.
var (
	testKeys    Keys
	testKeysDir string
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "demo-keys")
	if err != nil {
		panic(err)
	}
	testKeysDir = dir
	testKeys, err = LoadOrCreateKeys(dir)
	if err != nil {
		panic(err)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func buildSigned(t *testing.T) (Keys, []Signed) {
	t.Helper()
	keys := testKeys
	items, err := Build(Params{Keys: keys, AgentID: testAgent, Servers: listAll(t, startServers(t)), Now: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	signed, err := SignAll(items, keys)
	if err != nil {
		t.Fatal(err)
	}
	return keys, signed
}

func TestArtifactsSignAndVerify(t *testing.T) {
	keys, signed := buildSigned(t)
	if signed[0].Object.Kind != artifact.KindTrustPolicy {
		t.Fatalf("first artifact is %s, want the TrustPolicy", signed[0].Object.Kind)
	}
	now := time.Now()
	trust, err := sign.NewTrust(signed[0].Bundle, keys[KeyRoot].Public(), now)
	if err != nil {
		t.Fatal(err)
	}
	count := map[artifact.Kind]int{}
	for _, s := range signed[1:] {
		v, err := trust.Verify(s.Bundle, now)
		if err != nil {
			t.Fatalf("%s %s: %v", s.Object.Kind, s.Object.Metadata.Name, err)
		}
		if v.Object.Metadata.Name != s.Object.Metadata.Name || v.Object.Kind != s.Object.Kind {
			t.Fatalf("verified %s %s, signed %s %s", v.Object.Kind, v.Object.Metadata.Name, s.Object.Kind, s.Object.Metadata.Name)
		}
		// The authored object round-trips through its YAML form.
		y, err := s.Object.YAML()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := artifact.Parse(y); err != nil {
			t.Fatalf("%s %s: YAML does not parse back: %v", s.Object.Kind, s.Object.Metadata.Name, err)
		}
		count[s.Object.Kind]++
	}
	want := map[artifact.Kind]int{artifact.KindDeclaration: 4, artifact.KindRegistryEntry: 6, artifact.KindEvidence: 6, artifact.KindPolicy: 1}
	for k, n := range want {
		if count[k] != n {
			t.Errorf("%d %s artifacts, want %d", count[k], k, n)
		}
	}
}

func TestArtifactsContent(t *testing.T) {
	_, signed := buildSigned(t)
	byName := map[string]*artifact.Object{}
	for _, s := range signed {
		byName[string(s.Object.Kind)+" "+s.Object.Metadata.Name] = s.Object
	}
	for _, name := range []string{EntryName(ServerDocsA, ToolDocsLookup), EntryName(ServerListings, ToolUpdateListingStatus), EntryName(ServerDocsUS, ToolDocsLookup)} {
		o := byName["RegistryEntry "+name]
		if o == nil {
			t.Fatalf("no registry entry %s", name)
		}
		e := o.Spec.(*mcpreadyv1.RegistryEntry)
		id := e.GetIdentity()
		if e.GetState() != mcpreadyv1.LifecycleState_LIFECYCLE_STATE_QUALIFIED {
			t.Errorf("%s state %s", name, e.GetState())
		}
		if id.GetDefinitionDigest() == "" || id.GetInputSchemaDigest() == "" || id.GetOutputSchemaDigest() == "" || id.GetEndpoint() == "" || id.GetProtocolVersion() == "" {
			t.Errorf("%s identity incomplete: %v", name, id)
		}
		if byName["Evidence "+e.GetQualification().GetEvidenceRef()] == nil {
			t.Errorf("%s: evidence_ref %q names no evidence", name, e.GetQualification().GetEvidenceRef())
		}
	}
	upd := byName["RegistryEntry "+EntryName(ServerListings, ToolUpdateListingStatus)].Spec.(*mcpreadyv1.RegistryEntry)
	if !upd.GetApprovalRequired() || upd.GetSideEffect() != mcpreadyv1.SideEffectClass_SIDE_EFFECT_CLASS_STATE_CHANGING {
		t.Errorf("update_listing_status: approval %v side effect %s", upd.GetApprovalRequired(), upd.GetSideEffect())
	}
	if got := upd.GetArgumentContract().GetRequiredArguments(); len(got) != 2 || got[0] != "listing_id" || got[1] != "status" {
		t.Errorf("update_listing_status required arguments %v", got)
	}
	us := byName["RegistryEntry "+EntryName(ServerDocsUS, ToolDocsLookup)].Spec.(*mcpreadyv1.RegistryEntry)
	if us.GetRegion() != RegionOther {
		t.Errorf("docs-us region %q", us.GetRegion())
	}
	p := byName["Policy "+PolicyName].Spec.(*mcpreadyv1.Policy)
	if got := p.GetResidency().GetDeniedRegions(); len(got) != 1 || got[0] != RegionOther {
		t.Errorf("denied regions %v", got)
	}
	if len(p.GetEquivalenceClasses()) != 1 || !p.GetEquivalenceClasses()[0].GetFallbackAllowed() {
		t.Errorf("equivalence classes %v", p.GetEquivalenceClasses())
	}
	if d := p.GetPrincipals()[0].GetDeny(); len(d) != 1 || d[0] != EntryName(ServerListings, ToolDeleteListing) {
		t.Errorf("deny %v", d)
	}
}

func TestTrustScopes(t *testing.T) {
	keys, signed := buildSigned(t)
	now := time.Now()
	trust, err := sign.NewTrust(signed[0].Bundle, keys[KeyRoot].Public(), now)
	if err != nil {
		t.Fatal(err)
	}
	declB := artifact.New(artifact.KindDeclaration, ServerDocsB, &mcpreadyv1.Declaration{ServerName: ServerDocsB})
	batch := func(name string) *artifact.Object {
		return artifact.New(artifact.KindReceiptBatch, name, &mcpreadyv1.ReceiptBatch{AgentId: testAgent, Sequence: 1})
	}
	tests := []struct {
		name string
		obj  *artifact.Object
		key  string
		want sign.Reason
	}{
		{"provider A may not declare provider B", declB, KeyProviderA, sign.ReasonOutOfScope},
		{"provider B declares itself", declB, KeyProviderB, ""},
		{"provider may not sign a policy", artifact.New(artifact.KindPolicy, "evil", &mcpreadyv1.Policy{}), KeyProviderA, sign.ReasonKindNotAllowed},
		{"agent signs its own batches", batch(testAgent + "/1"), KeyAgent, ""},
		{"agent may not sign another agent's batch", batch("node-2/1"), KeyAgent, sign.ReasonOutOfScope},
		{"observer signs the evidence it is bound to", artifact.New(artifact.KindEvidence, "x/y", &mcpreadyv1.Evidence{
			Provenance: &mcpreadyv1.Provenance{Issuer: "mcpready-controlplane"}, Observer: &mcpreadyv1.Observer{Independence: "consumer-passive"}}), KeyObserver, ""},
		{"observer may not sign evidence claiming nothing", artifact.New(artifact.KindEvidence, "x/y", &mcpreadyv1.Evidence{}), KeyObserver, sign.ReasonClaimNotGranted},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, _, err := sign.Sign(tc.obj, keys[tc.key])
			if err != nil {
				t.Fatal(err)
			}
			_, err = trust.Verify(b, now)
			if got := sign.ReasonOf(err); got != tc.want {
				t.Fatalf("reason %q (%v), want %q", got, err, tc.want)
			}
		})
	}
}

func TestLoadOrCreateKeys(t *testing.T) {
	// testKeysDir was filled by TestMain; loading it again reuses every key.
	again, err := LoadOrCreateKeys(testKeysDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range KeyNames {
		for _, ext := range []string{".key", ".pub"} {
			if _, err := os.Stat(filepath.Join(testKeysDir, n+ext)); err != nil {
				t.Fatal(err)
			}
		}
		a, _ := sign.KeyID(testKeys[n].Public())
		b, _ := sign.KeyID(again[n].Public())
		if a != b {
			t.Errorf("key %s changed on reuse", n)
		}
	}
	copyFile := func(dir, from, to string) {
		b, err := os.ReadFile(filepath.Join(testKeysDir, from))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, to), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// A lone half is an error, never silently replaced.
	lone := t.TempDir()
	copyFile(lone, KeyRoot+".key", KeyRoot+".key")
	if _, err := LoadOrCreateKeys(lone); err == nil {
		t.Fatal("want an error for a key without its .pub")
	}
	if _, err := os.Stat(filepath.Join(lone, KeyRoot+".pub")); err == nil {
		t.Fatal("a lone .key got a new .pub")
	}
	// A .pub that belongs to another key is an error.
	mixed := t.TempDir()
	copyFile(mixed, KeyRoot+".key", KeyRoot+".key")
	copyFile(mixed, KeyOrg+".pub", KeyRoot+".pub")
	if _, err := LoadOrCreateKeys(mixed); err == nil {
		t.Fatal("want an error for a mismatched .pub")
	}
}

func TestBuildRejectsIncompleteParams(t *testing.T) {
	_, err := Build(Params{})
	if !errors.Is(err, ErrParams) {
		t.Fatalf("err = %v, want ErrParams", err)
	}
}

// TestQuickstartClaimsBound: the quickstart's TrustPolicy verifies (every
// grant of Evidence binds its claims, or NewTrust refuses it), and its synthetic Evidence and the control plane's passive
// Evidence are each signed by a key bound to exactly the claims they make
// (a key claiming another issuer or independence is refused). Before, one
// observer key signed both with no claim bound.
func TestQuickstartClaimsBound(t *testing.T) {
	keys, signed := buildSigned(t)
	now := time.Now()
	trust, err := sign.NewTrust(signed[0].Bundle, keys[KeyRoot].Public(), now)
	if err != nil {
		t.Fatal(err)
	}
	evidence := func(issuer, independence string) *artifact.Object {
		return artifact.New(artifact.KindEvidence, "x/passive", &mcpreadyv1.Evidence{
			Provenance: &mcpreadyv1.Provenance{Issuer: issuer, Version: "1"}, Observer: &mcpreadyv1.Observer{Id: issuer, Independence: independence}})
	}
	for _, tc := range []struct {
		key, issuer, independence string
		ok                        bool
	}{
		{KeyObserver, "mcpready-controlplane", "consumer-passive", true},
		{KeyObserver, "observer", "same-organisation", false},
		{KeyProber, "observer", "same-organisation", true},
		{KeyProber, "mcpready-controlplane", "consumer-passive", false},
	} {
		b, _, err := sign.Sign(evidence(tc.issuer, tc.independence), keys[tc.key])
		if err != nil {
			t.Fatal(err)
		}
		if _, err := trust.Verify(b, now); (err == nil) != tc.ok {
			t.Errorf("%s claiming %s/%s: %v", tc.key, tc.issuer, tc.independence, err)
		}
	}
}
