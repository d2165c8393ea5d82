package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"sigs.k8s.io/yaml"
)

var updateDocs = flag.Bool("update-docs", false, "rewrite the CLI section of docs/reference.md")

const (
	referencePath = "../../docs/reference.md"
	beginCLI      = "<!-- BEGIN GENERATED: cli (go test ./cmd/mcpready -run TestCLIReference -update-docs) -->"
	endCLI        = "<!-- END GENERATED: cli -->"
)

// visibleCommands lists every user-facing command below root, depth first
// in name order.
func visibleCommands(c *cobra.Command) []*cobra.Command {
	var out []*cobra.Command
	subs := c.Commands()
	sort.Slice(subs, func(i, j int) bool { return subs[i].Name() < subs[j].Name() })
	for _, s := range subs {
		if s.Hidden || s.Name() == "help" || s.Name() == "completion" {
			continue
		}
		out = append(out, s)
		out = append(out, visibleCommands(s)...)
	}
	return out
}

func cliReference() string {
	var b strings.Builder
	b.WriteString(beginCLI + "\n\n")
	b.WriteString("Exit codes, on every command: 0 success, 1 error (including a control plane that cannot be reached), 2 usage error (unknown command, flag or argument, bad flag value), 3 verification failed.\n\n")
	b.WriteString("Flag conventions: `-o/--output` is always the output format, `table` (default), `yaml` or `json` (JSON lines where a stream is printed); `-f/--filename` names input; files are written only to paths a flag names (`--bundle`, `--payload`, `--bundles`, `--output-file`, `--out`). Every command that dials the control plane takes `--server` and the client TLS flags `--tls-ca`, `--tls-cert`, `--tls-key` and `--tls-server-name`.\n\n")
	for _, c := range visibleCommands(newRootCmd()) {
		fmt.Fprintf(&b, "### `%s`\n\n%s\n\n", c.CommandPath(), c.Short)
		if c.Runnable() && !c.HasSubCommands() {
			fmt.Fprintf(&b, "```\n%s\n```\n\n", c.UseLine())
		}
		if c.Long != "" {
			b.WriteString(strings.TrimSpace(c.Long) + "\n\n")
		}
		var rows []string
		c.NonInheritedFlags().VisitAll(func(f *pflag.Flag) {
			if f.Hidden || f.Name == "help" {
				return
			}
			name := "`--" + f.Name + "`"
			if f.Shorthand != "" {
				name = "`-" + f.Shorthand + "`, " + name
			}
			def := f.DefValue
			switch f.Name {
			case "server":
				def = "$MCPREADY_SERVER, else 127.0.0.1:7443"
			case "tls-ca", "tls-cert", "tls-key":
				def = "" // from the environment, named in the meaning
			}
			if def == "" || def == "[]" {
				def = "—"
			} else {
				def = "`" + def + "`"
			}
			rows = append(rows, fmt.Sprintf("| %s | %s | %s |", name, def, strings.ReplaceAll(f.Usage, "|", `\|`)))
		})
		if len(rows) > 0 {
			b.WriteString("| flag | default | meaning |\n|---|---|---|\n" + strings.Join(rows, "\n") + "\n\n")
		}
	}
	b.WriteString(endCLI)
	return b.String()
}

// TestCLIReference checks that docs/reference.md documents every command;
// -update-docs regenerates the whole CLI section from the cobra tree.
func TestCLIReference(t *testing.T) {
	for _, env := range []string{"MCPREADY_SERVER", "MCPREADY_KEY", "MCPREADY_DATA", "MCPREADY_AGENT", "MCPREADY_CLIENT_CA", "MCPREADY_CLIENT_CERT", "MCPREADY_CLIENT_KEY"} {
		t.Setenv(env, "") // flag defaults as documented, whatever this shell sets
	}
	cur, err := os.ReadFile(referencePath)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(cur)
	i, j := strings.Index(doc, beginCLI), strings.Index(doc, endCLI)
	if i < 0 || j < i {
		t.Fatalf("%s: CLI markers not found", referencePath)
	}
	if *updateDocs {
		want := doc[:i] + cliReference() + doc[j+len(endCLI):]
		if err := os.WriteFile(referencePath, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	section := doc[i:j]
	if want := cliReference(); strings.TrimSpace(doc[i:j+len(endCLI)]) != strings.TrimSpace(want) {
		t.Errorf("%s: the CLI section is stale; regenerate with: go test ./cmd/mcpready -run TestCLIReference -update-docs", referencePath)
	}
	for _, c := range visibleCommands(newRootCmd()) {
		if !strings.Contains(section, "### `"+c.CommandPath()+"`") {
			t.Errorf("%s does not document %q; regenerate with: go test ./cmd/mcpready -run TestCLIReference -update-docs", referencePath, c.CommandPath())
		}
	}
}

// invocation is one mcpready command line found in deploy/.
type invocation struct {
	where string
	args  []string
}

var flagName = regexp.MustCompile(`^--([a-z0-9-]+)`)

// deployInvocations collects the mcpready command lines of the Kubernetes
// manifests (container args) and the systemd units (ExecStart).
func deployInvocations(t *testing.T) []invocation {
	t.Helper()
	var out []invocation
	manifests, _ := filepath.Glob("../../deploy/kubernetes/*.yaml")
	for _, f := range manifests {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(data), -1) {
			var o struct {
				Kind string `json:"kind"`
				Spec struct {
					Template struct {
						Spec struct {
							Containers []struct {
								Image string   `json:"image"`
								Args  []string `json:"args"`
							} `json:"containers"`
						} `json:"spec"`
					} `json:"template"`
				} `json:"spec"`
			}
			if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			for _, c := range o.Spec.Template.Spec.Containers {
				if strings.Contains(c.Image, "mcpready") {
					out = append(out, invocation{f + " " + o.Kind, c.Args})
				}
			}
		}
	}
	units, _ := filepath.Glob("../../deploy/systemd/*.service")
	for _, f := range units {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		text := strings.ReplaceAll(string(data), "\\\n", " ")
		m := regexp.MustCompile(`(?m)^ExecStart=/usr/local/bin/mcpready (.*)$`).FindStringSubmatch(text)
		if m == nil {
			t.Fatalf("%s: no mcpready ExecStart", f)
		}
		out = append(out, invocation{f, strings.Fields(m[1])})
	}
	return out
}

// TestDeployFlagsExist checks that every flag the deployment files pass to
// mcpready exists on that command.
func TestDeployFlagsExist(t *testing.T) {
	root := newRootCmd()
	invs := deployInvocations(t)
	if len(invs) < 4 {
		t.Fatalf("found %d mcpready invocations in deploy/, want at least 4", len(invs))
	}
	for _, inv := range invs {
		if len(inv.args) == 0 {
			t.Errorf("%s: no arguments", inv.where)
			continue
		}
		cmd, _, err := root.Find(inv.args[:1])
		if err != nil || cmd == root {
			t.Skipf("%s: command %q is not built yet", inv.where, inv.args[0])
		}
		for _, a := range inv.args[1:] {
			m := flagName.FindStringSubmatch(a)
			if m == nil {
				continue
			}
			if cmd.Flags().Lookup(m[1]) == nil {
				t.Errorf("%s: mcpready %s has no flag --%s", inv.where, inv.args[0], m[1])
			}
		}
	}
}

// docArgs returns the arguments of an mcpready invocation in one shell
// command ("mcpready ...", "go run ./cmd/mcpready ...", with leading
// VAR=value assignments), or nil when the command runs something else.
func docArgs(command string) []string {
	f := strings.Fields(strings.TrimSpace(command))
	for len(f) > 0 && (f[0] == "$" || regexp.MustCompile(`^[A-Z_]+=`).MatchString(f[0]) || f[0] == "env") {
		f = f[1:]
	}
	switch {
	case len(f) > 0 && (f[0] == "mcpready" || f[0] == "/usr/local/bin/mcpready"):
		f = f[1:]
	case len(f) > 2 && f[0] == "go" && f[1] == "run" && f[2] == "./cmd/mcpready":
		f = f[3:]
	default:
		return nil
	}
	for i, a := range f {
		if strings.HasPrefix(a, "#") || a == ">" || strings.HasPrefix(a, ">") {
			return f[:i]
		}
	}
	return f
}

// TestDocsCommandsExist checks that every mcpready command and flag used in
// the shell examples of README.md and docs/*.md exists.
func TestDocsCommandsExist(t *testing.T) {
	root := newRootCmd()
	files, _ := filepath.Glob("../../docs/*.md")
	files = append(files, "../../README.md")
	checked := 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		inShell := false
		var lines []string
		for _, l := range strings.Split(string(data), "\n") {
			switch {
			case strings.HasPrefix(l, "```sh"):
				inShell = true
				continue
			case strings.HasPrefix(l, "```"):
				inShell = false
				continue
			}
			if inShell {
				lines = append(lines, l)
			}
		}
		joined := strings.ReplaceAll(strings.Join(lines, "\n"), "\\\n", " ")
		for _, l := range regexp.MustCompile(`\n|&&|\||;|\$\(`).Split(joined, -1) {
			args := docArgs(l)
			if args == nil {
				continue
			}
			{
				m := []string{strings.Join(args, " ")}
				cmd, rest, err := root.Find(args)
				if err != nil || cmd == root {
					t.Errorf("%s: %q: no such command", f, m[0])
					continue
				}
				checked++
				for _, a := range rest {
					name := ""
					switch {
					case strings.HasPrefix(a, "--"):
						name = strings.SplitN(strings.TrimPrefix(a, "--"), "=", 2)[0]
					case strings.HasPrefix(a, "-") && len(a) == 2:
						if cmd.Flags().ShorthandLookup(a[1:]) == nil {
							t.Errorf("%s: %q: %s has no flag %s", f, m[0], cmd.CommandPath(), a)
						}
						continue
					default:
						continue
					}
					if name != "" && cmd.Flags().Lookup(name) == nil {
						t.Errorf("%s: %q: %s has no flag --%s", f, m[0], cmd.CommandPath(), name)
					}
				}
			}
		}
	}
	t.Logf("checked %d documented command lines", checked)
	if checked < 20 {
		t.Errorf("checked only %d documented command lines; the pattern no longer finds them", checked)
	}
}
