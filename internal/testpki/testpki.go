// Package testpki builds a throw-away signing hierarchy for tests: a root
// key, a TrustPolicy signed by it, and keys granted narrow rights. It is for
// tests only and never touches the file system.
//
// Granted keys:
//   - Org: every kind except TrustPolicy, every name.
//   - Provider: Declaration and Tombstone, names under "com.example/*".
//   - Observer: Evidence and RegistryEntry, every name (the control plane's own key).
//   - Expired: every kind, but its grant ended an hour before New was called.
//   - Revoked: every kind, revoked.
//   - Agent: DriftReport and ReceiptBatch for node "host-1" (scope "host-1/*").
package testpki

import (
	"crypto"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/mcpready/mcpready/artifact"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/sign"
)

// PKI is one test signing hierarchy.
type PKI struct {
	Root, Org, Provider, Observer, Expired, Revoked, Agent crypto.Signer
	// Prober signs only Evidence, as a synthetic prober (ProberEvidence).
	Prober crypto.Signer
	// TrustPolicy is the signed TrustPolicy bundle (named "test/trust", version 1).
	TrustPolicy []byte
}

// Claims are the Evidence claims a key's grant binds (KeyGrant
// evidence_issuer and independence): an Evidence it signs must state
// exactly these.
type Claims struct{ Issuer, Independence string }

// The claims New's TrustPolicy binds: OrgEvidence for the org key and
// the expired key (what enroll --qualify signs with its default issuer),
// ObserverEvidence for the observer key (what a control plane's
// aggregation signs: controlplane/aggregate's default observer id and its
// passive independence class), ProberEvidence for the prober key (what
// probe and prober sign observing as "org/prober").
var (
	OrgEvidence      = Claims{Issuer: "org", Independence: "self"}
	ObserverEvidence = Claims{Issuer: "mcpready-controlplane", Independence: "consumer-passive"}
	ProberEvidence   = Claims{Issuer: "org/prober", Independence: "consumer-synthetic"}
)

// Claim sets ev's provenance.issuer and observer.independence to c (it
// creates the provenance and observer when absent) and returns ev.
func (c Claims) Claim(ev *mcpreadyv1.Evidence) *mcpreadyv1.Evidence {
	if ev.Provenance == nil {
		ev.Provenance = &mcpreadyv1.Provenance{}
	}
	if ev.Observer == nil {
		ev.Observer = &mcpreadyv1.Observer{}
	}
	ev.Provenance.Issuer, ev.Observer.Independence = c.Issuer, c.Independence
	return ev
}

// New generates keys (ECDSA P-256) and signs a TrustPolicy granting them.
func New(t testing.TB) *PKI {
	t.Helper()
	p := &PKI{}
	for _, k := range []*crypto.Signer{&p.Root, &p.Org, &p.Provider, &p.Observer, &p.Expired, &p.Revoked, &p.Agent, &p.Prober} {
		s, err := sign.GenerateKey(sign.AlgorithmECDSAP256)
		if err != nil {
			t.Fatal(err)
		}
		*k = s
	}
	now := time.Now()
	tp := &mcpreadyv1.TrustPolicy{Provenance: &mcpreadyv1.Provenance{Issuer: "test", Version: "1", IssuedAt: timestamppb.New(now)}}
	org := Grant(t, "org", p.Org, []string{"Declaration", "RegistryEntry", "Policy", "Evidence", "Tombstone", "ReceiptBatch"}, nil)
	org.EvidenceIssuer, org.Independence = OrgEvidence.Issuer, OrgEvidence.Independence
	observer := Grant(t, "observer", p.Observer, []string{"Evidence", "RegistryEntry"}, nil)
	observer.EvidenceIssuer, observer.Independence = ObserverEvidence.Issuer, ObserverEvidence.Independence
	tp.Keys = []*mcpreadyv1.KeyGrant{
		org,
		Grant(t, "provider", p.Provider, []string{"Declaration", "Tombstone"}, []string{"com.example/*"}),
		observer,
		Grant(t, "agent-host-1", p.Agent, []string{"DriftReport", "ReceiptBatch"}, []string{"host-1/*"}),
	}
	exp := Grant(t, "expired", p.Expired, []string{"*"}, nil)
	exp.EvidenceIssuer, exp.Independence = OrgEvidence.Issuer, OrgEvidence.Independence
	prober := Grant(t, "prober", p.Prober, []string{"Evidence"}, nil)
	prober.EvidenceIssuer, prober.Independence = ProberEvidence.Issuer, ProberEvidence.Independence
	exp.NotAfter = timestamppb.New(now.Add(-time.Hour))
	rev := Grant(t, "revoked", p.Revoked, []string{"*"}, nil)
	rev.Revoked, rev.RevocationReason = true, "test"
	tp.Keys = append(tp.Keys, exp, rev, prober)
	p.TrustPolicy = Sign(t, artifact.New(artifact.KindTrustPolicy, "test/trust", tp), p.Root)
	return p
}

// Grant returns a KeyGrant for signer's public key.
func Grant(t testing.TB, name string, signer crypto.Signer, kinds, scopes []string) *mcpreadyv1.KeyGrant {
	t.Helper()
	pem, err := sign.MarshalPublicKey(signer.Public())
	if err != nil {
		t.Fatal(err)
	}
	id, err := sign.KeyID(signer.Public())
	if err != nil {
		t.Fatal(err)
	}
	return &mcpreadyv1.KeyGrant{KeyId: id, PublicKey: string(pem), Name: name, Kinds: kinds, Scopes: scopes}
}

// Sign signs obj with signer and returns the bundle.
func Sign(t testing.TB, obj *artifact.Object, signer crypto.Signer) []byte {
	t.Helper()
	b, _, err := sign.Sign(obj, signer)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Object returns an artifact of kind k named name with spec and labels.
func Object(k artifact.Kind, name string, spec proto.Message, labels map[string]string) *artifact.Object {
	o := artifact.New(k, name, spec)
	o.Metadata.Labels = labels
	return o
}

// Policy returns a minimal Policy object whose provenance version is version.
func Policy(name, version string, labels map[string]string) *artifact.Object {
	return Object(artifact.KindPolicy, name, &mcpreadyv1.Policy{Provenance: &mcpreadyv1.Provenance{Issuer: "test", Version: version}}, labels)
}

// Versioned returns an otherwise empty artifact of kind k named name whose
// provenance is pv (spec, when not nil, is used instead of an empty one).
func Versioned(k artifact.Kind, name string, spec proto.Message, pv *mcpreadyv1.Provenance) *artifact.Object {
	if spec == nil {
		spec = k.NewSpec()
	}
	SetProvenance(spec, pv)
	return artifact.New(k, name, spec)
}

// SetProvenance sets the provenance field of a spec that has one and
// reports whether it did.
func SetProvenance(spec proto.Message, pv *mcpreadyv1.Provenance) bool {
	m := spec.ProtoReflect()
	fd := m.Descriptor().Fields().ByName("provenance")
	if fd == nil {
		return false
	}
	m.Set(fd, protoreflect.ValueOfMessage(pv.ProtoReflect()))
	return true
}

// Tombstone returns a tombstone for the artifact in target (its kind,
// name, exact version and bundle digest), signed by signer.
func Tombstone(t testing.TB, target []byte, reason string, signer crypto.Signer) []byte {
	t.Helper()
	o, err := sign.Peek(target)
	if err != nil {
		t.Fatal(err)
	}
	ts := &mcpreadyv1.Tombstone{TargetKind: string(o.Kind), TargetName: o.Metadata.Name, Reason: reason, TargetVersion: o.Version(), TargetDigest: artifact.Digest(target)}
	return Sign(t, artifact.New(artifact.KindTombstone, o.Metadata.Name, ts), signer)
}

// DriftReport returns the request an agent sends for drift of entry (whose
// current bundle has digest entryDigest) observed by node: the DriftReport
// signed by signer, issued at.
func DriftReport(t testing.TB, signer crypto.Signer, node, entry, entryDigest string, labels []mcpreadyv1.DriftLabel, observed *mcpreadyv1.ToolIdentity, at time.Time) *mcpreadyv1.ReportDriftRequest {
	t.Helper()
	dr := &mcpreadyv1.DriftReport{Provenance: &mcpreadyv1.Provenance{IssuedAt: timestamppb.New(at)}, NodeId: node, EntryName: entry, EntryDigest: entryDigest,
		Labels: labels, Observed: observed}
	return &mcpreadyv1.ReportDriftRequest{Node: &mcpreadyv1.Node{Id: node}, Report: Sign(t, artifact.New(artifact.KindDriftReport, node+"/"+entry, dr), signer)}
}

// ChainTrust returns a TrustPolicy named name at version, signed by root,
// superseding the TrustPolicy bundle sup (nil: the first of its chain),
// that grants each of keys (by label) the Policy kind, revoked for the
// labels in revoked.
func ChainTrust(t testing.TB, root crypto.Signer, name, version string, sup []byte, keys map[string]crypto.Signer, revoked ...string) []byte {
	t.Helper()
	tp := &mcpreadyv1.TrustPolicy{Provenance: &mcpreadyv1.Provenance{Issuer: "test", Version: version}}
	if sup != nil {
		tp.Supersedes = RefOf(t, sup)
	}
	for label, k := range keys {
		g := Grant(t, label, k, []string{"Policy"}, nil)
		if slices.Contains(revoked, label) {
			g.Revoked, g.RevocationReason = true, "compromised"
		}
		tp.Keys = append(tp.Keys, g)
	}
	return Sign(t, artifact.New(artifact.KindTrustPolicy, name, tp), root)
}

// RefOf names a TrustPolicy bundle for TrustPolicy.supersedes.
func RefOf(t testing.TB, bundle []byte) *mcpreadyv1.TrustPolicyRef {
	t.Helper()
	o, err := sign.Peek(bundle)
	if err != nil {
		t.Fatal(err)
	}
	return &mcpreadyv1.TrustPolicyRef{Name: o.Metadata.Name, Version: o.Version(), Digest: artifact.Digest(bundle)}
}
