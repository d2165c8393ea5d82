package agent

import (
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpready/mcpready/agent/internal/cptest"
	"github.com/mcpready/mcpready/artifact"
	"github.com/mcpready/mcpready/internal/testpki"
	"github.com/mcpready/mcpready/sign"
)

// TestNacksOnMetrics: a resource the agent refuses (here one signed by a
// key no TrustPolicy grants, served by a compromised control plane) is
// counted on the agent's own /metrics with its type and reason.
func TestNacksOnMetrics(t *testing.T) {
	env := cptest.Start(t)
	dir := t.TempDir()
	a, stop := start(t, Options{ControlPlane: env.Addr, Root: env.RootPub, NodeID: "host-1", Listen: "127.0.0.1:0", DataDir: filepath.Join(dir, "data")})
	defer stop()
	for deadline := time.Now().Add(10 * time.Second); a.sync.Snapshot().Trust == nil; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no TrustPolicy")
		}
	}
	stranger, err := sign.GenerateKey(sign.AlgorithmEd25519)
	if err != nil {
		t.Fatal(err)
	}
	env.PutBundle(artifact.KindPolicy, "default", testpki.Sign(t, testpki.Policy("default", "1", nil), stranger))
	want := `mcpready_agent_discovery_nacks_total{reason="unknown-key",type_url="type.mcpready.dev/mcpready.v1.Policy"} 1`
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		resp, err := http.Get("http://" + a.Addr() + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.Contains(string(body), want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("/metrics lacks %s", want)
		}
	}
}
