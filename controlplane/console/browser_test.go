package console_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mcpready/mcpready/internal/demo"
)

// chromium returns the path of headless Chromium, installing Debian's
// package through scripts/chromium.sh when it is missing; the test skips,
// saying why, only when that is impossible.
func chromium(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("../../scripts/chromium.sh").Output()
	if err != nil {
		msg := ""
		if ee, ok := err.(*exec.ExitError); ok {
			msg = strings.TrimSpace(string(ee.Stderr))
		}
		t.Skipf("headless Chromium is not available and cannot be installed: %v %s", err, msg)
	}
	return strings.TrimSpace(string(out))
}

// screenshotDir is where the browser test leaves its screenshots: the
// CONSOLE_SCREENSHOTS directory, else a fresh directory under the system
// temporary directory. It is printed, and kept after the test.
func screenshotDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("CONSOLE_SCREENSHOTS")
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "mcpready-console-screenshots-"); err != nil {
			t.Fatal(err)
		}
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Logf("console screenshots: %s", dir)
	return dir
}

// browse loads url in a fresh headless Chromium and returns the DOM after
// load and every console message the page produced (JavaScript errors,
// refused resources under the Content-Security-Policy, failed loads).
func browse(t *testing.T, bin, url string, extra ...string) (dom string, console []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	args := append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--no-default-browser-check",
		"--disable-extensions", "--user-data-dir=" + t.TempDir(), "--enable-logging=stderr", "--v=0"}, extra...)
	cmd := exec.CommandContext(ctx, bin, append(args, url)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %s: %v\n%s", url, err, stderr.String())
	}
	for _, l := range strings.Split(stderr.String(), "\n") {
		if strings.Contains(l, ":CONSOLE") || strings.Contains(l, "Uncaught") {
			console = append(console, l)
		}
	}
	return stdout.String(), console
}

// TestConsoleInBrowser starts the whole demo (control plane with embedded
// etcd, signed artifacts, a host agent, demo MCP servers), makes the demo
// calls so receipts exist, then loads every console page in headless
// Chromium: each shows its content, produces no console message (no
// JavaScript error, nothing refused by the CSP), runs no script, and
// leaves a screenshot.
func TestConsoleInBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the demo stack and a browser")
	}
	bin := chromium(t)
	shots := screenshotDir(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	st, err := demo.StartStack(ctx, demo.StackOptions{DataDir: t.TempDir(), ControlPlaneListen: "127.0.0.1:0", MetricsListen: "127.0.0.1:0", AgentListen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := demo.RunCalls(ctx, demo.CallsOptions{AgentURL: st.AgentURL}); err != nil {
		t.Fatal(err)
	}
	// Receipts reach the control plane asynchronously (spool, shipper).
	var first string
	for deadline := time.Now().Add(60 * time.Second); first == ""; time.Sleep(300 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no receipt reached the console within 60s")
		}
		resp, err := http.Get(st.Console + "receipts?format=json")
		if err != nil {
			continue
		}
		var v struct{ Receipts []struct{ ID string } }
		json.NewDecoder(resp.Body).Decode(&v)
		resp.Body.Close()
		if len(v.Receipts) > 0 {
			first = v.Receipts[0].ID
		}
	}
	script := regexp.MustCompile(`(?i)<script|\son[a-z]+=|javascript:`)
	for _, tc := range []struct {
		name, path string
		want       []string
	}{
		{"index", "", []string{"mcpready console", "read-only"}},
		{"registry", "registry", []string{"docs_lookup", "qualified", "Lifecycle history", "Exact identity"}},
		{"evidence", "evidence", []string{"synthetic", "Rates of", "Denominator", "fresh"}},
		{"receipts", "receipts", []string{"Search", first, "newest first"}},
		{"receipt", "receipts/" + first, []string{"Receipt " + first, "Decision under policy version", "Outcome:", "mcpready explain " + first}},
		{"probes", "probes", []string{"<svg", "Probe funnel", "Successful calls by latency", "under 250 ms"}},
		{"fleet", "fleet", []string{demo.AgentNodeID, "ACKed version", "mcpready.v1.Policy"}},
	} {
		url := st.Console + tc.path
		dom, msgs := browse(t, bin, url, "--dump-dom")
		for _, w := range tc.want {
			if !strings.Contains(dom, w) {
				t.Errorf("%s: the page Chromium rendered lacks %q", tc.name, w)
			}
		}
		if len(msgs) > 0 {
			t.Errorf("%s: console messages (JavaScript errors or refused resources):\n%s", tc.name, strings.Join(msgs, "\n"))
		}
		if m := script.FindString(dom); m != "" {
			t.Errorf("%s: the page has script (%q)", tc.name, m)
		}
		shot := filepath.Join(shots, tc.name+".png")
		if _, msgs := browse(t, bin, url, "--screenshot="+shot, "--window-size=1280,1600", "--hide-scrollbars"); len(msgs) > 0 {
			t.Errorf("%s: console messages while taking the screenshot:\n%s", tc.name, strings.Join(msgs, "\n"))
		}
		if fi, err := os.Stat(shot); err != nil || fi.Size() < 1000 {
			t.Errorf("%s: no screenshot at %s: %v", tc.name, shot, err)
		}
	}
}

// The browser check can fail: a page with a JavaScript error, or with a
// script the console's Content-Security-Policy refuses, is reported.
func TestBrowserReportsScriptErrors(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a browser")
	}
	bin := chromium(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/csp" {
			w.Header().Set("Content-Security-Policy", "default-src 'none'")
		}
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte(`<!doctype html><html lang="en"><title>t</title><p>x</p><script>undefinedFunction()</script></html>`))
	}))
	defer srv.Close()
	for _, path := range []string{"/error", "/csp"} {
		if _, msgs := browse(t, bin, srv.URL+path, "--dump-dom"); len(msgs) == 0 {
			t.Errorf("%s: no console message reported", path)
		}
	}
}
