package writer_test

import (
	"context"
	"crypto"
	"testing"

	"github.com/mcpready/mcpready/artifact"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/internal/testpki"
	"github.com/mcpready/mcpready/sign"
)

// TestEvidenceClaimsBoundToKey is the attack of a key granted Evidence
// that claims to be another issuer, or a more independent observer, than
// the TrustPolicy grants it (so that acceptedIssuers and
// requiredIndependence would admit it): refused, nothing stored; the
// claims its grant names are accepted.
func TestEvidenceClaimsBoundToKey(t *testing.T) {
	w, st, p := newWriter(t)
	ctx := context.Background()
	prober, _ := sign.GenerateKey(sign.AlgorithmEd25519)
	g := testpki.Grant(t, "prober-eu", prober, []string{"Evidence"}, nil)
	g.EvidenceIssuer, g.Independence = "example.org/prober-eu", "consumer"
	tp := &mcpreadyv1.TrustPolicy{Provenance: &mcpreadyv1.Provenance{Issuer: "test", Version: "2"}, Supersedes: testpki.RefOf(t, p.TrustPolicy), Keys: []*mcpreadyv1.KeyGrant{g}}
	if _, _, err := w.Apply(ctx, testpki.Sign(t, artifact.New(artifact.KindTrustPolicy, "test/trust", tp), p.Root)); err != nil {
		t.Fatal(err)
	}
	evidence := func(name, issuer, independence string, k crypto.Signer) []byte {
		return testpki.Sign(t, artifact.New(artifact.KindEvidence, name, &mcpreadyv1.Evidence{
			Provenance: &mcpreadyv1.Provenance{Issuer: issuer, Version: "1"}, Observer: &mcpreadyv1.Observer{Id: "p", Independence: independence}}), k)
	}
	for label, b := range map[string][]byte{
		"another issuer":         evidence("e/1", "example.org/lab", "consumer", prober),
		"a higher independence":  evidence("e/2", "example.org/prober-eu", "third-party", prober),
		"no independence stated": evidence("e/3", "example.org/prober-eu", "", prober),
	} {
		if _, _, err := w.Apply(ctx, b); sign.ReasonOf(err) != sign.ReasonClaimNotGranted {
			t.Errorf("%s: %v, want %s", label, err, sign.ReasonClaimNotGranted)
		}
	}
	if recs, _, _ := st.List(ctx, artifact.KindEvidence); len(recs) != 0 {
		t.Fatalf("%d refused evidence stored", len(recs))
	}
	if _, _, err := w.Apply(ctx, evidence("e/4", "example.org/prober-eu", "consumer", prober)); err != nil {
		t.Fatalf("the granted claims: %v", err)
	}
}
