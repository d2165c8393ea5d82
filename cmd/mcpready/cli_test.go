package main

import (
	"encoding/json"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/mcpready/mcpready/artifact"
	"github.com/mcpready/mcpready/sign"
)

// exitCase is one command line and the exit code it must produce.
type exitCase struct {
	args []string
	code int
}

// TestExitCodes checks, for every command, that usage errors exit 2,
// verification failures 3 and other errors 1. Every runnable command must
// have rows here, and every command with flags is also run with an unknown
// flag.
func TestExitCodes(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("MCPREADY_PASSWORD", "pw")
	for _, env := range []string{"MCPREADY_SERVER", "MCPREADY_KEY", "MCPREADY_CLIENT_CA", "MCPREADY_CLIENT_CERT", "MCPREADY_CLIENT_KEY"} {
		t.Setenv(env, "")
	}
	signer := keyPair(t, dir, "signer", sign.AlgorithmEd25519)
	stranger := keyPair(t, dir, "stranger", sign.AlgorithmEd25519)
	bundle := filepath.Join(dir, "decl.bundle.json")
	if code, _, errOut := runKeyCLI(t, "sign", "--key", signer+".key", "--kind", "Declaration", "-f", fixturePath(artifact.KindDeclaration), "--bundle", bundle); code != exitOK {
		t.Fatalf("sign: %d %s", code, errOut)
	}
	garbage := writeFile(t, dir, "garbage.jsonl", []byte("not json\n"))
	missing := filepath.Join(dir, "missing")
	down := []string{"--server", "127.0.0.1:1"} // nothing listens there

	cases := map[string][]exitCase{
		"mcpready": {{[]string{"no-such-command"}, exitUsage}},
		"mcpready agent": {
			{[]string{"agent"}, exitUsage},
			{[]string{"agent", "--root", missing, "--data", dir}, exitUsage},
			{[]string{"agent", "--root", signer + ".pub", "--data", dir, "--tls-cert", "c.pem"}, exitUsage},
			{[]string{"agent", "--root", signer + ".pub", "--data", filepath.Join(dir, "agent"), "--config", missing}, exitError},
			{[]string{"agent", "--root", signer + ".pub", "--data", filepath.Join(dir, "agent"), "--otel-endpoint", "http://127.0.0.1:1", "--otel-protocol", "thrift"}, exitUsage},
			// a negative staleness bound is refused, not taken as no limit (before: it ran unbounded)
			{[]string{"agent", "--root", signer + ".pub", "--data", filepath.Join(dir, "agent"), "--max-staleness", "-1h", "--config", missing}, exitUsage},
			// the receipt digest key must be a readable file of at least 32 bytes
			{[]string{"agent", "--root", signer + ".pub", "--data", filepath.Join(dir, "agent"), "--receipt-digest-key", missing}, exitUsage},
			{[]string{"agent", "--root", signer + ".pub", "--data", filepath.Join(dir, "agent"), "--receipt-digest-key", writeFile(t, dir, "short.key", []byte("too short\n"))}, exitUsage},
			// a limits setting out of range refuses the configuration
			{[]string{"agent", "--root", signer + ".pub", "--data", filepath.Join(dir, "agent"), "--config", writeFile(t, dir, "limits.yaml", []byte("limits: {upstreamSessions: -1}\n"))}, exitError},
		},
		"mcpready apply": {
			{[]string{"apply"}, exitUsage},
			{append([]string{"apply", "-f", missing}, down...), exitError},
			{append([]string{"apply", "-f", bundle}, down...), exitError},
		},
		"mcpready connect": {
			{[]string{"connect", "--agent", "ftp://x"}, exitUsage},
			{[]string{"connect", "extra"}, exitUsage},
		},
		"mcpready controlplane": {
			{[]string{"controlplane"}, exitUsage},
			{[]string{"controlplane", "--root", signer + ".pub", "--data", filepath.Join(dir, "cp"), "--receipts-store", "postgres://u:pw@db.example/r?sslmode=disable"}, exitUsage},
			{[]string{"controlplane", "--root", signer + ".pub", "--data", filepath.Join(dir, "cp"), "--receipts-store", "mysql://db.example/r"}, exitUsage},
			{[]string{"controlplane", "--data", dir, "--root", missing}, exitUsage},
			// the TrustPolicy seed must be readable and a TrustPolicy the root signed
			{[]string{"controlplane", "--root", signer + ".pub", "--data", filepath.Join(dir, "cp"), "--trust-mark", missing}, exitUsage},
			{[]string{"controlplane", "--root", signer + ".pub", "--data", filepath.Join(dir, "cp"), "--trust-mark", bundle}, exitUsage},
		},
		"mcpready delete": {
			{[]string{"delete", "Policy"}, exitUsage},
			{[]string{"delete", "Policy", "p"}, exitUsage},
			{append([]string{"delete", "widgets", "p", "--key", signer + ".key"}, down...), exitUsage},
			{append([]string{"delete", "Policy", "p", "--key", signer + ".key"}, down...), exitError},
		},
		"mcpready demo": {{[]string{"demo", "nope"}, exitUsage}},
		"mcpready demo calls": {
			{[]string{"demo", "calls", "extra"}, exitUsage},
			{append([]string{"demo", "calls", "--agent", "http://127.0.0.1:1/mcp", "--wait", "0s"}, down...), exitError},
		},
		"mcpready enroll": {
			{[]string{"enroll"}, exitUsage},
			{[]string{"enroll", "--url", "http://127.0.0.1:1/mcp", "--name", "a b", "--key", signer + ".key"}, exitUsage},
			{[]string{"enroll", "--url", "http://127.0.0.1:1/mcp", "--name", "acme", "--key", signer + ".key", "--no-apply", "-o", "xml"}, exitUsage},
			{[]string{"enroll", "--url", "http://127.0.0.1:1/mcp", "--name", "acme", "--key", signer + ".key", "--no-apply", "--timeout", "2s"}, exitError},
		},
		"mcpready explain": {
			{[]string{"explain"}, exitUsage},
			{append([]string{"explain", "r1", "-o", "xml"}, down...), exitUsage},
			{append([]string{"explain", "r1"}, down...), exitError},
		},
		"mcpready get": {
			{[]string{"get"}, exitUsage},
			{append([]string{"get", "widgets"}, down...), exitUsage},
			{append([]string{"get", "Policy", "-o", "xml"}, down...), exitUsage},
			{append([]string{"get", "Policy"}, down...), exitError},
		},
		"mcpready history": {
			{[]string{"history", "Policy"}, exitUsage},
			{append([]string{"history", "Policy", "p", "-o", "xml"}, down...), exitUsage},
			{append([]string{"history", "Policy", "p"}, down...), exitError},
		},
		"mcpready keygen": {
			{[]string{"keygen"}, exitUsage},
			{[]string{"keygen", "--out", filepath.Join(dir, "k"), "--algorithm", "rsa"}, exitUsage},
			{[]string{"keygen", "--out", signer}, exitError}, // exists
		},
		"mcpready receipts": {{[]string{"receipts", "nope"}, exitUsage}},
		"mcpready receipts export": {
			{append([]string{"receipts", "export", "--since", "yesterday"}, down...), exitUsage},
			{append([]string{"receipts", "export"}, down...), exitError},
		},
		"mcpready receipts migrate": {
			{[]string{"receipts", "migrate"}, exitUsage},
			{[]string{"receipts", "migrate", "--from", dir, "--to", "postgres://u@db.example/r"}, exitUsage},
			{[]string{"receipts", "migrate", "--from", dir, "--to", "postgres://u@127.0.0.1:1/r?sslmode=disable&connect_timeout=1"}, exitError},
		},
		"mcpready receipts get": {
			{[]string{"receipts", "get"}, exitUsage},
			{append([]string{"receipts", "get", "r1", "-o", "xml"}, down...), exitUsage},
			{append([]string{"receipts", "get", "r1"}, down...), exitError},
		},
		"mcpready receipts tail": {
			{append([]string{"receipts", "tail", "-n", "0"}, down...), exitUsage},
			{append([]string{"receipts", "tail", "-o", "xml"}, down...), exitUsage},
			{append([]string{"receipts", "tail"}, down...), exitError},
		},
		"mcpready receipts verify": {
			{[]string{"receipts", "verify", "--key", signer + ".pub"}, exitUsage},
			{[]string{"receipts", "verify", garbage}, exitUsage},
			{[]string{"receipts", "verify", garbage, "--key", signer + ".pub", "-o", "xml"}, exitUsage},
			{[]string{"receipts", "verify", garbage, "--key", signer + ".pub"}, exitVerify},
			{[]string{"receipts", "verify", "-f", garbage, "--key", signer + ".pub"}, exitVerify},
			{[]string{"receipts", "verify", missing, "--key", signer + ".pub"}, exitError},
		},
		"mcpready probe": {
			{[]string{"probe"}, exitUsage},
			{[]string{"probe", "--url", "ftp://x/"}, exitUsage},
			{[]string{"probe", "--url", "http://127.0.0.1:1/mcp", "-o", "xml"}, exitUsage},
			{[]string{"probe", "--url", "http://127.0.0.1:1/mcp", "--token-file", missing}, exitUsage},
			{[]string{"probe", "--url", "http://127.0.0.1:1/mcp", "--timeout", "2s"}, exitError},
		},
		"mcpready probe analyze": {
			{[]string{"probe", "analyze"}, exitUsage},
			{[]string{"probe", "analyze", missing}, exitError},
			{[]string{"probe", "analyze", garbage}, exitVerify}, // not the frozen file's digest
		},
		"mcpready prober": {
			{[]string{"prober"}, exitUsage},
			{[]string{"prober", "--sign", missing, "--observer", "o"}, exitUsage},
			{append([]string{"prober", "--sign", signer + ".key", "--observer", "o", "--metrics-listen", "0.0.0.0:0"}, down...), exitUsage},
		},
		"mcpready registry": {{[]string{"registry", "nope"}, exitUsage}},
		"mcpready registry qualify": {
			{append([]string{"registry", "qualify"}, down...), exitUsage},
			{append([]string{"registry", "qualify", "acme/t", "--key", ""}, down...), exitUsage},
			{append([]string{"registry", "qualify", "acme/t", "--key", signer + ".key", "-o", "xml"}, down...), exitUsage},
			{append([]string{"registry", "qualify", "acme/t", "--key", signer + ".key"}, down...), exitError},
		},
		"mcpready registry import": {
			{[]string{"registry", "import"}, exitUsage},
			{[]string{"registry", "import", "--from", "ftp://x"}, exitError},
			{[]string{"registry", "import", "--from", "http://127.0.0.1:1"}, exitError},
		},
		"mcpready registry status": {
			{append([]string{"registry", "status", "a", "b"}, down...), exitUsage},
			{append([]string{"registry", "status", "-o", "xml"}, down...), exitUsage},
			{append([]string{"registry", "status"}, down...), exitError},
		},
		"mcpready sign": {
			{[]string{"sign", "-f", fixturePath(artifact.KindDeclaration)}, exitUsage},
			{[]string{"sign", "--key", signer + ".key", "--kind", "widgets", "-f", fixturePath(artifact.KindDeclaration)}, exitUsage},
			{[]string{"sign", "--key", signer + ".key", "--kind", "Policy", "-f", fixturePath(artifact.KindDeclaration)}, exitError},
		},
		"mcpready up": {
			{[]string{"up", "--agent-listen", "0.0.0.0:7480"}, exitUsage},
			{[]string{"up", "extra"}, exitUsage},
			{[]string{"up", "--data", filepath.Join(dir, "up"), "--receipts-store", "postgres://u:pw@db.example/r?sslmode=disable"}, exitUsage},
		},
		"mcpready verify": {
			{[]string{"verify", "-f", bundle}, exitUsage},
			{[]string{"verify", "-f", bundle, "--key", signer + ".pub", "-o", "xml"}, exitUsage},
			{[]string{"verify", "-f", bundle, "--key", stranger + ".pub"}, exitVerify},
			{[]string{"verify", "-f", missing, "--key", signer + ".pub"}, exitError},
		},
		"mcpready version": {
			{[]string{"version", "extra"}, exitUsage},
			{[]string{"version", "-o", "xml"}, exitUsage},
		},
	}

	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Name() == "help" || c.Name() == "completion" {
			return
		}
		path := c.CommandPath()
		rows, ok := cases[path]
		if !ok {
			t.Errorf("%s: no exit-code cases", path)
		}
		if c.HasParent() {
			rows = append(rows, exitCase{append(strings.Fields(strings.TrimPrefix(path, "mcpready ")), "--no-such-flag"), exitUsage})
		}
		for _, r := range rows {
			code, _, errOut := runKeyCLI(t, r.args...)
			if code != r.code {
				t.Errorf("mcpready %s: exit %d, want %d (stderr %q)", strings.Join(r.args, " "), code, r.code, errOut)
			}
			if code != exitOK && errOut == "" {
				t.Errorf("mcpready %s: exit %d without a message on standard error", strings.Join(r.args, " "), code)
			}
		}
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(newRootCmd())
}

func TestVersion(t *testing.T) {
	code, out, errOut := runKeyCLI(t, "version")
	if code != exitOK || !strings.Contains(out, "Version:") || !strings.Contains(out, runtime.Version()) {
		t.Fatalf("version: %d %q %q", code, out, errOut)
	}
	code, out, errOut = runKeyCLI(t, "version", "-o", "json")
	var v versionInfo
	if err := json.Unmarshal([]byte(out), &v); code != exitOK || err != nil || v.GoVersion == "" || v.Platform != runtime.GOOS+"/"+runtime.GOARCH || v.Version == "" {
		t.Fatalf("version -o json: %d %q %q %v", code, out, errOut, err)
	}
}

// TestNoFlagStateBetweenRuns: a flag set in one run does not leak into the
// next (every run builds a new command tree).
func TestNoFlagStateBetweenRuns(t *testing.T) {
	if code, out, _ := runKeyCLI(t, "version", "-o", "json"); code != exitOK || !strings.HasPrefix(out, "{") {
		t.Fatalf("version -o json: %d %q", code, out)
	}
	if code, out, _ := runKeyCLI(t, "version"); code != exitOK || strings.HasPrefix(out, "{") {
		t.Fatalf("second run kept -o json: %d %q", code, out)
	}
}
