package admin_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/mcpready/mcpready/artifact"
	"github.com/mcpready/mcpready/controlplane/admin"
	"github.com/mcpready/mcpready/controlplane/store"
	"github.com/mcpready/mcpready/controlplane/writer"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/internal/etcdtest"
	"github.com/mcpready/mcpready/internal/testpki"
	"github.com/mcpready/mcpready/sign"
)

func setup(t *testing.T, maxBytes int) (*admin.Service, *store.Store, *testpki.PKI) {
	t.Helper()
	cli, _ := etcdtest.Etcd(t)
	st := store.New(cli, store.Options{MaxBytes: maxBytes})
	p := testpki.New(t)
	return admin.New(admin.Options{Writer: newWriter(t, st, p, nil)}), st, p
}

func newWriter(t *testing.T, st *store.Store, p *testpki.PKI, now func() time.Time) *writer.Writer {
	t.Helper()
	w, err := writer.New(writer.Options{Store: st, Root: p.Root.Public(), Now: now})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func apply(t *testing.T, svc *admin.Service, b []byte) *mcpreadyv1.ApplyResponse {
	t.Helper()
	r, err := svc.Apply(context.Background(), &mcpreadyv1.ApplyRequest{Bundle: b})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// editBundle rewrites a bundle's JSON with f.
func editBundle(t *testing.T, b []byte, f func(env map[string]any)) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	f(m["dsseEnvelope"].(map[string]any))
	out, _ := json.Marshal(m)
	return out
}

func TestBootstrapNeedsRootTrustPolicy(t *testing.T) {
	svc, st, p := setup(t, 0)
	ctx := context.Background()
	_, err := svc.Apply(ctx, &mcpreadyv1.ApplyRequest{Bundle: testpki.Sign(t, testpki.Policy("org/p", "1", nil), p.Org)})
	if status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("policy before trust: %v", err)
	}
	// a TrustPolicy signed by another key is refused
	other := testpki.Sign(t, artifact.New(artifact.KindTrustPolicy, "x/trust", &mcpreadyv1.TrustPolicy{}), p.Org)
	if _, err := svc.Apply(ctx, &mcpreadyv1.ApplyRequest{Bundle: other}); err == nil {
		t.Fatal("non-root TrustPolicy accepted")
	}
	r := apply(t, svc, p.TrustPolicy)
	if r.Kind != "TrustPolicy" || r.Revision != 1 {
		t.Fatalf("%v", r)
	}
	// after bootstrap, a non-root TrustPolicy is still refused
	if _, err := svc.Apply(ctx, &mcpreadyv1.ApplyRequest{Bundle: other}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("org-signed TrustPolicy: %v", err)
	}
	l, _, _ := st.List(ctx, artifact.KindTrustPolicy)
	if len(l) != 1 || l[0].Name != "test/trust" {
		t.Fatalf("stored trust policies: %v", l)
	}
}

func TestApplyGetHistoryImmutable(t *testing.T) {
	svc, _, p := setup(t, 0)
	ctx := context.Background()
	apply(t, svc, p.TrustPolicy)
	b1 := testpki.Sign(t, testpki.Policy("org/p", "1", nil), p.Org)
	b2 := testpki.Sign(t, testpki.Policy("org/p", "2", nil), p.Org)
	if r := apply(t, svc, b1); r.Revision != 1 || r.Unchanged {
		t.Fatalf("%v", r)
	}
	if r := apply(t, svc, b1); r.Revision != 1 || !r.Unchanged {
		t.Fatalf("re-apply: %v", r)
	}
	if r := apply(t, svc, b2); r.Revision != 2 {
		t.Fatalf("%v", r)
	}
	g, err := svc.Get(ctx, &mcpreadyv1.GetRequest{Kind: "policies"})
	if err != nil || len(g.Artifacts) != 1 || !bytes.Equal(g.Artifacts[0].Bundle, b2) {
		t.Fatalf("get: %v %v", g, err)
	}
	id, _ := sign.KeyID(p.Org.Public())
	h, err := svc.History(ctx, &mcpreadyv1.HistoryRequest{Kind: "Policy", Name: "org/p"})
	if err != nil || len(h.Revisions) != 2 || !bytes.Equal(h.Revisions[0].Bundle, b1) || !bytes.Equal(h.Revisions[1].Bundle, b2) || h.Revisions[0].SignerKeyId != id {
		t.Fatalf("history: %v %v", h, err)
	}
	if h.Revisions[0].Digest != artifact.Digest(b1) {
		t.Fatal("digest is not of the stored bytes")
	}
}

func TestRejectedWritesStoreNothing(t *testing.T) {
	svc, st, p := setup(t, 8192)
	ctx := context.Background()
	apply(t, svc, p.TrustPolicy)
	good := testpki.Sign(t, testpki.Policy("org/p", "1", nil), p.Org)
	stranger, _ := sign.GenerateKey(sign.AlgorithmEd25519)
	bigPolicy := testpki.Policy("org/big", "1", nil)
	bigPolicy.Spec.(*mcpreadyv1.Policy).Provenance.SourceUri = strings.Repeat("x", 10000)
	tests := []struct {
		name   string
		bundle []byte
		code   codes.Code
		reason string
		kind   artifact.Kind
	}{
		{"garbage", []byte("not a bundle"), codes.InvalidArgument, "malformed", artifact.KindPolicy},
		{"unsigned", editBundle(t, good, func(env map[string]any) { env["signatures"] = []any{} }), codes.PermissionDenied, "unsigned", artifact.KindPolicy},
		{"tampered", editBundle(t, good, func(env map[string]any) {
			pl, _ := base64.StdEncoding.DecodeString(env["payload"].(string))
			env["payload"] = base64.StdEncoding.EncodeToString(bytes.Replace(pl, []byte(`"version":"1"`), []byte(`"version":"9"`), 1))
		}), codes.PermissionDenied, "bad-signature", artifact.KindPolicy},
		{"unknown key", testpki.Sign(t, testpki.Policy("org/p", "1", nil), stranger), codes.PermissionDenied, "unknown-key", artifact.KindPolicy},
		{"kind not granted", testpki.Sign(t, testpki.Policy("com.example/p", "1", nil), p.Provider), codes.PermissionDenied, "kind-not-allowed", artifact.KindPolicy},
		{"out of scope", testpki.Sign(t, testpki.Object(artifact.KindDeclaration, "org.other/d", &mcpreadyv1.Declaration{}, nil), p.Provider), codes.PermissionDenied, "out-of-scope", artifact.KindDeclaration},
		{"expired key", testpki.Sign(t, testpki.Policy("org/p", "1", nil), p.Expired), codes.PermissionDenied, "key-expired", artifact.KindPolicy},
		{"revoked key", testpki.Sign(t, testpki.Policy("org/p", "1", nil), p.Revoked), codes.PermissionDenied, "key-revoked", artifact.KindPolicy},
		{"receipt batch", testpki.Sign(t, testpki.Object(artifact.KindReceiptBatch, "agent/b1", &mcpreadyv1.ReceiptBatch{}, nil), p.Org), codes.InvalidArgument, "ReceiptsService", artifact.KindReceiptBatch},
		{"tombstone via apply", testpki.Sign(t, testpki.Object(artifact.KindTombstone, "org/p", &mcpreadyv1.Tombstone{TargetKind: "Policy", TargetName: "org/p"}, nil), p.Org), codes.InvalidArgument, "Delete", artifact.KindPolicy},
		{"oversized", testpki.Sign(t, bigPolicy, p.Org), codes.InvalidArgument, "too large", artifact.KindPolicy},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := svc.Apply(ctx, &mcpreadyv1.ApplyRequest{Bundle: tc.bundle})
			if status.Code(err) != tc.code || !strings.Contains(err.Error(), tc.reason) {
				t.Fatalf("got %v, want %v containing %q", err, tc.code, tc.reason)
			}
			if l, _, _ := st.List(ctx, tc.kind); len(l) != 0 {
				t.Fatalf("rejected write stored %d records", len(l))
			}
		})
	}
}

func TestDeleteWithTombstone(t *testing.T) {
	svc, _, p := setup(t, 0)
	ctx := context.Background()
	apply(t, svc, p.TrustPolicy)
	pol := testpki.Sign(t, testpki.Policy("org/p", "1", nil), p.Org)
	decl := testpki.Sign(t, testpki.Object(artifact.KindDeclaration, "com.example/d", &mcpreadyv1.Declaration{}, nil), p.Provider)
	apply(t, svc, pol)
	apply(t, svc, decl)
	if _, err := svc.Delete(ctx, &mcpreadyv1.DeleteRequest{Tombstone: testpki.Sign(t, testpki.Object(artifact.KindTombstone, "org/p", &mcpreadyv1.Tombstone{TargetKind: "Policy", TargetName: "org/p"}, nil), p.Org)}); status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "tombstone") {
		t.Fatalf("a tombstone naming no version: %v, want FailedPrecondition", err)
	}
	tomb := func() []byte {
		return testpki.Tombstone(t, pol, "test", p.Org)
	}
	// the provider may delete its declaration but not the org's policy
	provTomb := testpki.Sign(t, testpki.Object(artifact.KindTombstone, "org/p", &mcpreadyv1.Tombstone{TargetKind: "Policy", TargetName: "org/p"}, nil), p.Provider)
	if _, err := svc.Delete(ctx, &mcpreadyv1.DeleteRequest{Tombstone: provTomb}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("provider deleting policy: %v", err)
	}
	provDecl := testpki.Tombstone(t, decl, "", p.Provider)
	if r, err := svc.Delete(ctx, &mcpreadyv1.DeleteRequest{Tombstone: provDecl}); err != nil || r.Revision != 2 {
		t.Fatalf("provider deleting declaration: %v %v", r, err)
	}
	r, err := svc.Delete(ctx, &mcpreadyv1.DeleteRequest{Tombstone: tomb()})
	if err != nil || r.Revision != 2 {
		t.Fatalf("delete: %v %v", r, err)
	}
	if _, err := svc.Get(ctx, &mcpreadyv1.GetRequest{Kind: "Policy", Name: "org/p"}); status.Code(err) != codes.NotFound {
		t.Fatalf("get deleted: %v", err)
	}
	g, err := svc.Get(ctx, &mcpreadyv1.GetRequest{Kind: "Policy", IncludeDeleted: true})
	if err != nil || len(g.Artifacts) != 1 || !g.Artifacts[0].Deleted {
		t.Fatalf("include deleted: %v %v", g, err)
	}
	if _, err := svc.Delete(ctx, &mcpreadyv1.DeleteRequest{Tombstone: tomb()}); status.Code(err) != codes.NotFound {
		t.Fatalf("second delete: %v", err)
	}
	h, _ := svc.History(ctx, &mcpreadyv1.HistoryRequest{Kind: "Policy", Name: "org/p"})
	if len(h.Revisions) != 2 || h.Revisions[0].Deleted || !h.Revisions[1].Deleted {
		t.Fatalf("history after delete: %v", h)
	}
	// a tombstone whose name differs from its target is refused
	bad := testpki.Sign(t, testpki.Object(artifact.KindTombstone, "org/q", &mcpreadyv1.Tombstone{TargetKind: "Policy", TargetName: "org/p"}, nil), p.Org)
	if _, err := svc.Delete(ctx, &mcpreadyv1.DeleteRequest{Tombstone: bad}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("mismatched tombstone: %v", err)
	}
}

func TestExpiredTrustPolicyAcceptsOnlyANewOne(t *testing.T) {
	cli, _ := etcdtest.Etcd(t)
	st := store.New(cli, store.Options{})
	p := testpki.New(t)
	now := time.Now()
	clock := func() time.Time { return now }
	svc := admin.New(admin.Options{Writer: newWriter(t, st, p, func() time.Time { return clock() })})
	ctx := context.Background()
	short := &mcpreadyv1.TrustPolicy{Provenance: &mcpreadyv1.Provenance{Issuer: "test", ExpiresAt: timestamppb.New(now.Add(time.Hour))},
		Keys: []*mcpreadyv1.KeyGrant{testpki.Grant(t, "org", p.Org, []string{"Policy"}, nil)}}
	shortBundle := testpki.Sign(t, artifact.New(artifact.KindTrustPolicy, "test/trust", short), p.Root)
	apply(t, svc, shortBundle)
	apply(t, svc, testpki.Sign(t, testpki.Policy("org/p", "1", nil), p.Org))
	clock = func() time.Time { return now.Add(2 * time.Hour) }
	_, err := svc.Apply(ctx, &mcpreadyv1.ApplyRequest{Bundle: testpki.Sign(t, testpki.Policy("org/p", "2", nil), p.Org)})
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "no longer verifies") {
		t.Fatalf("write under an expired trust policy: %v", err)
	}
	if _, err := svc.Apply(ctx, &mcpreadyv1.ApplyRequest{Bundle: p.TrustPolicy}); status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "trust-chain") {
		t.Fatalf("a renewal that names no superseded version: %v", err)
	}
	renewed, err := sign.Peek(p.TrustPolicy)
	if err != nil {
		t.Fatal(err)
	}
	tp := proto.Clone(renewed.Spec).(*mcpreadyv1.TrustPolicy)
	tp.Supersedes = &mcpreadyv1.TrustPolicyRef{Name: "test/trust", Version: "", Digest: artifact.Digest(shortBundle)}
	apply(t, svc, testpki.Sign(t, artifact.New(artifact.KindTrustPolicy, "test/trust", tp), p.Root)) // a fresh root-signed successor is accepted
	if r := apply(t, svc, testpki.Sign(t, testpki.Policy("org/p", "2", nil), p.Org)); r.Revision != 2 {
		t.Fatalf("after renewal: %v", r)
	}
}

// TestRollbackRefusalsMapToStatus: an older or equal version and an
// expired bundle are FailedPrecondition naming the reason; a value that is
// not a version is InvalidArgument. Nothing is stored.
func TestRollbackRefusalsMapToStatus(t *testing.T) {
	cli, _ := etcdtest.Etcd(t)
	st := store.New(cli, store.Options{})
	p := testpki.New(t)
	svc := admin.New(admin.Options{Writer: newWriter(t, st, p, nil)})
	ctx := context.Background()
	apply(t, svc, p.TrustPolicy)
	apply(t, svc, testpki.Sign(t, testpki.Policy("org/p", "2", nil), p.Org))
	expired := testpki.Policy("org/p", "9", nil)
	expired.Spec.(*mcpreadyv1.Policy).Provenance.ExpiresAt = timestamppb.New(time.Now().Add(-time.Minute))
	for label, c := range map[string]struct {
		b      []byte
		code   codes.Code
		reason string
	}{
		"older":   {testpki.Sign(t, testpki.Policy("org/p", "1", nil), p.Org), codes.FailedPrecondition, "rollback"},
		"equal":   {testpki.Sign(t, testpki.Policy("org/p", "2", map[string]string{"x": "y"}), p.Org), codes.FailedPrecondition, "rollback"},
		"expired": {testpki.Sign(t, expired, p.Org), codes.FailedPrecondition, "expired"},
		"invalid": {testpki.Sign(t, testpki.Policy("org/p", "v3", nil), p.Org), codes.InvalidArgument, "version"},
	} {
		_, err := svc.Apply(ctx, &mcpreadyv1.ApplyRequest{Bundle: c.b})
		if status.Code(err) != c.code || !strings.Contains(status.Convert(err).Message(), "rejected: "+c.reason) {
			t.Errorf("%s: %v, want %v %s", label, err, c.code, c.reason)
		}
	}
	if h, _ := st.History(ctx, artifact.KindPolicy, "org/p"); len(h) != 1 {
		t.Fatalf("refusals stored %d revisions", len(h)-1)
	}
}
