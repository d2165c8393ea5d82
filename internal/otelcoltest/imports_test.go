package otelcoltest_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestOnlyTestsImportIt: no package's production code depends on the test
// collector (and so on the Collector's modules): they stay out of the
// binaries.
func TestOnlyTestsImportIt(t *testing.T) {
	const pkg = "github.com/mcpready/mcpready/internal/otelcoltest"
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Deps}} {{.}}{{end}}`, "github.com/mcpready/mcpready/...").Output()
	if err != nil {
		t.Skipf("go list unavailable: %v", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		for _, dep := range f[1:] {
			if dep == pkg && f[0] != pkg {
				t.Errorf("%s depends on %s outside its tests", f[0], pkg)
			}
		}
	}
}
