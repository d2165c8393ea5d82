package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
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

// sign --source fetches a Declaration where its provider publishes it and
// records the source and the digest of the bytes under the signature;
// verify --source checks that the source still serves them: unchanged
// exits 0, changed fails verification (3), unreachable is an error (1),
// and nothing recorded is an error too. A plain http source off loopback
// and -f with --source are usage errors.
func TestSignAndVerifySource(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("MCPREADY_PASSWORD", "pw")
	key := keyPair(t, dir, "org", sign.AlgorithmEd25519)
	published := mustRead(t, fixturePath(artifact.KindDeclaration))
	var body atomic.Value
	body.Store(published)
	src := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(body.Load().([]byte)) }))
	defer src.Close()
	bundle := filepath.Join(dir, "decl.bundle.json")
	if code, _, errOut := runKeyCLI(t, "sign", "--key", key+".key", "--kind", "Declaration", "--source", src.URL+"/decl.yaml", "--bundle", bundle); code != exitOK {
		t.Fatalf("sign --source: exit %d: %s", code, errOut)
	}
	v, err := sign.VerifyWithKey(mustRead(t, bundle), mustPublicKey(t, key+".pub"))
	if err != nil {
		t.Fatal(err)
	}
	if p := v.Object.Provenance(); p.GetSourceUri() != src.URL+"/decl.yaml" || p.GetRetrievalDigest() != artifact.Digest(published) {
		t.Fatalf("provenance %v, want the source and the digest of the bytes published", p)
	}
	code, out, errOut := runKeyCLI(t, "verify", "-f", bundle, "--key", key+".pub", "--source", "-o", "json")
	if code != exitOK || !strings.Contains(out, `"source": "unchanged"`) {
		t.Fatalf("unchanged source: exit %d: %s %s", code, out, errOut)
	}
	body.Store(append([]byte("# edited\n"), published...))
	if code, _, errOut := runKeyCLI(t, "verify", "-f", bundle, "--key", key+".pub", "--source"); code != exitVerify || !strings.Contains(errOut, "has changed") {
		t.Fatalf("changed source: exit %d: %s", code, errOut)
	}
	// Without --source nothing leaves the machine: the signature alone.
	if code, _, errOut := runKeyCLI(t, "verify", "-f", bundle, "--key", key+".pub"); code != exitOK {
		t.Fatalf("offline: exit %d: %s", code, errOut)
	}
	src.Close()
	if code, _, _ := runKeyCLI(t, "verify", "-f", bundle, "--key", key+".pub", "--source"); code != exitError {
		t.Fatalf("unreachable source: exit %d", code)
	}
	plain := signFixture(t, dir, key, artifact.KindPolicy, fixturePath(artifact.KindPolicy))
	if code, _, errOut := runKeyCLI(t, "verify", "-f", plain, "--key", key+".pub", "--source"); code != exitError || !strings.Contains(errOut, "no source") {
		t.Fatalf("nothing recorded: exit %d: %s", code, errOut)
	}
	for _, args := range [][]string{
		{"--source", "http://provider.example/decl.yaml"},
		{"--source", src.URL, "-f", fixturePath(artifact.KindDeclaration)},
	} {
		if code, _, errOut := runKeyCLI(t, append([]string{"sign", "--key", key + ".key", "--kind", "Declaration"}, args...)...); code != exitUsage {
			t.Errorf("%v: exit %d, want a usage error (%s)", args, code, errOut)
		}
	}
}
