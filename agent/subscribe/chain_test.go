package subscribe

import (
	"crypto"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/mcpready/mcpready/agent/internal/cptest"
	"github.com/mcpready/mcpready/artifact"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/internal/testpki"
	"github.com/mcpready/mcpready/sign"
)

// trustRes is a TrustPolicy resource with the (unsigned) store revision rv.
func trustRes(name, rv string, b []byte) *mcpreadyv1.Resource {
	return &mcpreadyv1.Resource{Name: name, TypeUrl: artifact.KindTrustPolicy.TypeURL(), Version: rv, Bundle: b}
}

// TestAgentTrustRotationNewName is the attack of a rotation under a new
// name: the old name's policy has the higher store revision (each name
// counts its own), which the old rule trusted. The agent must follow the
// signed chain, refuse the revoked key, refuse an offer that withholds or
// removes the new TrustPolicy (directly, by delta removal, and through a
// rewritten last known good file across a restart), and refuse successors
// that do not name what they supersede.
func TestAgentTrustRotationNewName(t *testing.T) {
	env := cptest.Start(t)
	lkg := filepath.Join(t.TempDir(), "lkg.json")
	opts := Options{Root: env.RootPub, Node: &mcpreadyv1.Node{Id: "n"}, LKGPath: lkg}
	c, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	k1, _ := sign.GenerateKey(sign.AlgorithmEd25519)
	k2, _ := sign.GenerateKey(sign.AlgorithmEd25519)
	policyBy := func(k crypto.Signer, version string) []byte {
		return testpki.Sign(t, testpki.Policy("org/p", version, nil), k)
	}
	v1 := testpki.ChainTrust(t, env.Root, "default", "1", nil, map[string]crypto.Signer{"k1": k1})
	if err := c.Apply(artifact.KindTrustPolicy, []*mcpreadyv1.Resource{trustRes("default", "7", v1)}, nil, true); err != nil {
		t.Fatal(err)
	}
	oldLKG, err := os.ReadFile(lkg)
	if err != nil {
		t.Fatal(err)
	}
	v2 := testpki.ChainTrust(t, env.Root, "org/trust-2", "2", v1, map[string]crypto.Signer{"k1": k1, "k2": k2}, "k1")
	if err := c.Apply(artifact.KindTrustPolicy, []*mcpreadyv1.Resource{trustRes("default", "7", v1), trustRes("org/trust-2", "1", v2)}, nil, true); err != nil {
		t.Fatal(err)
	}
	active := func(c *Client) string {
		if tr := c.Snapshot().Trust; tr != nil {
			return tr.Policy().Object.Metadata.Name + "@" + tr.Policy().Object.Version()
		}
		return "<none>"
	}
	if got := active(c); got != "org/trust-2@2" {
		t.Fatalf("active TrustPolicy %s, want org/trust-2@2", got)
	}
	if err := offer(c, artifact.KindPolicy, "org/p", policyBy(k1, "1")); sign.ReasonOf(err) != sign.ReasonKeyRevoked {
		t.Fatalf("the revoked key on the agent: %v", err)
	}
	if err := offer(c, artifact.KindPolicy, "org/p", policyBy(k2, "1")); err != nil {
		t.Fatalf("k2's policy: %v", err)
	}

	// A compromised control plane withholds the new TrustPolicy.
	if err := c.Apply(artifact.KindTrustPolicy, []*mcpreadyv1.Resource{trustRes("default", "9", v1)}, nil, true); !errors.Is(err, artifact.ErrRollback) {
		t.Fatalf("withheld: %v, want rollback", err)
	}
	if err := c.Apply(artifact.KindTrustPolicy, []*mcpreadyv1.Resource{trustRes("default", "9", v1)}, []string{"org/trust-2"}, false); !errors.Is(err, artifact.ErrRollback) {
		t.Fatalf("removed by delta: %v, want rollback", err)
	}
	if err := c.Apply(artifact.KindTrustPolicy, nil, []string{"org/trust-2"}, false); err == nil {
		t.Fatal("a bare removal of the active TrustPolicy was honoured")
	}
	if got := active(c); got != "org/trust-2@2" || c.Snapshot().Get(artifact.KindPolicy, "org/p") == nil {
		t.Fatalf("after the attacks: active %s, policy held %v", got, c.Snapshot().Get(artifact.KindPolicy, "org/p") != nil)
	}

	// Successors that do not name the held version.
	for label, b := range map[string][]byte{
		"no supersedes":     testpki.ChainTrust(t, env.Root, "default", "3", nil, map[string]crypto.Signer{"k1": k1}),
		"supersedes a fork": testpki.ChainTrust(t, env.Root, "default", "3", testpki.ChainTrust(t, env.Root, "org/trust-2", "2", v1, map[string]crypto.Signer{"k1": k1}), map[string]crypto.Signer{"k1": k1}),
		"supersedes itself": testpki.ChainTrust(t, env.Root, "default", "3", testpki.ChainTrust(t, env.Root, "x", "3", nil, nil), map[string]crypto.Signer{"k1": k1}),
	} {
		if err := c.Apply(artifact.KindTrustPolicy, []*mcpreadyv1.Resource{trustRes("default", "10", b)}, nil, false); !errors.Is(err, sign.ErrTrustChain) {
			t.Errorf("%s: %v, want %v", label, err, sign.ErrTrustChain)
		}
	}

	// Restart from a last known good file rewritten to hold only v1.
	if err := os.WriteFile(lkg, oldLKG, 0o600); err != nil {
		t.Fatal(err)
	}
	c2, _ := New(opts)
	if _, err := c2.Load(); err != nil {
		t.Fatal(err)
	}
	if got := active(c2); got == "default@1" {
		t.Fatal("a rewritten last known good file brought back the superseded TrustPolicy")
	}
	if err := offer(c2, artifact.KindPolicy, "org/p", policyBy(k1, "2")); err == nil {
		t.Fatal("the revoked key signs after a restart")
	}

	// Skipping a version is fine for an agent: v4 names v3, which c never saw.
	v3 := testpki.ChainTrust(t, env.Root, "org/trust-2", "3", v2, map[string]crypto.Signer{"k2": k2})
	v4 := testpki.ChainTrust(t, env.Root, "org/trust-2", "4", v3, map[string]crypto.Signer{"k2": k2})
	if err := c.Apply(artifact.KindTrustPolicy, []*mcpreadyv1.Resource{trustRes("org/trust-2", "3", v4)}, nil, false); err != nil || active(c) != "org/trust-2@4" {
		t.Fatalf("v4 after v2: %v, active %s", err, active(c))
	}
}
