package front

import (
	"bytes"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/mcpready/mcpready/agent/config"
	"github.com/mcpready/mcpready/agent/workflow"
)

// originHarness serves a front whose tokenless default principal may
// report workflows (a single-machine setup), on a loopback listener, with
// origins trusted as configured.
func originHarness(t *testing.T, trusted ...string) *harness {
	t.Helper()
	h := newHarness(t)
	cfg, err := config.New(config.File{
		DefaultPrincipal: &config.Identity{PrincipalClass: "dev", ReportWorkflows: true},
		Upstreams:        []config.Upstream{{Name: "test", URL: h.up.URL}},
		TrustedOrigins:   trusted,
	})
	if err != nil {
		t.Fatal(err)
	}
	h.serveWorkflows(t, cfg, workflow.Options{})
	return h
}

const initBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`

func post(t *testing.T, url, body string, hdr map[string]string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewBufferString(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range hdr {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// A web page of another origin, in the browser of the agent's user, may
// send simple requests (text/plain, no preflight) to the agent's loopback
// listener, and through DNS rebinding any request under a name of its
// own. With a tokenless default principal both reached the front: a page
// could report (close) the user's workflows. Every front endpoint now
// refuses a request from another origin (Origin, Sec-Fetch-Site) and, on
// a loopback listener, a Host that is not a loopback name, with HTTP 403
// (the MCP transport's Origin rule); origins listed in trustedOrigins are
// accepted.
func TestForeignOriginRefused(t *testing.T) {
	h := originHarness(t)
	base := h.url
	report := `{"workflow":"w","state":"completed"}`
	for name, c := range map[string]struct {
		path, body string
		hdr        map[string]string
	}{
		"report, simple cross-site request": {"/workflows/report", report, map[string]string{"Content-Type": "text/plain", "Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"}},
		"report, Origin only":               {"/workflows/report", report, map[string]string{"Origin": "https://evil.example"}},
		"report, DNS rebinding":             {"/workflows/report", report, map[string]string{"Host": "evil.example:80"}},
		"initialize, cross-site":            {"/mcp", initBody, map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"}},
		"initialize, DNS rebinding":         {"/mcp/servers/test", initBody, map[string]string{"Host": "evil.example"}},
	} {
		if code := post(t, base+c.path, c.body, c.hdr); code != http.StatusForbidden {
			t.Errorf("%s: HTTP %d, want 403", name, code)
		}
	}
	for reason, want := range map[string]float64{"origin": 3, "host": 2} {
		if n := testutil.ToFloat64(h.front.metrics.foreignOrigin.WithLabelValues(reason)); n != want {
			t.Errorf("refusals counted with reason %s: %v, want %v", reason, n, want)
		}
	}
	// What a local client sends is served: no Origin, a loopback Host, or
	// the page of the agent's own origin.
	for name, hdr := range map[string]map[string]string{
		"no Origin":   nil,
		"localhost":   {"Host": "localhost:" + strings.Split(base, ":")[2]},
		"same origin": {"Origin": base, "Sec-Fetch-Site": "same-origin"},
	} {
		if code := post(t, base+"/mcp", initBody, hdr); code != http.StatusOK {
			t.Errorf("%s: HTTP %d, want 200", name, code)
		}
	}
	// A trusted origin (a browser-based client the operator runs).
	trusted := originHarness(t, "http://localhost:6274").url
	if code := post(t, trusted+"/mcp", initBody, map[string]string{"Origin": "http://localhost:6274", "Sec-Fetch-Site": "same-site"}); code != http.StatusOK {
		t.Errorf("trusted origin: HTTP %d, want 200", code)
	}
	if code := post(t, trusted+"/mcp", initBody, map[string]string{"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"}); code != http.StatusForbidden {
		t.Errorf("untrusted origin beside a trusted one: HTTP %d, want 403", code)
	}
}

func TestTrustedOriginsValidated(t *testing.T) {
	for _, o := range []string{"evil.example", "https://evil.example/path", "://x", "https://a.example?q=1"} {
		if _, err := config.New(config.File{TrustedOrigins: []string{o}}); err == nil {
			t.Errorf("trustedOrigins %q accepted", o)
		}
	}
}
