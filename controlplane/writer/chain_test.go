package writer_test

import (
	"context"
	"crypto"
	"errors"
	"testing"

	"github.com/mcpready/mcpready/artifact"
	"github.com/mcpready/mcpready/controlplane/writer"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/internal/testpki"
	"github.com/mcpready/mcpready/sign"
)

// TestTrustRotation rotates the root-granted keys, revokes one and rotates
// to a new name; then it replays: an older root-signed TrustPolicy under
// another name (which the old rule, "latest stored wins", made active and
// so trusted the revoked key again), one that names no superseded version
// and one that names a superseded one other than the active. Each is
// refused and the revoked key signs nothing.
func TestTrustRotation(t *testing.T) {
	w, _, p := newWriter(t)
	ctx := context.Background()
	k1, _ := sign.GenerateKey(sign.AlgorithmEd25519)
	k2, _ := sign.GenerateKey(sign.AlgorithmEd25519)
	k3, _ := sign.GenerateKey(sign.AlgorithmEd25519)
	policyBy := func(k crypto.Signer, version string) []byte {
		return testpki.Sign(t, testpki.Policy("org/p", version, nil), k)
	}
	mustApply := func(label string, b []byte) {
		t.Helper()
		if _, _, err := w.Apply(ctx, b); err != nil {
			t.Fatalf("%s: %v", label, err)
		}
	}
	refused := func(label string, b []byte, want error) {
		t.Helper()
		if _, _, err := w.Apply(ctx, b); !errors.Is(err, want) {
			t.Fatalf("%s: err = %v, want %v", label, err, want)
		}
	}
	v1 := p.TrustPolicy
	// rotate the root-granted keys: k1 replaces the org key
	v2 := testpki.ChainTrust(t, p.Root, "test/trust", "2", v1, map[string]crypto.Signer{"k1": k1})
	staged := testpki.ChainTrust(t, p.Root, "test/staging", "2", v1, map[string]crypto.Signer{"k1": k1, "k2": k2})
	mustApply("v2", v2)
	mustApply("k1's policy", policyBy(k1, "1"))
	if _, _, err := w.Apply(ctx, policyBy(p.Org, "2")); sign.ReasonOf(err) != sign.ReasonUnknownKey {
		t.Fatalf("the rotated-out org key still signs: %v", err)
	}
	// revoke k1, grant k2
	v3 := testpki.ChainTrust(t, p.Root, "test/trust", "3", v2, map[string]crypto.Signer{"k1": k1, "k2": k2}, "k1")
	mustApply("v3", v3)
	if _, _, err := w.Apply(ctx, policyBy(k1, "3")); sign.ReasonOf(err) != sign.ReasonKeyRevoked {
		t.Fatalf("revoked k1 signs: %v", err)
	}
	// rotate to a new name; k2 is revoked there too, k3 granted
	v4 := testpki.ChainTrust(t, p.Root, "test/trust-2027", "4", v3, map[string]crypto.Signer{"k3": k3, "k1": k1, "k2": k2}, "k1", "k2")
	mustApply("v4 under a new name", v4)
	if got := w.Current().Ref(); got.Name != "test/trust-2027" || got.Version != "4" {
		t.Fatalf("active after renaming: %v", got)
	}

	refused("an older TrustPolicy under another name", staged, artifact.ErrRollback)
	refused("the first name's last version", v3, artifact.ErrRollback)
	refused("no superseded version named", testpki.ChainTrust(t, p.Root, "test/trust", "5", nil, map[string]crypto.Signer{"k1": k1}), sign.ErrTrustChain)
	refused("superseding a version other than the active", testpki.ChainTrust(t, p.Root, "test/trust", "5", v3, map[string]crypto.Signer{"k1": k1}), sign.ErrTrustChain)
	for label, k := range map[string]crypto.Signer{"k1": k1, "k2": k2} {
		if _, _, err := w.Apply(ctx, policyBy(k, "9")); sign.ReasonOf(err) != sign.ReasonKeyRevoked {
			t.Fatalf("after the replays, revoked %s signs: %v", label, err)
		}
	}
	mustApply("k3's policy", policyBy(k3, "9"))
	if _, err := w.Delete(ctx, testpki.Sign(t, testpki.Object(artifact.KindTombstone, "test/trust-2027", &mcpreadyv1.Tombstone{TargetKind: "TrustPolicy", TargetName: "test/trust-2027"}, nil), p.Root)); !errors.Is(err, writer.ErrWrongKind) {
		t.Fatalf("deleting the active TrustPolicy: %v, want refused", err)
	}
	mustApply("v5", testpki.ChainTrust(t, p.Root, "test/trust", "5", v4, map[string]crypto.Signer{"k1": k1}))
}
