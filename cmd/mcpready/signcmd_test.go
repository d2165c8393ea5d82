package main

import (
	"crypto"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcpready/mcpready/artifact"
	"github.com/mcpready/mcpready/sign"
)

// testdata is the sign package's fixtures, one per kind.
const testdata = "../../sign/testdata"

func fixturePath(k artifact.Kind) string {
	return filepath.Join(testdata, strings.ToLower(string(k))+".yaml")
}

// keyPair writes a key pair with password "pw" under dir.
func keyPair(t *testing.T, dir, name string, alg sign.Algorithm) string {
	t.Helper()
	prefix := filepath.Join(dir, name)
	if _, err := sign.WriteKeyPair(prefix, alg, []byte("pw")); err != nil {
		t.Fatal(err)
	}
	return prefix
}

func TestSignCommand(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("MCPREADY_PASSWORD", "pw")
	key := keyPair(t, dir, "org", sign.AlgorithmECDSAP256)

	for _, k := range artifact.Kinds() {
		t.Run(string(k), func(t *testing.T) {
			out := filepath.Join(dir, strings.ToLower(string(k))+".bundle.json")
			code, stdout, errOut := runKeyCLI(t, "sign", "--key", key+".key", "--kind", strings.ToLower(string(k)), "-f", fixturePath(k), "--bundle", out, "--payload", strings.TrimSuffix(out, ".bundle.json")+".payload.json")
			if code != exitOK {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			bundle, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			pub, _ := sign.ReadPublicKeyFile(key + ".pub")
			v, err := sign.VerifyWithKey(bundle, pub)
			if err != nil {
				t.Fatal(err)
			}
			payload, err := os.ReadFile(strings.TrimSuffix(out, ".bundle.json") + ".payload.json")
			if err != nil {
				t.Fatal(err)
			}
			if artifact.Digest(payload) != v.Digest || !strings.Contains(stdout, v.Digest) {
				t.Fatalf("payload file digest %s, statement subject %s", artifact.Digest(payload), v.Digest)
			}
		})
	}

	// JSON input, no --bundle: the bundle goes to standard output and
	// nothing is written to disk.
	obj, err := artifact.Parse(mustRead(t, fixturePath(artifact.KindPolicy)))
	if err != nil {
		t.Fatal(err)
	}
	canon, _ := obj.CanonicalJSON()
	jsonDir := t.TempDir()
	jsonIn := filepath.Join(jsonDir, "policy.json")
	if err := os.WriteFile(jsonIn, canon, 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, errOut := runKeyCLI(t, "sign", "--key", key+".key", "--kind", "Policy", "-f", jsonIn)
	if code != exitOK {
		t.Fatalf("json input: exit %d: %s", code, errOut)
	}
	if _, err := sign.VerifyWithKey([]byte(stdout), mustPublicKey(t, key+".pub")); err != nil {
		t.Fatalf("bundle on standard output does not verify: %v\n%s", err, stdout)
	}
	for _, p := range []string{"policy.bundle.json", "policy.payload.json"} {
		if _, err := os.Stat(filepath.Join(jsonDir, p)); err == nil {
			t.Errorf("sign without --bundle wrote %s", p)
		}
	}
}

func TestSignCommandErrors(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("MCPREADY_PASSWORD", "pw")
	key := keyPair(t, dir, "org", sign.AlgorithmEd25519)
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	decl := fixturePath(artifact.KindDeclaration)
	malformed := write("bad.yaml", "apiVersion: mcpready.dev/v1\nkind: [\n")
	unknownField := write("unknown.yaml", "apiVersion: mcpready.dev/v1\nkind: Policy\nmetadata: {name: p}\nspec: {noSuchField: 1}\n")
	unknownKind := write("kind.yaml", "apiVersion: mcpready.dev/v1\nkind: Widget\nmetadata: {name: p}\n")
	twoDocs := write("two.yaml", "apiVersion: mcpready.dev/v1\nkind: Policy\nmetadata: {name: p}\n---\napiVersion: mcpready.dev/v1\nkind: Policy\nmetadata: {name: q}\n")
	out := filepath.Join(dir, "out.bundle.json")

	tests := []struct {
		name     string
		args     []string
		password string
		code     int
		stderr   string
	}{
		{"kind mismatch", []string{"--key", key + ".key", "--kind", "Policy", "-f", decl, "--bundle", out}, "pw", exitError, "holds a Declaration, but --kind is Policy"},
		{"unknown --kind", []string{"--key", key + ".key", "--kind", "widgets", "-f", decl, "--bundle", out}, "pw", exitUsage, "unknown kind"},
		{"malformed yaml", []string{"--key", key + ".key", "--kind", "Policy", "-f", malformed, "--bundle", out}, "pw", exitError, "malformed artifact"},
		{"unknown field", []string{"--key", key + ".key", "--kind", "Policy", "-f", unknownField, "--bundle", out}, "pw", exitError, "noSuchField"},
		{"two documents", []string{"--key", key + ".key", "--kind", "Policy", "-f", twoDocs, "--bundle", out}, "pw", exitError, "more than one document"},
		{"unknown kind in file", []string{"--key", key + ".key", "--kind", "Policy", "-f", unknownKind, "--bundle", out}, "pw", exitError, "unknown kind"},
		{"public key as --key", []string{"--key", key + ".pub", "--kind", "Declaration", "-f", decl, "--bundle", out}, "pw", exitError, "this is a public key"},
		{"wrong password", []string{"--key", key + ".key", "--kind", "Declaration", "-f", decl, "--bundle", out}, "nope", exitError, "wrong password"},
		{"missing file", []string{"--key", key + ".key", "--kind", "Declaration", "-f", filepath.Join(dir, "none.yaml"), "--bundle", out}, "pw", exitError, "no such file"},
		{"missing flags", []string{"-f", decl}, "pw", exitUsage, "required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("MCPREADY_PASSWORD", tt.password)
			code, _, errOut := runKeyCLI(t, append([]string{"sign"}, tt.args...)...)
			if code != tt.code || !strings.Contains(errOut, tt.stderr) {
				t.Fatalf("exit %d, stderr %q; want exit %d containing %q", code, errOut, tt.code, tt.stderr)
			}
			if _, err := os.Stat(out); err == nil {
				t.Fatal("a failed sign wrote the bundle")
			}
		})
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustPublicKey(t *testing.T, path string) crypto.PublicKey {
	t.Helper()
	pub, err := sign.ReadPublicKeyFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return pub
}
