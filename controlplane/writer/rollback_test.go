package writer_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/mcpready/mcpready/artifact"
	"github.com/mcpready/mcpready/controlplane/store"
	"github.com/mcpready/mcpready/controlplane/writer"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/internal/etcdtest"
	"github.com/mcpready/mcpready/internal/safebuf"
	"github.com/mcpready/mcpready/internal/testpki"
	"github.com/mcpready/mcpready/sign"
)

func newWriter(t *testing.T) (*writer.Writer, *store.Store, *testpki.PKI) {
	t.Helper()
	cli, _ := etcdtest.Etcd(t)
	st := store.New(cli, store.Options{})
	p := testpki.New(t)
	w, err := writer.New(writer.Options{Store: st, Root: p.Root.Public()})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := w.Apply(context.Background(), p.TrustPolicy); err != nil {
		t.Fatal(err)
	}
	return w, st, p
}

// trustRevoking returns the testpki TrustPolicy at version, with the org
// key revoked when revokeOrg is set.
func trustRevoking(t *testing.T, p *testpki.PKI, version string, revokeOrg bool) []byte {
	t.Helper()
	v, err := sign.Peek(p.TrustPolicy)
	if err != nil {
		t.Fatal(err)
	}
	tp := proto.Clone(v.Spec).(*mcpreadyv1.TrustPolicy)
	tp.Provenance.Version = version
	tp.Supersedes = testpki.RefOf(t, p.TrustPolicy)
	if revokeOrg {
		tp.Keys[0].Revoked, tp.Keys[0].RevocationReason = true, "compromised"
	}
	return testpki.Sign(t, artifact.New(artifact.KindTrustPolicy, "test/trust", tp), p.Root)
}

// TestRollbackUndoesRevocation is the attack: revoke the org key in
// revision 2 of the TrustPolicy, fetch revision 1 from the history and
// apply it again. It must be refused as a rollback, nothing stored, and
// the revoked key must still sign nothing.
func TestRollbackUndoesRevocation(t *testing.T) {
	w, st, p := newWriter(t)
	ctx := context.Background()
	if _, _, err := w.Apply(ctx, trustRevoking(t, p, "2", true)); err != nil {
		t.Fatal(err)
	}
	hist, err := st.History(ctx, artifact.KindTrustPolicy, "test/trust")
	if err != nil || len(hist) != 2 {
		t.Fatalf("history: %d, %v", len(hist), err)
	}
	_, _, err = w.Apply(ctx, hist[0].Bundle)
	if !errors.Is(err, artifact.ErrRollback) {
		t.Fatalf("re-applying revision 1: err = %v, want rollback", err)
	}
	if hist, _ := st.History(ctx, artifact.KindTrustPolicy, "test/trust"); len(hist) != 2 {
		t.Fatalf("a refused rollback stored something: %d revisions", len(hist))
	}
	if _, _, err := w.Apply(ctx, testpki.Sign(t, testpki.Policy("org/p", "1", nil), p.Org)); sign.ReasonOf(err) != sign.ReasonKeyRevoked {
		t.Fatalf("revoked org key signs again: %v", err)
	}
}

// kindSample returns a bundle of kind k named after k at version, signed
// by a key the testpki TrustPolicy grants k; salt changes the content. A
// TrustPolicy supersedes w's active one.
func kindSample(t *testing.T, w *writer.Writer, p *testpki.PKI, k artifact.Kind, version, salt string, expires time.Time) []byte {
	t.Helper()
	pv := &mcpreadyv1.Provenance{Issuer: "test" + salt, Version: version}
	if !expires.IsZero() {
		pv.ExpiresAt = timestamppb.New(expires)
	}
	var spec proto.Message // empty of kind k, but a TrustPolicy keeps its grants
	name, signer := "org/"+string(k), p.Org
	if k == artifact.KindEvidence { // it claims what the org key's grant binds; salt goes elsewhere
		pv.Issuer = testpki.OrgEvidence.Issuer
		spec = &mcpreadyv1.Evidence{Observer: &mcpreadyv1.Observer{Independence: testpki.OrgEvidence.Independence, Software: salt}}
	}
	if k == artifact.KindTrustPolicy {
		v, err := sign.Peek(p.TrustPolicy)
		if err != nil {
			t.Fatal(err)
		}
		spec, name, signer = proto.Clone(v.Spec), "test/trust", p.Root
		ref := w.Current().Ref()
		spec.(*mcpreadyv1.TrustPolicy).Supersedes = &mcpreadyv1.TrustPolicyRef{Name: ref.Name, Version: ref.Version, Digest: ref.Digest}
	}
	return testpki.Sign(t, testpki.Versioned(k, name, spec, pv), signer)
}

var versionedKinds = []artifact.Kind{artifact.KindTrustPolicy, artifact.KindDeclaration, artifact.KindRegistryEntry, artifact.KindPolicy, artifact.KindEvidence}

// TestReplayEveryKind replays each kind at an older version, at an equal
// version with other content and unversioned: each is refused with
// rollback and nothing is stored; the exact latest bytes are unchanged,
// a newer version is stored, and after a deletion the old versions are
// still refused.
func TestReplayEveryKind(t *testing.T) {
	for _, k := range versionedKinds {
		t.Run(string(k), func(t *testing.T) {
			w, st, p := newWriter(t)
			ctx := context.Background()
			if _, _, err := w.Apply(ctx, kindSample(t, w, p, k, "2", "", time.Time{})); err != nil {
				t.Fatal(err)
			}
			v3 := kindSample(t, w, p, k, "3", "", time.Time{})
			if _, _, err := w.Apply(ctx, v3); err != nil {
				t.Fatal(err)
			}
			name := "org/" + string(k)
			if k == artifact.KindTrustPolicy {
				name = "test/trust"
			}
			before, _ := st.History(ctx, k, name)
			for label, b := range map[string][]byte{
				"older":       kindSample(t, w, p, k, "2", "", time.Time{}),
				"equal":       kindSample(t, w, p, k, "3", "other", time.Time{}),
				"equal-1.0":   kindSample(t, w, p, k, "3.0", "other", time.Time{}),
				"unversioned": kindSample(t, w, p, k, "", "", time.Time{}),
			} {
				if _, _, err := w.Apply(ctx, b); !errors.Is(err, artifact.ErrRollback) {
					t.Errorf("%s: err = %v, want rollback", label, err)
				}
			}
			if _, _, err := w.Apply(ctx, kindSample(t, w, p, k, "v9", "", time.Time{})); !errors.Is(err, artifact.ErrBadVersion) {
				t.Errorf("not a version: err = %v", err)
			}
			if _, _, err := w.Apply(ctx, kindSample(t, w, p, k, "9", "", time.Now().Add(-time.Minute))); !errors.Is(err, artifact.ErrExpired) && sign.ReasonOf(err) == "" {
				t.Errorf("expired: err = %v", err)
			}
			if after, _ := st.History(ctx, k, name); len(after) != len(before) {
				t.Fatalf("refused writes stored %d revisions", len(after)-len(before))
			}
			if _, unchanged, err := w.Apply(ctx, v3); err != nil || !unchanged {
				t.Fatalf("re-applying the latest bytes: unchanged %v, %v", unchanged, err)
			}
			v4 := kindSample(t, w, p, k, "4", "", time.Time{})
			if _, _, err := w.Apply(ctx, v4); err != nil {
				t.Fatal(err)
			}
			if k == artifact.KindTrustPolicy {
				return // a TrustPolicy is not deleted here
			}
			tomb := testpki.Tombstone(t, v4, "", p.Org)
			if _, err := w.Delete(ctx, tomb); err != nil {
				t.Fatal(err)
			}
			for _, b := range [][]byte{v3, v4} {
				if _, _, err := w.Apply(ctx, b); !errors.Is(err, artifact.ErrRollback) {
					t.Errorf("after deletion: err = %v, want rollback", err)
				}
			}
			if _, _, err := w.Apply(ctx, kindSample(t, w, p, k, "5", "", time.Time{})); err != nil {
				t.Fatalf("a newer version after deletion: %v", err)
			}
		})
	}
}

// TestLegacyRecordsAreCompared: revisions stored before the store kept
// high-water marks still bound what follows, from their signed versions.
func TestLegacyRecordsAreCompared(t *testing.T) {
	w, st, p := newWriter(t)
	ctx := context.Background()
	k := artifact.KindPolicy
	// written as an older control plane did: no Version, so no mark
	if _, _, err := st.Put(ctx, store.Record{Kind: k, Name: "org/" + string(k), Bundle: kindSample(t, w, p, k, "2", "", time.Time{})}); err != nil {
		t.Fatal(err)
	}
	if r, _ := st.Get(ctx, k, "org/"+string(k)); r.HighWater != "" {
		t.Fatalf("legacy record has a mark %q", r.HighWater)
	}
	if _, _, err := w.Apply(ctx, kindSample(t, w, p, k, "1", "x", time.Time{})); !errors.Is(err, artifact.ErrRollback) {
		t.Fatalf("older than a legacy revision: %v", err)
	}
	if _, _, err := w.Apply(ctx, kindSample(t, w, p, k, "3", "", time.Time{})); err != nil {
		t.Fatal(err)
	}
}

// TestRefusalsCountedAndLogged: a refused write is counted by operation,
// kind and reason and logged without the bundle; a stored one is not
// counted. Before, refusals were neither counted nor logged.
func TestRefusalsCountedAndLogged(t *testing.T) {
	cli, _ := etcdtest.Etcd(t)
	p := testpki.New(t)
	reg := prometheus.NewRegistry()
	var log safebuf.Buffer
	w, err := writer.New(writer.Options{Store: store.New(cli, store.Options{}), Root: p.Root.Public(), Registerer: reg, Logger: slog.New(slog.NewJSONHandler(&log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, _, err := w.Apply(ctx, p.TrustPolicy); err != nil {
		t.Fatal(err)
	}
	v2 := testpki.Sign(t, testpki.Policy("org/p", "2", nil), p.Org)
	if _, _, err := w.Apply(ctx, v2); err != nil {
		t.Fatal(err)
	}
	v1 := testpki.Sign(t, testpki.Policy("org/p", "1", nil), p.Org)
	for range 2 {
		if _, _, err := w.Apply(ctx, v1); !errors.Is(err, artifact.ErrRollback) {
			t.Fatal(err)
		}
	}
	if _, _, err := w.Apply(ctx, testpki.Sign(t, testpki.Policy("org/p", "3", nil), p.Revoked)); sign.ReasonOf(err) != sign.ReasonKeyRevoked {
		t.Fatal(err)
	}
	if _, err := w.Delete(ctx, testpki.Tombstone(t, v1, "", p.Org)); !errors.Is(err, writer.ErrTombstone) {
		t.Fatal(err)
	}
	if err := w.ApplyEvidence(ctx, v2); !errors.Is(err, writer.ErrWrongKind) {
		t.Fatal(err)
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP mcpready_controlplane_writes_refused_total Writes (apply, delete) the write path refused, by operation, kind and reason (e.g. rollback, expired, key-revoked, tombstone).
# TYPE mcpready_controlplane_writes_refused_total counter
mcpready_controlplane_writes_refused_total{kind="Policy",op="apply",reason="key-revoked"} 1
mcpready_controlplane_writes_refused_total{kind="Policy",op="apply",reason="rollback"} 2
mcpready_controlplane_writes_refused_total{kind="Policy",op="apply",reason="wrong-kind"} 1
mcpready_controlplane_writes_refused_total{kind="Tombstone",op="delete",reason="tombstone"} 1
`)); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(log.String(), `"msg":"write refused"`); n != 5 {
		t.Fatalf("%d refusals logged, want 5:\n%s", n, log.String())
	}
	if strings.Contains(log.String(), string(v1)) || strings.Contains(log.String(), "PRIVATE KEY") {
		t.Fatal("a refusal logged the bundle or key material")
	}
}
