package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/mcpready/mcpready/artifact"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
)

func TestRegistryImport(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v0/servers" {
			http.NotFound(w, r)
			return
		}
		w.Write([]byte(`{"servers":[{"server":{"name":"io.github.acme/docs","version":"2.4.1","remotes":[{"type":"streamable-http","url":"https://docs.acme.example/mcp"}]},
 "_meta":{"io.modelcontextprotocol.registry/official":{"status":"active","isLatest":true}}}],"metadata":{}}`))
	}))
	defer ts.Close()
	wd := t.TempDir()
	t.Chdir(wd)
	code, out, errOut := runKeyCLI(t, "registry", "import", "--from", ts.URL)
	if code != exitOK || !strings.Contains(out, "imported/io.github.acme/docs@2.4.1") || !strings.Contains(errOut, "1 draft(s)") {
		t.Fatalf("dry run: %d %s %s", code, out, errOut)
	}
	if ents, _ := os.ReadDir(wd); len(ents) != 0 {
		t.Fatalf("a dry run wrote %v", ents)
	}
	dir := filepath.Join(t.TempDir(), "drafts")
	if code, _, errOut := runKeyCLI(t, "registry", "import", "--from", ts.URL, "--out", dir); code != exitOK {
		t.Fatalf("import: %d %s", code, errOut)
	}
	obj, err := artifact.Parse(mustRead(t, filepath.Join(dir, "imported_io.github.acme_docs@2.4.1.yaml")))
	if err != nil {
		t.Fatal(err)
	}
	if e := obj.Spec.(*mcpreadyv1.RegistryEntry); e.GetState() != mcpreadyv1.LifecycleState_LIFECYCLE_STATE_CANDIDATE || e.GetIdentity().GetEndpoint() != "https://docs.acme.example/mcp" {
		t.Fatalf("draft %v", e)
	}
}

// registryServing serves one /v0/servers page listing a latest, active
// server with a Streamable HTTP remote for each name, in order.
func registryServing(t *testing.T, names ...string) string {
	t.Helper()
	var servers []string
	for _, n := range names {
		servers = append(servers, `{"server":{"name":"`+n+`","version":"1","remotes":[{"type":"streamable-http","url":"https://mcp.example/`+n+`"}]},
 "_meta":{"io.modelcontextprotocol.registry/official":{"status":"active","isLatest":true}}}`)
	}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v0/servers" {
			http.NotFound(w, r)
			return
		}
		w.Write([]byte(`{"servers":[` + strings.Join(servers, ",") + `],"metadata":{}}`))
	}))
	t.Cleanup(ts.Close)
	return ts.URL
}

// dirState reads every file and directory below dir, by path relative to
// dir: a file's content, or "<dir>".
func dirState(t *testing.T, dir string) map[string]string {
	t.Helper()
	state := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() {
			state[rel] = "<dir>"
			return nil
		}
		b, err := os.ReadFile(p)
		state[rel] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return state
}

// TestRegistryImportLongNames: a draft name may have 253 characters, its
// file name is bounded to 255 bytes (NAME_MAX on most file systems). A
// draft name of 250 characters keeps its file name (255 bytes with
// ".yaml"); a longer one is cut and suffixed with 12 hex digits of the
// SHA-256 of the whole draft name, as mcpregistry bounds draft names.
func TestRegistryImportLongNames(t *testing.T) {
	server := func(n int) string { return "io.example/" + strings.Repeat("a", n-len("io.example/")) }
	// "imported/" + server + "@1": 250, 251 and 311 (cut to 253) characters.
	from := registryServing(t, "io.example/short", server(239), server(240), server(300))
	dir := filepath.Join(t.TempDir(), "drafts")
	code, out, errOut := runKeyCLI(t, "registry", "import", "--from", from, "--out", dir, "-o", "json")
	if code != exitOK {
		t.Fatalf("import: exit %d: %s", code, errOut)
	}
	var rows []struct{ Name, File string }
	if err := json.Unmarshal([]byte(out), &rows); err != nil || len(rows) != 4 {
		t.Fatalf("rows %v (%v): %s", rows, err, out)
	}
	want := map[string]bool{}
	for i, r := range rows {
		base := filepath.Base(r.File)
		if len(base) > 255 {
			t.Errorf("%s: file name of %d bytes", r.Name, len(base))
		}
		plain := strings.ReplaceAll(r.Name, "/", "_") + ".yaml"
		sum := sha256.Sum256([]byte(r.Name))
		switch {
		case i < 2 && base != plain:
			t.Errorf("%s (%d characters): file %s, want %s", r.Name, len(r.Name), base, plain)
		case i >= 2 && (len(base) != 255 || !strings.HasSuffix(base, "_"+hex.EncodeToString(sum[:6])+".yaml") || !strings.HasPrefix(plain, strings.TrimSuffix(base[:237], "_"))):
			t.Errorf("%s (%d characters): file %s, want the name cut to 255 bytes with its hash", r.Name, len(r.Name), base)
		}
		want[base] = true
		obj, err := artifact.Parse(mustRead(t, r.File))
		if err != nil || obj.Metadata.Name != r.Name {
			t.Fatalf("%s: %v %v", r.File, obj, err)
		}
	}
	if len(rows[3].Name) != 253 {
		t.Fatalf("long draft name %q: mcpregistry bounds it to 253", rows[3].Name)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != len(want) {
		t.Fatalf("files %v, want %v", ents, want)
	}
}

// TestRegistryImportAllOrNothing: when one draft cannot be placed (here a
// directory has its file's name), the import fails naming that file and
// the output directory is exactly as it was: no draft written, the user's
// file that a draft would have replaced unchanged, no staging left. Once
// the obstacle is gone, the import writes every draft, replacing the old
// file.
func TestRegistryImportAllOrNothing(t *testing.T) {
	from := registryServing(t, "io.example/a", "io.example/b", "io.example/c")
	dir := t.TempDir()
	for p, content := range map[string]string{"imported_io.example_a@1.yaml": "mine", "notes.txt": "keep", "imported_io.example_c@1.yaml/x": "keep"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, p), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	before := dirState(t, dir)
	code, out, errOut := runKeyCLI(t, "registry", "import", "--from", from, "--out", dir)
	if after := dirState(t, dir); !reflect.DeepEqual(after, before) {
		t.Errorf("a failed import changed the directory:\nbefore %v\nafter  %v", before, after)
	}
	if code != exitError || !strings.Contains(errOut, filepath.Join(dir, "imported_io.example_c@1.yaml")) || !strings.Contains(errOut, "directory") || out != "" {
		t.Fatalf("exit %d, stdout %q, stderr %s", code, out, errOut)
	}

	if err := os.RemoveAll(filepath.Join(dir, "imported_io.example_c@1.yaml")); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := runKeyCLI(t, "registry", "import", "--from", from, "--out", dir); code != exitOK {
		t.Fatalf("import: exit %d: %s", code, errOut)
	}
	after := dirState(t, dir)
	for _, s := range []string{"a", "b", "c"} {
		if !strings.Contains(after["imported_io.example_"+s+"@1.yaml"], "https://mcp.example/io.example/"+s) {
			t.Errorf("draft %s: %q", s, after["imported_io.example_"+s+"@1.yaml"])
		}
	}
	if len(after) != 4 || after["notes.txt"] != "keep" {
		t.Fatalf("directory %v", after)
	}
}

// TestRegistryImportFileCollision: two drafts whose names differ only in
// "/" and "_" would share a file; the import is refused, naming both and
// the file, and writes nothing (it used to keep only the last one).
func TestRegistryImportFileCollision(t *testing.T) {
	from := registryServing(t, "io.example/a_b", "io.example_a/b")
	dir := filepath.Join(t.TempDir(), "drafts")
	code, _, errOut := runKeyCLI(t, "registry", "import", "--from", from, "--out", dir)
	if code != exitError || !strings.Contains(errOut, "imported/io.example/a_b@1") || !strings.Contains(errOut, "imported/io.example_a/b@1") ||
		!strings.Contains(errOut, "imported_io.example_a_b@1.yaml") {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the refused import left %s: %v", dir, err)
	}
}
