package agent

import (
	"context"
	"crypto"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/mcpready/mcpready/agent/internal/cptest"
	"github.com/mcpready/mcpready/agent/internal/mcptest"
	"github.com/mcpready/mcpready/artifact"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/internal/testpki"
	"github.com/mcpready/mcpready/sign"
)

// TestMaxStaleness: an agent with a maximum staleness refuses every call
// with configuration_stale while its TrustPolicy or Policy was signed
// longer ago (or without issuedAt: publish signs none), and calls again
// once freshly signed versions arrive.
func TestMaxStaleness(t *testing.T) {
	env := cptest.Start(t)
	up := mcptest.New(t, mcptest.Options{})
	publish(t, env, up)
	dir := t.TempDir()
	a, stop := start(t, Options{ControlPlane: env.Addr, Root: env.RootPub, NodeID: "host-s", Listen: "127.0.0.1:0",
		DataDir: filepath.Join(dir, "data"), Config: writeConfig(t, dir), MaxStaleness: time.Hour})
	defer stop()
	waitConfigured(t, a)
	res := callEcho(t, a.Addr())
	if !res.IsError || !strings.Contains(textOf(res), "configuration_stale") {
		t.Fatalf("a call under a configuration without issuedAt: %v", textOf(res))
	}

	// Freshly signed TrustPolicy (the chain's successor) and Policy.
	cur, err := env.Store.Get(context.Background(), artifact.KindTrustPolicy, "default")
	if err != nil {
		t.Fatal(err)
	}
	o, _ := sign.Peek(cur.Bundle)
	now := timestamppb.Now()
	env.Put(artifact.New(artifact.KindTrustPolicy, "default", &mcpreadyv1.TrustPolicy{
		Provenance: &mcpreadyv1.Provenance{Version: artifact.NextVersion(o.Version()), IssuedAt: now},
		Supersedes: &mcpreadyv1.TrustPolicyRef{Name: "default", Version: o.Version(), Digest: cur.Digest}}))
	env.Put(artifact.New(artifact.KindPolicy, "default", &mcpreadyv1.Policy{
		Provenance: &mcpreadyv1.Provenance{Version: "999999", IssuedAt: now},
		Inventory:  []string{"test/*"},
		Evidence:   &mcpreadyv1.EvidenceRules{OnUnknown: mcpreadyv1.UnknownEvidenceAction_UNKNOWN_EVIDENCE_ACTION_ALLOW},
		Principals: []*mcpreadyv1.PrincipalRule{{PrincipalClass: "default", Allow: []string{"*"}}},
	}))
	deadline := time.Now().Add(15 * time.Second)
	for {
		if res := callEcho(t, a.Addr()); !res.IsError {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("still refused after fresh versions: %v", textOf(callEcho(t, a.Addr())))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func textOf(r *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// grantAgentKey stores the successor of env's TrustPolicy granting a new
// agent key DriftReport and ReceiptBatch for node, and returns the key.
func grantAgentKey(t *testing.T, env *cptest.Env, node string) crypto.Signer {
	t.Helper()
	key, err := sign.GenerateKey(sign.AlgorithmEd25519)
	if err != nil {
		t.Fatal(err)
	}
	cur, err := env.Store.Get(context.Background(), artifact.KindTrustPolicy, "default")
	if err != nil {
		t.Fatal(err)
	}
	o, _ := sign.Peek(cur.Bundle)
	env.Put(artifact.New(artifact.KindTrustPolicy, "default", &mcpreadyv1.TrustPolicy{
		Provenance: &mcpreadyv1.Provenance{Version: artifact.NextVersion(o.Version())},
		Supersedes: &mcpreadyv1.TrustPolicyRef{Name: "default", Version: o.Version(), Digest: cur.Digest},
		Keys:       []*mcpreadyv1.KeyGrant{testpki.Grant(t, node, key, []string{"DriftReport", "ReceiptBatch"}, []string{node + "/*"})}}))
	return key
}
