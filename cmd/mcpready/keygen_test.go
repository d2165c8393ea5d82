package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcpready/mcpready/sign"
)

// runKeyCLI runs the CLI in-process and returns its exit code, standard
// output and standard error.
func runKeyCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(args, strings.NewReader(""), &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestKeygen(t *testing.T) {
	dir := t.TempDir()
	prefix := filepath.Join(dir, "keys", "provider")
	t.Setenv("MCPREADY_PASSWORD", "pw")
	t.Setenv("COSIGN_PASSWORD", "ignored")

	code, out, errOut := runKeyCLI(t, "keygen", "--out", prefix, "--algorithm", "ed25519")
	if code != exitOK {
		t.Fatalf("keygen: exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, "key id:") {
		t.Errorf("keygen output: %q", out)
	}
	st, err := os.Stat(prefix + ".key")
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("private key: %v %v", st, err)
	}
	if _, err := sign.ReadPrivateKeyFile(prefix+".key", []byte("pw")); err != nil {
		t.Fatalf("password from MCPREADY_PASSWORD: %v", err)
	}
	before, _ := os.ReadFile(prefix + ".pub")

	code, _, errOut = runKeyCLI(t, "keygen", "--out", prefix)
	if code != exitError || !strings.Contains(errOut, "--force") {
		t.Fatalf("overwrite: exit %d: %s", code, errOut)
	}
	if after, _ := os.ReadFile(prefix + ".pub"); !bytes.Equal(before, after) {
		t.Fatal("refused keygen changed the public key")
	}
	// --force replaces; flags of the previous run do not leak (algorithm is
	// back to the default).
	if code, _, errOut = runKeyCLI(t, "keygen", "--out", prefix, "--force"); code != exitOK {
		t.Fatalf("--force: exit %d: %s", code, errOut)
	}
	if pemData, _ := os.ReadFile(prefix + ".pub"); bytes.Equal(pemData, before) {
		t.Fatal("--force did not replace the key pair")
	}

	// COSIGN_PASSWORD is used when MCPREADY_PASSWORD is unset; empty is a password.
	os.Unsetenv("MCPREADY_PASSWORD")
	t.Setenv("COSIGN_PASSWORD", "")
	if code, _, errOut = runKeyCLI(t, "keygen", "--out", filepath.Join(dir, "empty")); code != exitOK {
		t.Fatalf("empty password: exit %d: %s", code, errOut)
	}
	if _, err := sign.ReadPrivateKeyFile(filepath.Join(dir, "empty.key"), nil); err != nil {
		t.Fatalf("empty password: %v", err)
	}

	usage := [][]string{
		{"keygen"},
		{"keygen", "--out", filepath.Join(dir, "x"), "--algorithm", "rsa"},
		{"keygen", "--out", filepath.Join(dir, "x"), "extra-arg"},
		{"keygen", "--no-such-flag"},
	}
	for _, args := range usage {
		if code, _, errOut := runKeyCLI(t, args...); code != exitUsage || errOut == "" {
			t.Errorf("%v: exit %d (%q), want %d", args, code, errOut, exitUsage)
		}
	}
}
