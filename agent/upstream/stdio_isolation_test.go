package upstream

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpready/mcpready/agent/config"
	"github.com/mcpready/mcpready/internal/safebuf"
)

// stdioCall starts the test binary as the stdio upstream up and calls tool.
func stdioCall(t *testing.T, p *Pool, tool string, args map[string]any) string {
	t.Helper()
	s, err := p.Shared(context.Background(), Target{Server: "env"})
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil || res.IsError || len(res.Content) != 1 {
		t.Fatalf("%s: %v %+v", tool, err, res)
	}
	return res.Content[0].(*mcp.TextContent).Text
}

// A child's stderr reaches the agent's log line by line, with the values
// of its configured environment (a literal env secret, a token passed by
// envFrom) redacted, long lines cut after redaction (a secret straddling
// the cut leaves no prefix), and a flood bounded and counted. Before,
// stderr was discarded.
func TestStdioStderrLoggedRedactedBounded(t *testing.T) {
	const literal, passed = "literal-child-secret-1234", "passed-child-token-5678"
	t.Setenv("MCPREADY_TEST_PASSED", passed)
	logs := &safebuf.Buffer{}
	up := config.Upstream{Name: "env", Command: []string{os.Args[0], "-test.run=^$"},
		Env: map[string]string{stdioChildMarker: "1", "CHILD_SECRET": literal}, EnvFrom: map[string]string{"CHILD_TOKEN": "MCPREADY_TEST_PASSED"}}
	p := NewPool(Options{Resolve: func(Target) (config.Upstream, bool) { return up, true },
		Logger: slog.New(slog.NewJSONHandler(logs, nil))})
	defer p.Close()
	lines := []string{"starting with token $CHILD_TOKEN", "secret=$CHILD_SECRET", strings.Repeat("x", stderrLineBytes-10) + "${CHILD_SECRET}" + strings.Repeat("y", 3000)}
	for range 300 {
		lines = append(lines, "noise")
	}
	stdioCall(t, p, "stderr", map[string]any{"lines": lines})
	waitFor(t, func() bool { return strings.Count(logs.String(), "stdio upstream stderr") >= stderrBurst })
	time.Sleep(1100 * time.Millisecond) // the rate refills
	stdioCall(t, p, "stderr", map[string]any{"lines": []string{"after the flood"}})
	waitFor(t, func() bool { return strings.Contains(logs.String(), "after the flood") })
	out := logs.String()
	if strings.Contains(out, literal) || strings.Contains(out, passed) || strings.Contains(out, literal[:8]) {
		t.Fatalf("a configured secret (or a prefix of one) reached the log:\n%s", out)
	}
	for _, want := range []string{`"line":"starting with token [redacted]"`, `"line":"secret=[redacted]"`, `"truncated":true`, `"dropped_before":`, `"server":"env"`} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %s", want)
		}
	}
	if n := strings.Count(out, "stdio upstream stderr"); n > stderrBurst+stderrPerSecond*3 {
		t.Errorf("%d stderr lines logged from a flood of 303: not bounded", n)
	}
}

func waitFor(t *testing.T, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !ok(); {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// unprivilegedCopy copies the test binary where user nobody can run it.
func unprivilegedCopy(t *testing.T) (dir, bin string) {
	t.Helper()
	dir, err := os.MkdirTemp("", "mcpready-runas-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	src, err := os.Open(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	bin = filepath.Join(dir, "child")
	dst, err := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	return dir, bin
}

const nobody = 65534

// runAs and dir: the child runs as the configured user and group, with no
// supplementary groups, in the configured directory (before, both were
// the agent's). Needs a privileged agent (root here).
func TestStdioRunAsAndDir(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to switch users")
	}
	dir, bin := unprivilegedCopy(t)
	uid, gid := uint32(nobody), uint32(nobody)
	cfg, err := config.New(config.File{Upstreams: []config.Upstream{{Name: "env", Command: []string{bin, "-test.run=^$"},
		Env: map[string]string{stdioChildMarker: "1"}, RunAs: &config.RunAs{UID: &uid, GID: &gid}, Dir: dir}}})
	if err != nil {
		t.Fatal(err)
	}
	up, _ := cfg.Upstream("env")
	p := NewPool(Options{Resolve: func(Target) (config.Upstream, bool) { return up, true }})
	defer p.Close()
	if got, want := stdioCall(t, p, "whoami", map[string]any{}), "65534 65534 "+dir+" []"; got != want {
		t.Fatalf("child runs as %q, want %q", got, want)
	}
}

// An agent without the right to switch users (here: the test binary run
// as nobody, without capabilities) refuses a runAs configuration with
// ErrRunAs instead of failing at the first call.
func TestRunAsRefusedWhenNotPermitted(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to start the unprivileged agent")
	}
	_, bin := unprivilegedCopy(t)
	cmd := exec.Command(bin, "-test.run=^$")
	cmd.Env = []string{configChildMarker + "=1"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody, Groups: []uint32{}}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if !strings.Contains(string(out), config.ErrRunAs.Error()) || !strings.Contains(string(out), "CAP_SETUID") {
		t.Fatalf("unprivileged agent's runAs: %s", out)
	}
	// And the privileged one accepts it.
	uid, gid := uint32(0), uint32(0)
	if _, err := config.New(config.File{Upstreams: []config.Upstream{{Name: "a", Command: []string{"x"}, RunAs: &config.RunAs{UID: &uid, GID: &gid}}}}); errors.Is(err, config.ErrRunAs) {
		t.Fatal(err)
	}
}

// Whatever a child writes, and however it splits its writes, no logged
// line is longer than the bound and none carries the configured secret.
func FuzzStderrLog(f *testing.F) {
	const secret = "fuzz-secret-value"
	f.Add([]byte("a\nb\r\nfuzz-secret-value\n"), 3)
	f.Add([]byte(strings.Repeat("z", 2000)+"fuzz-secret-value\n"), 7)
	f.Fuzz(func(t *testing.T, data []byte, split int) {
		logs := &safebuf.Buffer{}
		l := newStderrLog(slog.New(slog.NewJSONHandler(logs, nil)), config.Upstream{Name: "f", Env: map[string]string{"S": secret}}, []string{"S=" + secret})
		if split <= 0 {
			split = 1
		}
		for len(data) > 0 {
			n := min(split, len(data))
			if k, err := l.Write(data[:n]); k != n || err != nil {
				t.Fatalf("Write = %d, %v", k, err)
			}
			data = data[n:]
		}
		for _, line := range strings.Split(logs.String(), "\n") {
			if strings.Contains(line, secret) {
				t.Fatalf("secret logged: %s", line)
			}
			if len(line) > 2*stderrLineBytes+256 { // JSON escaping may double a line
				t.Fatalf("record of %d bytes", len(line))
			}
		}
	})
}
