package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
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
