package sign

import (
	"errors"
	"testing"

	"github.com/mcpready/mcpready/artifact"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
)

// chained signs a TrustPolicy named name at version superseding sup.
func chained(t *testing.T, name, version string, sup *TrustRef) *artifact.Object {
	t.Helper()
	tp := &mcpreadyv1.TrustPolicy{Provenance: &mcpreadyv1.Provenance{Issuer: "example.org", Version: version}}
	if sup != nil {
		tp.Supersedes = &mcpreadyv1.TrustPolicyRef{Name: sup.Name, Version: sup.Version, Digest: sup.Digest}
	}
	return artifact.New(artifact.KindTrustPolicy, name, tp)
}

func refFor(b []byte, name, version string) TrustRef {
	return TrustRef{Name: name, Version: version, Digest: artifact.Digest(b)}
}

// TestPickTrust: the highest signed version wins whatever the names and
// the order; bundles another key signed are ignored; a fork picks nothing.
func TestPickTrust(t *testing.T) {
	root, other := newKey(t, AlgorithmEd25519), newKey(t, AlgorithmEd25519)
	v1 := mustSign(t, chained(t, "a", "1", nil), root)
	r1 := refFor(v1, "a", "1")
	v2 := mustSign(t, chained(t, "b", "2", &r1), root)
	forged := mustSign(t, chained(t, "c", "9", nil), other)
	for _, order := range [][][]byte{{v1, v2, forged}, {forged, v2, v1}} {
		tr, ref, err := PickTrust(order, root.Public(), now)
		if err != nil || ref.Name != "b" || tr.Ref() != ref {
			t.Fatalf("picked %v, %v", ref, err)
		}
	}
	fork := mustSign(t, chained(t, "d", "2", &r1), root)
	if _, _, err := PickTrust([][]byte{v1, v2, fork}, root.Public(), now); !errors.Is(err, ErrTrustChain) {
		t.Fatalf("fork: %v", err)
	}
	if _, _, err := PickTrust([][]byte{forged}, root.Public(), now); ReasonOf(err) != ReasonUnknownKey {
		t.Fatalf("only forged: %v", err)
	}
	if _, _, err := PickTrust(nil, root.Public(), now); ReasonOf(err) != ReasonMalformed {
		t.Fatalf("none: %v", err)
	}
}

// TestCheckSuccessor: newer, naming the held version exactly (control
// plane) or at least not contradicting it (agent).
func TestCheckSuccessor(t *testing.T) {
	root := newKey(t, AlgorithmEd25519)
	v1 := mustSign(t, chained(t, "a", "1", nil), root)
	r1 := refFor(v1, "a", "1")
	v2 := mustSign(t, chained(t, "a", "2", &r1), root)
	r2 := refFor(v2, "a", "2")
	v3 := mustSign(t, chained(t, "b", "3", &r2), root)
	trust := func(b []byte) *Trust {
		tr, err := NewTrust(b, root.Public(), now)
		if err != nil {
			t.Fatal(err)
		}
		return tr
	}
	wrong := r1
	wrong.Digest = "sha256:00"
	for _, c := range []struct {
		label   string
		held    TrustRef
		has     bool
		next    []byte
		exact   bool
		wantErr error
	}{
		{"first", TrustRef{}, false, v1, true, nil},
		{"successor", r1, true, v2, true, nil},
		{"the held bundle again", r2, true, v2, true, nil},
		{"older", r2, true, v1, false, artifact.ErrRollback},
		{"skipping, agent", r1, true, v3, false, nil},
		{"skipping, control plane", r1, true, v3, true, ErrTrustChain},
		{"no supersedes", r1, true, mustSign(t, chained(t, "a", "2", nil), root), false, ErrTrustChain},
		{"fork at the held version", r1, true, mustSign(t, chained(t, "a", "2", &wrong), root), false, ErrTrustChain},
		{"supersedes a newer one", TrustRef{}, false, mustSign(t, chained(t, "a", "2", &r2), root), false, ErrTrustChain},
	} {
		err := CheckSuccessor(c.held, c.has, trust(c.next), c.exact)
		if (c.wantErr == nil) != (err == nil) || (c.wantErr != nil && !errors.Is(err, c.wantErr)) {
			t.Errorf("%s: err = %v, want %v", c.label, err, c.wantErr)
		}
	}
}
