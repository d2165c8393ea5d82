package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpready/mcpready/internal/safebuf"
)

// upProcess is `mcpready up` running as a real process.
type upProcess struct {
	cmd              *exec.Cmd
	agentURL         string
	defaultPrincipal string // what mcpready up says about its default principal
	server           string
	console          string
	keys             string
	data             string
	stderr           *safebuf.Buffer
	done             chan error
}

// buildBinary builds ./cmd/mcpready once per test binary run.
var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

func buildBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "mcpready-bin")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "mcpready")
		out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// startUp runs `mcpready up` on free loopback ports and waits for its
// endpoint lines.
func startUp(t *testing.T, bin, data string, extra ...string) *upProcess {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"up", "--data", data,
		"--controlplane-listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0", "--agent-listen", "127.0.0.1:0"}, extra...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &upProcess{cmd: cmd, stderr: &safebuf.Buffer{}, done: make(chan error, 1)}
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-p.done
		}
	})
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		io.Copy(io.Discard, stdout)
	}()
	go func() { p.done <- cmd.Wait() }()
	timeout := time.After(120 * time.Second)
	for p.agentURL == "" || p.defaultPrincipal == "" || p.server == "" || p.keys == "" || p.data == "" {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("mcpready up exited before printing its endpoints; stderr:\n%s", p.stderr.String())
			}
			k, v, _ := strings.Cut(l, ": ")
			switch k {
			case "agent MCP endpoint":
				p.agentURL = v
			case "default principal": // the quickstart says it sets one
				p.defaultPrincipal = v
			case "control plane":
				p.server = v
			case "console":
				p.console = v
			case "keys":
				p.keys = v
			case "data":
				p.data = v
			}
		case <-timeout:
			t.Fatalf("no endpoint lines within 120s; stderr:\n%s", p.stderr.String())
		}
	}
	go func() {
		for range lines {
		}
	}()
	return p
}

// stop sends SIGINT and requires a clean exit with no process of its group
// left behind.
func (p *upProcess) stop(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-p.done:
		if err != nil {
			t.Fatalf("mcpready up did not exit cleanly: %v; stderr:\n%s", err, p.stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("mcpready up still running 30s after SIGINT; stderr:\n%s", p.stderr.String())
	}
	// No orphan: nothing is left in the process group.
	if err := syscall.Kill(-p.cmd.Process.Pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("processes of mcpready up's group still alive after exit (kill -0: %v)", err)
	}
}

func TestUpEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts mcpready up as a real process")
	}
	t0 := time.Now()
	bin := buildBinary(t)
	t.Logf("built in %s", time.Since(t0).Round(time.Millisecond))
	data := t.TempDir()
	t0 = time.Now()
	p := startUp(t, bin, data)
	t.Logf("up ready in %s", time.Since(t0).Round(time.Millisecond))

	if !strings.HasPrefix(p.agentURL, "http://127.0.0.1:") || !strings.HasSuffix(p.agentURL, "/mcp") {
		t.Fatalf("agent endpoint %q is not a loopback /mcp URL", p.agentURL)
	}
	if !strings.HasPrefix(p.server, "127.0.0.1:") {
		t.Fatalf("control plane %q is not on loopback", p.server)
	}
	for _, n := range []string{"root", "org", "provider-a", "provider-b", "observer", "agent"} {
		for _, ext := range []string{".key", ".pub"} {
			if _, err := os.Stat(filepath.Join(p.keys, n+ext)); err != nil {
				t.Errorf("key file: %v", err)
			}
		}
	}

	// A stock go-sdk client lists the tools and calls docs_lookup.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: p.agentURL}, nil)
	if err != nil {
		t.Fatalf("connect: %v; stderr:\n%s", err, p.stderr.String())
	}
	var names []string
	for tool, err := range cs.Tools(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, tool.Name)
	}
	if !slices.Contains(names, "docs_lookup") {
		t.Fatalf("tools %v lack docs_lookup", names)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "docs_lookup", Arguments: map[string]any{"query": "how are receipts signed"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError {
		t.Fatalf("docs_lookup failed: %+v", res.Content)
	}
	raw, _ := json.Marshal(res.StructuredContent)
	var answer struct{ Title, URL, Snippet, Provider string }
	if err := json.Unmarshal(raw, &answer); err != nil || answer.Title == "" || answer.Provider == "" {
		t.Fatalf("docs_lookup answer %s: %v", raw, err)
	}
	cs.Close()

	// A client that only launches stdio servers gets the same tools through
	// the bridge, configured as docs/operator.md shows.
	base := strings.TrimSuffix(p.agentURL, "/mcp")
	bridge, err := client.Connect(ctx, &mcp.CommandTransport{Command: exec.Command(bin, "connect", "--agent", base)}, nil)
	if err != nil {
		t.Fatalf("stdio bridge: %v", err)
	}
	var bridged []string
	for tool, err := range bridge.Tools(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		bridged = append(bridged, tool.Name)
	}
	bridge.Close()
	if !slices.Equal(bridged, names) {
		t.Errorf("through the stdio bridge: tools %v, want %v", bridged, names)
	}

	// The receipt is visible through `mcpready receipts tail` (a real process).
	var out []byte
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, err = exec.Command(bin, "receipts", "tail", "-n", "20", "--server", p.server).CombinedOutput()
		if err == nil && bytes.Contains(out, []byte("docs_lookup")) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("receipts tail never showed the docs_lookup receipt (err %v):\n%s", err, out)
		}
		time.Sleep(500 * time.Millisecond)
	}

	// up prints the console's URL; a loopback caller reads the registry there.
	if !strings.HasPrefix(p.console, "http://127.0.0.1:") || !strings.HasSuffix(p.console, "/console/") {
		t.Fatalf("console %q is not a loopback /console/ URL", p.console)
	}
	cr, err := http.Get(p.console + "registry?format=json")
	if err != nil {
		t.Fatal(err)
	}
	cb, _ := io.ReadAll(cr.Body)
	cr.Body.Close()
	if cr.StatusCode != 200 || !bytes.Contains(cb, []byte(`"state": "qualified"`)) {
		t.Fatalf("console registry: %d %s", cr.StatusCode, cb)
	}

	t0 = time.Now()
	p.stop(t)
	t.Logf("stopped in %s", time.Since(t0).Round(time.Millisecond))

	// Data is kept for the next start, which reuses it.
	for _, d := range []string{"keys", "artifacts", "controlplane", "agent"} {
		if _, err := os.Stat(filepath.Join(data, d)); err != nil {
			t.Errorf("data directory after stop: %v", err)
		}
	}
	rootPub, _ := os.ReadFile(filepath.Join(data, "keys", "root.pub"))
	t0 = time.Now()
	again := startUp(t, bin, data)
	t.Logf("second start ready in %s", time.Since(t0).Round(time.Millisecond))
	if b, _ := os.ReadFile(filepath.Join(again.keys, "root.pub")); !bytes.Equal(b, rootPub) {
		t.Error("second start replaced the root key")
	}
	out, err = exec.Command(bin, "receipts", "tail", "-n", "20", "--server", again.server).CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("docs_lookup")) {
		t.Errorf("after restart, receipts tail lacks the earlier receipt (err %v):\n%s", err, out)
	}
	again.stop(t)
}

func TestSummarizeActions(t *testing.T) {
	for _, tc := range []struct {
		in   []string
		want string
	}{
		{nil, ""},
		{[]string{"fallback:b"}, "fallback:b"},
		{[]string{"retry:a", "retry:a", "fallback:b"}, "retry:a ×2, fallback:b"},
	} {
		if got := summarizeActions(tc.in); got != tc.want {
			t.Errorf("summarizeActions(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
