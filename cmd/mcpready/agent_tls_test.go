package main

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/mcpready/mcpready/agent"
	"github.com/mcpready/mcpready/artifact"
	"github.com/mcpready/mcpready/controlplane"
	"github.com/mcpready/mcpready/internal/testpki"
)

// TestAgentMutualTLS runs an agent against a control plane that requires
// client certificates: with the --tls-* material it receives the
// TrustPolicy; without a client certificate it never does.
func TestAgentMutualTLS(t *testing.T) {
	p := testpki.New(t)
	f := testpki.TLS(t, t.TempDir())
	addr := startTestControlPlane(t, p, controlplane.Options{TLS: testServerTLS(t, f), Roles: testpki.Roles()})
	t.Setenv("MCPREADY_CLIENT_CA", f.CA)
	t.Setenv("MCPREADY_CLIENT_CERT", f.ClientCert)
	t.Setenv("MCPREADY_CLIENT_KEY", f.ClientKey)
	tp := writeFile(t, t.TempDir(), "trust.json", p.TrustPolicy)
	if code, out, errOut := runKeyCLI(t, "apply", "--server", addr, "-f", tp); code != exitOK {
		t.Fatalf("apply over mTLS: %d %q %q", code, out, errOut)
	}

	gotTrust := func(certFile, keyFile string, wait time.Duration) bool {
		creds, err := (&tlsOptions{ca: f.CA, cert: certFile, key: keyFile}).credentials()
		if err != nil {
			t.Fatal(err)
		}
		a, err := agent.New(agent.Options{ControlPlane: addr, ControlPlaneCreds: creds, Root: p.Root.Public(), NodeID: "agent",
			Listen: "127.0.0.1:0", DataDir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- a.Run(ctx) }()
		defer func() { cancel(); <-done }()
		for deadline := time.Now().Add(wait); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			if s := a.Sync().Snapshot(); s != nil && len(s.List(artifact.KindTrustPolicy)) > 0 {
				return true
			}
		}
		return false
	}
	if !gotTrust(f.ClientCert, f.ClientKey, 20*time.Second) {
		t.Fatal("agent with a client certificate did not receive the TrustPolicy over mTLS")
	}
	if gotTrust("", "", 2*time.Second) {
		t.Fatal("agent without a client certificate received configuration from an mTLS-only control plane")
	}
}

func TestClientTLSNeedsCA(t *testing.T) {
	if _, err := (&tlsOptions{cert: "client.pem", key: "client.key"}).credentials(); err == nil {
		t.Fatal("a client certificate without a CA was accepted")
	}
	if _, err := (&tlsOptions{ca: "/nonexistent/ca.pem"}).credentials(); err == nil {
		t.Fatal("a missing CA file was accepted")
	}
}
