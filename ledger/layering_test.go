package ledger_test

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/mcpready/mcpready"

// goList runs `go list` with format f over patterns and returns one line
// per package.
func goList(t *testing.T, f string, patterns ...string) []string {
	t.Helper()
	out, err := exec.Command("go", append([]string{"list", "-f", f}, patterns...)...).Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			t.Fatalf("go list: %v\n%s", err, ee.Stderr)
		}
		t.Skipf("go list unavailable: %v", err)
	}
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}

// TestLayering: the receipt format is shared, so the control plane needs
// nothing of the agent and the format needs neither. Production code of
// every package under controlplane/ (with everything it imports) must not
// import agent/...; ledger must import neither agent/... nor
// controlplane/.... Control-plane tests may drive a real agent spool and
// shipper end to end (and the builder, to show what it redacts), and real
// subscribing agents (the convergence benchmark), nothing else of the
// agent.
func TestLayering(t *testing.T) {
	for _, rule := range []struct {
		pkgs      string
		forbidden []string
	}{
		{module + "/controlplane/...", []string{module + "/agent"}},
		{module + "/ledger/...", []string{module + "/agent", module + "/controlplane"}},
	} {
		for _, line := range goList(t, `{{.ImportPath}}{{range .Deps}} {{.}}{{end}}`, rule.pkgs) {
			fields := strings.Fields(line)
			for _, dep := range fields[1:] {
				for _, f := range rule.forbidden {
					if dep == f || strings.HasPrefix(dep, f+"/") {
						t.Errorf("%s depends on %s", fields[0], dep)
					}
				}
			}
		}
	}
	allowedInTests := map[string]bool{module + "/agent/spool": true, module + "/agent/shipper": true, module + "/agent/receipt": true, module + "/agent/subscribe": true}
	for _, line := range goList(t, `{{.ImportPath}}{{range .TestImports}} {{.}}{{end}}{{range .XTestImports}} {{.}}{{end}}`, module+"/controlplane/...") {
		fields := strings.Fields(line)
		for _, imp := range fields[1:] {
			if strings.HasPrefix(imp, module+"/agent/") && !allowedInTests[imp] {
				t.Errorf("tests of %s import %s", fields[0], imp)
			}
		}
	}
}
