package artifact

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
)

// samples holds one authored object per kind, with nested messages,
// enums, timestamps, 64-bit integers and characters JSON escapes.
var samples = map[Kind]string{
	KindTrustPolicy: `apiVersion: mcpready.dev/v1
kind: TrustPolicy
metadata: {name: example.org/trust}
spec:
  provenance: {issuer: example.org, issuedAt: "2026-11-01T00:00:00Z"}
  keys:
    - keyId: abc
      publicKey: "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n"
      kinds: [Declaration]
      scopes: ["com.example/*"]
      notAfter: "2027-01-01T00:00:00Z"
`,
	KindDeclaration: `apiVersion: mcpready.dev/v1
kind: Declaration
metadata:
  name: com.example/docs
  labels: {team: docs, "z": "é <&>"}
spec:
  serverName: com.example/docs
  protocolVersions: ["2026-07-28"]
  tools:
    - {name: search, sideEffect: SIDE_EFFECT_CLASS_READ_ONLY}
`,
	KindRegistryEntry: `apiVersion: mcpready.dev/v1
kind: RegistryEntry
metadata: {name: com.example/docs/search@1.4.2}
spec:
  identity: {serverName: com.example/docs, toolName: search}
  sideEffect: SIDE_EFFECT_CLASS_READ_ONLY
  approvalRequired: true
`,
	KindPolicy: `{"apiVersion":"mcpready.dev/v1","kind":"Policy","metadata":{"name":"example.org/default"},"spec":{"inventory":["com.example/*"]}}`,
	KindEvidence: `apiVersion: mcpready.dev/v1
kind: Evidence
metadata: {name: prober-1/docs}
spec:
  method: EVIDENCE_METHOD_SYNTHETIC
  windowStart: "2026-11-29T13:00:00.5Z"
`,
	KindReceiptBatch: `apiVersion: mcpready.dev/v1
kind: ReceiptBatch
metadata: {name: agent-7/1}
spec: {agentId: agent-7, sequence: "18446744073709551615", createdAt: "2026-11-29T13:00:00.123456789Z"}
`,
	KindTombstone: `apiVersion: mcpready.dev/v1
kind: Tombstone
metadata: {name: tombstones/x}
spec: {targetKind: Declaration, targetName: com.example/docs, reason: "retired\tnow"}
`,
	KindDriftReport: `apiVersion: mcpready.dev/v1
kind: DriftReport
metadata: {name: host-1/com.example/docs/search@1.4.2}
spec:
  nodeId: host-1
  entryName: com.example/docs/search@1.4.2
  labels: [DRIFT_LABEL_DEFINITION_DRIFT]
  observed: {serverName: com.example/docs, toolName: search}
`,
}

func TestRoundTripAllKinds(t *testing.T) {
	for _, k := range Kinds() {
		t.Run(string(k), func(t *testing.T) {
			src, ok := samples[k]
			if !ok {
				t.Fatalf("no sample for %s", k)
			}
			obj, err := Parse([]byte(src))
			if err != nil {
				t.Fatal(err)
			}
			if obj.Kind != k {
				t.Fatalf("kind %s", obj.Kind)
			}
			c1, err := obj.CanonicalJSON()
			if err != nil {
				t.Fatal(err)
			}
			again, err := Parse(c1)
			if err != nil {
				t.Fatalf("canonical JSON does not parse: %v\n%s", err, c1)
			}
			c2, err := again.CanonicalJSON()
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(c1, c2) {
				t.Fatalf("canonical JSON not stable:\n%s\n%s", c1, c2)
			}
			if !proto.Equal(obj.Spec, again.Spec) {
				t.Fatal("spec changed in round trip")
			}
			y, err := obj.YAML()
			if err != nil {
				t.Fatal(err)
			}
			fromYAML, err := Parse(y)
			if err != nil {
				t.Fatalf("YAML does not parse: %v\n%s", err, y)
			}
			if c3, _ := fromYAML.CanonicalJSON(); !bytes.Equal(c1, c3) {
				t.Fatalf("YAML round trip changed the object:\n%s\n%s", c1, c3)
			}
			if c, err := Canonicalize(c1); err != nil || !bytes.Equal(c, c1) {
				t.Fatalf("canonical JSON is not a fixed point of Canonicalize: %v", err)
			}
			if d := Digest(c1); !strings.HasPrefix(d, "sha256:") || len(d) != 71 {
				t.Fatalf("digest %q", d)
			}
		})
	}
}

// TestParseJSONIsJSON checks that JSON input is read as JSON: YAML would
// fold U+2028, U+2029 and U+0085 inside strings into spaces, and then
// canonical JSON would not parse back to itself.
func TestParseJSONIsJSON(t *testing.T) {
	src := []byte("{\"apiVersion\":\"mcpready.dev/v1\",\"kind\":\"Tombstone\",\"metadata\":{\"name\":\"t\"},\"spec\":{\"reason\":\"a\u2028b\u2029c\u0085d\"}}")
	obj, err := Parse(src)
	if err != nil {
		t.Fatal(err)
	}
	if got := obj.Spec.(*mcpreadyv1.Tombstone).GetReason(); got != "a\u2028b\u2029c\u0085d" {
		t.Fatalf("reason %q", got)
	}
	c, _ := obj.CanonicalJSON()
	again, err := Parse(c)
	if err != nil {
		t.Fatal(err)
	}
	if c2, _ := again.CanonicalJSON(); !bytes.Equal(c, c2) {
		t.Fatalf("not stable:\n%s\n%s", c, c2)
	}
	if _, err := Parse([]byte(`{"apiVersion":"mcpready.dev/v1","kind":"Policy","kind":"Policy","metadata":{"name":"p"}}`)); !errors.Is(err, ErrMalformed) {
		t.Fatalf("duplicate key in JSON: %v", err)
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want error
	}{
		{"empty", "", ErrMalformed},
		{"not yaml", "kind: [", ErrMalformed},
		{"unknown top-level field", "apiVersion: mcpready.dev/v1\nkind: Policy\nmetadata: {name: p}\nextra: 1\n", ErrMalformed},
		{"unknown metadata field", "apiVersion: mcpready.dev/v1\nkind: Policy\nmetadata: {name: p, namespace: x}\n", ErrMalformed},
		{"unknown spec field", "apiVersion: mcpready.dev/v1\nkind: Policy\nmetadata: {name: p}\nspec: {nope: 1}\n", ErrMalformed},
		{"duplicate key", "apiVersion: mcpready.dev/v1\nkind: Policy\nkind: Policy\nmetadata: {name: p}\n", ErrMalformed},
		{"wrong spec type", "apiVersion: mcpready.dev/v1\nkind: Policy\nmetadata: {name: p}\nspec: []\n", ErrMalformed},
		{"bad enum", "apiVersion: mcpready.dev/v1\nkind: RegistryEntry\nmetadata: {name: p}\nspec: {sideEffect: SOMETIMES}\n", ErrMalformed},
		{"trailing data", `{"apiVersion":"mcpready.dev/v1","kind":"Policy","metadata":{"name":"p"}} {}`, ErrMalformed},
		// A second document would be dropped unsigned and unapplied while
		// the first was stored: refused whole.
		{"second document", "apiVersion: mcpready.dev/v1\nkind: Policy\nmetadata: {name: p}\n---\napiVersion: mcpready.dev/v1\nkind: Policy\nmetadata: {name: q}\n", ErrMalformed},
		{"data after the document end", "apiVersion: mcpready.dev/v1\nkind: Policy\nmetadata: {name: p}\n...\nkind: Widget\n", ErrMalformed},
		{"wrong apiVersion", "apiVersion: v1\nkind: Policy\nmetadata: {name: p}\n", ErrAPIVersion},
		{"unknown kind", "apiVersion: mcpready.dev/v1\nkind: Widget\nmetadata: {name: p}\n", ErrUnknownKind},
		{"no metadata", "apiVersion: mcpready.dev/v1\nkind: Policy\n", ErrInvalid},
		{"no name", "apiVersion: mcpready.dev/v1\nkind: Policy\nmetadata: {labels: {a: b}}\n", ErrInvalid},
		{"bad name", "apiVersion: mcpready.dev/v1\nkind: Policy\nmetadata: {name: \"a b\"}\n", ErrInvalid},
		{"name with ..", "apiVersion: mcpready.dev/v1\nkind: Policy\nmetadata: {name: a/../b}\n", ErrInvalid},
		{"name with leading slash", "apiVersion: mcpready.dev/v1\nkind: Policy\nmetadata: {name: /a}\n", ErrInvalid},
		{"malformed retrieval digest", "apiVersion: mcpready.dev/v1\nkind: Policy\nmetadata: {name: p}\nspec: {provenance: {retrievalDigest: sha256:00}}\n", ErrInvalid},
		{"long name", "apiVersion: mcpready.dev/v1\nkind: Policy\nmetadata: {name: " + strings.Repeat("a", 254) + "}\n", ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obj, err := Parse([]byte(tt.src))
			if !errors.Is(err, tt.want) {
				t.Fatalf("Parse = %v, %v; want %v", obj, err, tt.want)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	obj := New(KindPolicy, "p", &mcpreadyv1.Declaration{})
	if err := obj.Validate(); !errors.Is(err, ErrInvalid) {
		t.Errorf("spec of another kind: %v", err)
	}
	if _, err := obj.CanonicalJSON(); !errors.Is(err, ErrInvalid) {
		t.Errorf("CanonicalJSON of invalid object: %v", err)
	}
	if err := New(KindPolicy, "p", nil).Validate(); !errors.Is(err, ErrInvalid) {
		t.Errorf("nil spec: %v", err)
	}
	if err := New("Widget", "p", &mcpreadyv1.Policy{}).Validate(); !errors.Is(err, ErrUnknownKind) {
		t.Errorf("unknown kind: %v", err)
	}
	if err := New(KindPolicy, "p", &mcpreadyv1.Policy{}).Validate(); err != nil {
		t.Errorf("valid: %v", err)
	}
}

func TestKinds(t *testing.T) {
	for _, k := range Kinds() {
		for _, s := range []string{string(k), strings.ToLower(string(k)), strings.ToUpper(string(k))} {
			if got, err := ParseKind(s); err != nil || got != k {
				t.Errorf("ParseKind(%q) = %q, %v", s, got, err)
			}
		}
		if got, err := KindFromTypeURL(k.TypeURL()); err != nil || got != k {
			t.Errorf("KindFromTypeURL(%q) = %q, %v", k.TypeURL(), got, err)
		}
		if got, err := KindFromPredicateType(k.PredicateType()); err != nil || got != k {
			t.Errorf("KindFromPredicateType(%q) = %q, %v", k.PredicateType(), got, err)
		}
		if k.NewSpec() == nil {
			t.Errorf("%s has no spec", k)
		}
	}
	plurals := map[string]Kind{"policies": KindPolicy, "registryentries": KindRegistryEntry, "declarations": KindDeclaration, "trustpolicies": KindTrustPolicy, "tombstones": KindTombstone}
	for s, want := range plurals {
		if got, err := ParseKind(s); err != nil || got != want {
			t.Errorf("ParseKind(%q) = %q, %v", s, got, err)
		}
	}
	if got := KindPolicy.PredicateType(); got != "https://mcpready.dev/policy/v1" {
		t.Errorf("PredicateType = %q", got)
	}
	for _, bad := range []string{"", "widget", "polic"} {
		if _, err := ParseKind(bad); !errors.Is(err, ErrUnknownKind) {
			t.Errorf("ParseKind(%q): %v", bad, err)
		}
	}
	if _, err := KindFromTypeURL("type.mcpready.dev/mcpready.v1.Widget"); !errors.Is(err, ErrUnknownKind) {
		t.Errorf("KindFromTypeURL(widget): %v", err)
	}
	if _, err := KindFromPredicateType("https://slsa.dev/provenance/v1"); !errors.Is(err, ErrUnknownKind) {
		t.Errorf("KindFromPredicateType(slsa): %v", err)
	}
}

func TestCanonicalDigest(t *testing.T) {
	a, err := CanonicalDigest([]byte(`{"b": 1, "a": [1.0, "x"]}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := CanonicalDigest([]byte(`{"a":[1,"x"],"b":1}`))
	if a != b {
		t.Errorf("equivalent JSON digests differ: %s %s", a, b)
	}
	if _, err := CanonicalDigest([]byte(`{"a":`)); !errors.Is(err, ErrMalformed) {
		t.Errorf("malformed JSON: %v", err)
	}
}

func FuzzCleanName(f *testing.F) {
	for _, s := range []string{"", "/", "http://127.0.0.1:8080/mcp", "a..b//c", "ü/ß", "com.example/docs"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if len(s) > 200 {
			return
		}
		if err := ValidateName("p/" + CleanName(s)); err != nil {
			t.Fatalf("%q → %q: %v", s, CleanName(s), err)
		}
	})
}
