package subscribe

import (
	"testing"

	"github.com/mcpready/mcpready/agent/internal/cptest"
	"github.com/mcpready/mcpready/artifact"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/internal/testpki"
	"github.com/mcpready/mcpready/sign"
)

// TestAgentRefusesUngrantedClaims: an Evidence whose issuer or
// independence is not what its key's grant names, served by a control
// plane that skipped its own check, is NACKed (claim-not-granted) and not
// installed; the granted claims are.
func TestAgentRefusesUngrantedClaims(t *testing.T) {
	env := cptest.Start(t)
	c, _ := New(Options{Root: env.RootPub, Node: &mcpreadyv1.Node{Id: "n"}})
	prober, _ := sign.GenerateKey(sign.AlgorithmEd25519)
	g := testpki.Grant(t, "prober", prober, []string{"Evidence"}, nil)
	g.EvidenceIssuer, g.Independence = "example.org/prober", "consumer"
	tp := env.Sign(artifact.New(artifact.KindTrustPolicy, "default", &mcpreadyv1.TrustPolicy{Provenance: &mcpreadyv1.Provenance{Version: "1"}, Keys: []*mcpreadyv1.KeyGrant{g}}))
	if err := offer(c, artifact.KindTrustPolicy, "default", tp); err != nil {
		t.Fatal(err)
	}
	ev := func(issuer, independence string) []byte {
		return testpki.Sign(t, artifact.New(artifact.KindEvidence, "e/1", &mcpreadyv1.Evidence{
			Provenance: &mcpreadyv1.Provenance{Issuer: issuer, Version: "1"}, Observer: &mcpreadyv1.Observer{Independence: independence}}), prober)
	}
	if err := offer(c, artifact.KindEvidence, "e/1", ev("example.org/prober", "third-party")); sign.ReasonOf(err) != sign.ReasonClaimNotGranted {
		t.Fatalf("a higher independence: %v", err)
	}
	if err := offer(c, artifact.KindEvidence, "e/1", ev("example.org/lab", "consumer")); sign.ReasonOf(err) != sign.ReasonClaimNotGranted {
		t.Fatalf("another issuer: %v", err)
	}
	if c.Snapshot().Get(artifact.KindEvidence, "e/1") != nil {
		t.Fatal("installed")
	}
	if err := offer(c, artifact.KindEvidence, "e/1", ev("example.org/prober", "consumer")); err != nil {
		t.Fatal(err)
	}
}
