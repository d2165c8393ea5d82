package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcpready/mcpready/artifact"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/sign"
)

// signFixture signs the fixture of kind k with key (a path prefix) and
// returns the bundle path.
func signFixture(t *testing.T, dir, key string, k artifact.Kind, file string) string {
	t.Helper()
	out := filepath.Join(dir, filepath.Base(key)+"-"+strings.ToLower(string(k))+".bundle.json")
	if code, _, errOut := runKeyCLI(t, "sign", "--key", key+".key", "--kind", string(k), "-f", file, "--bundle", out); code != exitOK {
		t.Fatalf("sign: exit %d: %s", code, errOut)
	}
	return out
}

func TestVerifyCommand(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("MCPREADY_PASSWORD", "pw")
	rootKey := keyPair(t, dir, "root", sign.AlgorithmECDSAP256)
	provider := keyPair(t, dir, "provider", sign.AlgorithmEd25519)
	stranger := keyPair(t, dir, "stranger", sign.AlgorithmEd25519)

	// The trust policy grants the provider Declarations under com.example/*.
	providerPub := mustRead(t, provider+".pub")
	pub, _ := sign.LoadPublicKey(providerPub)
	id, _ := sign.KeyID(pub)
	tp := artifact.New(artifact.KindTrustPolicy, "example.org/trust", &mcpreadyv1.TrustPolicy{Keys: []*mcpreadyv1.KeyGrant{{
		KeyId: id, PublicKey: string(providerPub), Name: "provider", Kinds: []string{"Declaration"}, Scopes: []string{"com.example/*"},
	}}})
	tpYAML, err := tp.YAML()
	if err != nil {
		t.Fatal(err)
	}
	tpFile := filepath.Join(dir, "trust.yaml")
	if err := os.WriteFile(tpFile, tpYAML, 0o644); err != nil {
		t.Fatal(err)
	}
	trust := signFixture(t, dir, rootKey, artifact.KindTrustPolicy, tpFile)
	decl := signFixture(t, dir, provider, artifact.KindDeclaration, fixturePath(artifact.KindDeclaration))
	policy := signFixture(t, dir, provider, artifact.KindPolicy, fixturePath(artifact.KindPolicy))
	strangerDecl := signFixture(t, dir, stranger, artifact.KindDeclaration, fixturePath(artifact.KindDeclaration))
	rootPolicy := signFixture(t, dir, rootKey, artifact.KindPolicy, fixturePath(artifact.KindPolicy))

	tampered := filepath.Join(dir, "tampered.bundle.json")
	var b map[string]any
	if err := json.Unmarshal(mustRead(t, decl), &b); err != nil {
		t.Fatal(err)
	}
	b["dsseEnvelope"].(map[string]any)["payloadType"] = "text/plain"
	raw, _ := json.Marshal(b)
	if err := os.WriteFile(tampered, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	truncated := filepath.Join(dir, "truncated.bundle.json")
	if err := os.WriteFile(truncated, mustRead(t, decl)[:100], 0o644); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name   string
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{"by key", []string{"-f", decl, "--key", provider + ".pub"}, exitOK, "Declaration  com.example/docs  " + id, ""},
		{"by key json", []string{"-f", decl, "--key", provider + ".pub", "-o", "json"}, exitOK, `"keyId": "` + id + `"`, ""},
		{"by key yaml", []string{"-f", decl, "--key", provider + ".pub", "-o", "yaml"}, exitOK, "kind: Declaration", ""},
		{"by trust", []string{"-f", decl, "--root", rootKey + ".pub", "--trust", trust}, exitOK, "com.example/docs", ""},
		{"root signs anything", []string{"-f", rootPolicy, "--root", rootKey + ".pub", "--trust", trust}, exitOK, "Policy", ""},
		{"wrong key", []string{"-f", decl, "--key", stranger + ".pub"}, exitVerify, "", "unknown-key"},
		{"kind not allowed", []string{"-f", policy, "--root", rootKey + ".pub", "--trust", trust}, exitVerify, "", "kind-not-allowed"},
		{"unknown key in trust", []string{"-f", strangerDecl, "--root", rootKey + ".pub", "--trust", trust}, exitVerify, "", "unknown-key"},
		{"trust signed by other root", []string{"-f", decl, "--root", provider + ".pub", "--trust", trust}, exitVerify, "", "unknown-key"},
		{"tampered", []string{"-f", tampered, "--key", provider + ".pub"}, exitVerify, "", "bad-signature"},
		{"truncated", []string{"-f", truncated, "--key", provider + ".pub"}, exitVerify, "", "malformed"},
		{"private key as --key", []string{"-f", decl, "--key", provider + ".key"}, exitError, "", "this is a private key"},
		{"missing bundle", []string{"-f", filepath.Join(dir, "none.json"), "--key", provider + ".pub"}, exitError, "", "no such file"},
		{"no key", []string{"-f", decl}, exitUsage, "", "either --key"},
		{"both modes", []string{"-f", decl, "--key", provider + ".pub", "--root", rootKey + ".pub"}, exitUsage, "", "either --key"},
		{"root without trust", []string{"-f", decl, "--root", rootKey + ".pub"}, exitUsage, "", "either --key"},
		{"bad output", []string{"-f", decl, "--key", provider + ".pub", "-o", "xml"}, exitUsage, "", "table, json or yaml"},
		{"no file", []string{"--key", provider + ".pub"}, exitUsage, "", "-f BUNDLE"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := runKeyCLI(t, append([]string{"verify"}, tt.args...)...)
			if code != tt.code || !strings.Contains(out, tt.stdout) || !strings.Contains(errOut, tt.stderr) {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit %d, stdout ~%q, stderr ~%q", code, out, errOut, tt.code, tt.stdout, tt.stderr)
			}
		})
	}
}
