package main

import (
	"bytes"
	"crypto/tls"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcpready/mcpready/artifact"
	"github.com/mcpready/mcpready/controlplane"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/internal/cprun"
	"github.com/mcpready/mcpready/internal/testpki"
	"github.com/mcpready/mcpready/sign"
)

// startTestControlPlane runs an in-process control plane on a free port
// with o's TLS files and returns its address.
func startTestControlPlane(t *testing.T, p *testpki.PKI, o controlplane.Options) string {
	t.Helper()
	o.Listen, o.MetricsListen, o.DataDir, o.Root, o.ObserverKey = "127.0.0.1:0", "off", t.TempDir(), p.Root.Public(), p.Observer
	o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	return cprun.Start(t, o).Addr()
}

// testServerTLS builds the control plane's TLS configuration from f's
// files as the controlplane command does.
func testServerTLS(t *testing.T, f testpki.TLSFiles) *tls.Config {
	t.Helper()
	cfg, err := serverTLS(f.ServerCert, f.ServerKey, f.CA)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func writeFile(t *testing.T, dir, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestAdminCommands(t *testing.T) {
	p := testpki.New(t)
	addr := startTestControlPlane(t, p, controlplane.Options{})
	dir := t.TempDir()
	tp := writeFile(t, dir, "trust.json", p.TrustPolicy)
	pol := writeFile(t, dir, "pol.json", testpki.Sign(t, testpki.Policy("org/p", "1", nil), p.Org))
	bad := writeFile(t, dir, "bad.json", testpki.Sign(t, testpki.Policy("org/q", "1", nil), p.Expired))
	entry := &mcpreadyv1.RegistryEntry{Identity: &mcpreadyv1.ToolIdentity{ServerName: "s", ServerVersion: "1", ToolName: "t"}, State: mcpreadyv1.LifecycleState_LIFECYCLE_STATE_QUALIFIED}
	ent := writeFile(t, dir, "entry.json", testpki.Sign(t, artifact.New(artifact.KindRegistryEntry, "s/t@1", entry), p.Org))

	code, out, errOut := runKeyCLI(t, "apply", "--server", addr, "-f", tp, "-f", pol, ent)
	if code != exitOK || !strings.Contains(out, "TrustPolicy/test/trust revision 1 stored") || !strings.Contains(out, "Policy/org/p revision 1 stored") {
		t.Fatalf("apply: %d %q %q", code, out, errOut)
	}
	code, out, _ = runKeyCLI(t, "apply", "--server", addr, "-f", pol)
	if code != exitOK || !strings.Contains(out, "unchanged") {
		t.Fatalf("re-apply: %d %q", code, out)
	}
	code, out, errOut = runKeyCLI(t, "apply", "--server", addr, "-f", bad, "-f", pol)
	if code != exitVerify || !strings.Contains(errOut, "key-expired") || !strings.Contains(out, "unchanged") {
		t.Fatalf("rejected apply: %d %q %q", code, out, errOut)
	}
	code, out, _ = runKeyCLI(t, "get", "policies", "--server", addr)
	if code != exitOK || !strings.Contains(out, "KIND") || !strings.Contains(out, "org/p") || strings.Contains(out, "org/q") {
		t.Fatalf("get table: %d %q", code, out)
	}
	code, out, _ = runKeyCLI(t, "get", "Policy", "org/p", "-o", "yaml", "--server", addr)
	if code != exitOK || !strings.Contains(out, "kind: Policy") || !strings.Contains(out, "version: \"1\"") {
		t.Fatalf("get yaml: %d %q", code, out)
	}
	code, out, _ = runKeyCLI(t, "history", "Policy", "org/p", "-o", "json", "--server", addr)
	if code != exitOK || !strings.Contains(out, `"revision": 1`) {
		t.Fatalf("history: %d %q", code, out)
	}
	if code, _, _ = runKeyCLI(t, "get", "Policy", "-o", "xml", "--server", addr); code != exitUsage {
		t.Fatalf("bad -o: %d", code)
	}
	// --bundles writes the stored bytes, exactly as applied: they verify offline.
	out1 := filepath.Join(dir, "bundles")
	code, _, errOut = runKeyCLI(t, "get", "Policy", "--bundles", out1, "--server", addr)
	stored := filepath.Join(out1, "Policy_org%2Fp.bundle.json")
	if code != exitOK || !strings.Contains(errOut, "wrote 1 bundle(s)") || !bytes.Equal(mustRead(t, stored), mustRead(t, pol)) {
		t.Fatalf("get --bundles: %d %q", code, errOut)
	}
	rootPub, err := sign.MarshalPublicKey(p.Root.Public())
	if err != nil {
		t.Fatal(err)
	}
	if code, _, errOut = runKeyCLI(t, "verify", "-f", stored, "--root", writeFile(t, dir, "root.pub", rootPub), "--trust", tp); code != exitOK {
		t.Fatalf("verify stored bundle: %d %s", code, errOut)
	}
	if code, _, _ = runKeyCLI(t, "history", "Policy", "org/p", "--bundles", out1, "--server", addr); code != exitOK {
		t.Fatalf("history --bundles: %d", code)
	}
	if !bytes.Equal(mustRead(t, filepath.Join(out1, "Policy_org%2Fp.r1.bundle.json")), mustRead(t, pol)) {
		t.Fatal("history --bundles: revision 1 differs from the applied bundle")
	}

	// delete with a key file
	t.Setenv("MCPREADY_PASSWORD", "pw")
	pem, err := sign.MarshalPrivateKey(p.Org, []byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	key := writeFile(t, dir, "org.key", pem)
	code, out, errOut = runKeyCLI(t, "delete", "Policy", "org/p", "--key", key, "--reason", "gone", "--server", addr)
	if code != exitOK || !strings.Contains(out, "deleted at revision 2") {
		t.Fatalf("delete: %d %q %q", code, out, errOut)
	}
	if code, _, _ = runKeyCLI(t, "get", "Policy", "org/p", "--server", addr); code == exitOK {
		t.Fatal("deleted policy still shown")
	}

	code, out, _ = runKeyCLI(t, "registry", "status", "--server", addr)
	if code != exitOK || !strings.Contains(out, "s/t@1") || !strings.Contains(out, "QUALIFIED") {
		t.Fatalf("registry status: %d %q", code, out)
	}
	code, out, _ = runKeyCLI(t, "registry", "status", "s/t@1", "-o", "json", "--server", addr)
	if code != exitOK || !strings.Contains(out, "LIFECYCLE_STATE_QUALIFIED") {
		t.Fatalf("registry status json: %d %q", code, out)
	}
	// An artifact that sets a field mcpready does not enforce is stored,
	// with a warning naming the field; the exit status stays 0.
	silent := testpki.Versioned(artifact.KindRegistryEntry, "s/silent@1", &mcpreadyv1.RegistryEntry{
		Identity:  &mcpreadyv1.ToolIdentity{ServerName: "s", ServerVersion: "1", ToolName: "silent"},
		Authority: &mcpreadyv1.Authority{TenantBoundary: "per-tenant credential"},
	}, &mcpreadyv1.Provenance{Issuer: "test", Version: "1"})
	silentFile := writeFile(t, dir, "silent.json", testpki.Sign(t, silent, p.Org))
	code, out, errOut = runKeyCLI(t, "apply", "--server", addr, "-f", silentFile)
	if code != exitOK || !strings.Contains(out, "RegistryEntry/s/silent@1 revision 1 stored") ||
		!strings.Contains(errOut, "warning: "+silentFile+": RegistryEntry/s/silent@1 sets spec.authority.tenantBoundary, which is not enforced") {
		t.Fatalf("apply with an unenforced field: %d %q %q", code, out, errOut)
	}
	if code, _, errOut = runKeyCLI(t, "apply", "--server", addr, "-f", pol); strings.Contains(errOut, "not enforced") {
		t.Fatalf("warning for a policy that does not set the field: %d %q", code, errOut)
	}
	// A TrustPolicy whose key may sign Evidence without evidenceIssuer or
	// independence would bind no claim: it is refused, naming the grant.
	loose := &mcpreadyv1.TrustPolicy{Provenance: &mcpreadyv1.Provenance{Issuer: "test", Version: "2"}, Supersedes: testpki.RefOf(t, p.TrustPolicy),
		Keys: []*mcpreadyv1.KeyGrant{testpki.Grant(t, "org", p.Org, []string{"Policy", "Evidence"}, nil)}}
	looseFile := writeFile(t, dir, "loose.json", testpki.Sign(t, artifact.New(artifact.KindTrustPolicy, "test/trust", loose), p.Root))
	code, _, errOut = runKeyCLI(t, "apply", "--server", addr, "-f", looseFile)
	if code == exitOK || !strings.Contains(errOut, "evidence-grant-unbound") || !strings.Contains(errOut, `key "org" may sign Evidence but sets no evidenceIssuer nor independence`) {
		t.Fatalf("apply of an unbound Evidence grant: %d %q", code, errOut)
	}
	if code, _, _ = runKeyCLI(t, "get", "Policy", "--server", "127.0.0.1:1"); code != exitError {
		t.Fatalf("unreachable server: %d", code)
	}
}

func TestClientMutualTLS(t *testing.T) {
	p := testpki.New(t)
	f := testpki.TLS(t, t.TempDir())
	addr := startTestControlPlane(t, p, controlplane.Options{TLS: testServerTLS(t, f), Roles: testpki.Roles()})
	tp := writeFile(t, t.TempDir(), "trust.json", p.TrustPolicy)

	t.Setenv("MCPREADY_CLIENT_CA", f.CA)
	if code, _, _ := runKeyCLI(t, "apply", "--server", addr, "-f", tp); code == exitOK {
		t.Fatal("apply without a client certificate succeeded")
	}
	t.Setenv("MCPREADY_CLIENT_CERT", f.ClientCert)
	t.Setenv("MCPREADY_CLIENT_KEY", f.ClientKey)
	if code, out, errOut := runKeyCLI(t, "apply", "--server", addr, "-f", tp); code != exitOK {
		t.Fatalf("apply over mTLS: %d %q %q", code, out, errOut)
	}

	// The same with flags instead of the environment, on every kind of
	// command that dials the control plane; a wrong server name fails.
	t.Setenv("MCPREADY_CLIENT_CA", "")
	t.Setenv("MCPREADY_CLIENT_CERT", "")
	t.Setenv("MCPREADY_CLIENT_KEY", "")
	tlsFlags := []string{"--server", addr, "--tls-ca", f.CA, "--tls-cert", f.ClientCert, "--tls-key", f.ClientKey}
	for _, args := range [][]string{{"get", "trustpolicies"}, {"registry", "status"}, {"history", "trustpolicy", "test/trust"}} {
		if code, out, errOut := runKeyCLI(t, append(args, tlsFlags...)...); code != exitOK {
			t.Errorf("%v over mTLS with flags: %d %q %q", args, code, out, errOut)
		}
	}
	if code, _, errOut := runKeyCLI(t, append([]string{"get", "trustpolicies", "--tls-server-name", "localhost"}, tlsFlags...)...); code != exitOK {
		t.Errorf("--tls-server-name localhost: %d %q", code, errOut)
	}
	if code, _, _ := runKeyCLI(t, append([]string{"get", "trustpolicies", "--tls-server-name", "other.example"}, tlsFlags...)...); code != exitError {
		t.Errorf("--tls-server-name other.example: exit %d, want %d", code, exitError)
	}
	if code, _, _ := runKeyCLI(t, "get", "trustpolicies", "--server", addr, "--tls-cert", f.ClientCert, "--tls-key", f.ClientKey); code != exitUsage {
		t.Errorf("--tls-cert without --tls-ca: exit %d, want %d", code, exitUsage)
	}
}
