package console_test

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"errors"
	"html/template"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mcpready/mcpready/controlplane/authz"
	"github.com/mcpready/mcpready/controlplane/console"
	"github.com/mcpready/mcpready/explain"
	"github.com/mcpready/mcpready/internal/testpki"
)

// scripted finds what would run code or fetch from elsewhere.
var scripted = regexp.MustCompile(`<script|\son[a-z]+=|\ssrc=|href="https?:|url\(|javascript:`)

func get(t *testing.T, h http.Handler, target string, accept string) (int, string, http.Header) {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, target, nil)
	req.RemoteAddr = "127.0.0.1:40000"
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code, rec.Body.String(), rec.Header()
}

func contains(t *testing.T, page, body string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(body, w) {
			t.Errorf("%s lacks %q", page, w)
		}
	}
}

// Every page renders as accessible HTML (a language, landmarks, a skip
// link, table headers, form labels, no script) and shows what the
// control plane holds.
func TestPagesHTML(t *testing.T) {
	e := newEnv(t, 300)
	h := e.handler(t, nil)
	common := []string{`<html lang="en">`, `<main id="main">`, `<nav aria-label="Console pages">`, `href="#main"`, `/console/static/console.css`}
	for _, tc := range []struct {
		path string
		want []string
	}{
		{"/console/", []string{"read-only", `href="/console/registry"`}},
		{"/console/registry", []string{"<caption>Exact identity of", oldEntry, strings.ReplaceAll(e.candidate, "+", "&#43;"), "suspended", "version-drift", "output-schema-drift", "superseded by", "candidate for",
			"host-1", `<th scope="col">Reason</th>`, "sha256:out9", "https://docs.example/mcp", `aria-current="page"`}},
		{"/console/evidence", []string{"lab/docs/fresh", "lab/docs/stale", "passive/docs", `status-stale">stale`, `status-unknown">unknown`, `status-fresh">fresh`,
			"one vantage point", "lab-observer", "synthetic", "passive", "<td>1</td><td>1</td>", "100.0 %", "(age 10m0s)", `<th scope="col">Denominator</th>`}},
		{"/console/receipts", []string{`<label for="q-workflow">`, `role="search"`, "r-299", "100 receipts, newest first", "tool-error", "success"}},
		{"/console/receipts?workflow=wf-3&limit=5", []string{"5 receipts", "r-293", "r-253"}},
		{"/console/receipts/r-7", []string{"Receipt r-7", "rejected at step 6", "stale_evidence", "selected.", "Outcome: tool-error", "mcpready explain r-7"}},
		{"/console/probes", []string{"<svg", `role="img"`, "Probe funnel (2 subjects)", "reachability", "invocation", "under 250 ms", "Successful calls by latency", "<figcaption>"}},
		{"/console/fleet", []string{"host-1", "signature does not verify against the pinned root", "mcpready.v1.Evidence", `class="nack"`}},
	} {
		code, body, hdr := get(t, h, tc.path, "")
		if code != http.StatusOK {
			t.Errorf("%s: %d %s", tc.path, code, body)
			continue
		}
		if ct := hdr.Get("Content-Type"); ct != "text/html; charset=utf-8" {
			t.Errorf("%s: content type %q", tc.path, ct)
		}
		if csp := hdr.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") || strings.Contains(csp, "script-src") {
			t.Errorf("%s: CSP %q allows scripts", tc.path, csp)
		}
		contains(t, tc.path, body, append(common, tc.want...)...)
		if m := scripted.FindString(strings.ToLower(body)); m != "" {
			t.Errorf("%s has a script or an external reference (%q)", tc.path, m)
		}
	}
	// The receipt page says what `mcpready explain` says, line for line.
	sr, err := e.rs.Get("r-7")
	if err != nil {
		t.Fatal(err)
	}
	_, page, _ := get(t, h, "/console/receipts/r-7", "")
	for _, para := range explain.Of(sr) {
		for _, l := range para {
			if want := template.HTMLEscapeString(strings.TrimPrefix(l.Text, "- ")); !strings.Contains(page, want) {
				t.Errorf("receipt page lacks the explain line %q", want)
			}
		}
	}
	if code, body, _ := get(t, h, "/console/receipts?workflow=wf-3&limit=5", ""); code == 200 && strings.Contains(body, "r-292") {
		t.Error("workflow filter leaked another workflow's receipt")
	}
	code, css, hdr := get(t, h, "/console/static/console.css", "")
	if code != 200 || !strings.HasPrefix(hdr.Get("Content-Type"), "text/css") || !strings.Contains(css, "--stale-fg") {
		t.Errorf("stylesheet: %d %q", code, hdr.Get("Content-Type"))
	}
}

// Every page is also JSON, by ?format=json or by the Accept header, with
// the same content.
func TestPagesJSON(t *testing.T) {
	e := newEnv(t, 50)
	h := e.handler(t, nil)
	for _, tc := range []struct {
		path, accept string
		check        func(t *testing.T, v map[string]any)
	}{
		{"/console/?format=json", "", func(t *testing.T, v map[string]any) { has(t, v, "pages") }},
		{"/console/registry", "application/json", func(t *testing.T, v map[string]any) {
			es := v["entries"].([]any)
			if len(es) != 2 {
				t.Fatalf("entries %v", es)
			}
			old := es[0].(map[string]any)
			if old["name"] != oldEntry || old["state"] != "suspended" || old["supersededBy"] != e.candidate {
				t.Errorf("old entry %v", old)
			}
			if c := es[1].(map[string]any); c["supersedes"] != oldEntry {
				t.Errorf("candidate %v", c)
			}
		}},
		{"/console/evidence?format=json", "", func(t *testing.T, v map[string]any) {
			counts := v["counts"].(map[string]any)
			if counts["fresh"] != 1.0 || counts["stale"] != 1.0 || counts["unknown"] != 1.0 {
				t.Errorf("counts %v", counts)
			}
		}},
		{"/console/receipts?format=json&subject=com.example/docs/docs.lookup&limit=3", "", func(t *testing.T, v map[string]any) {
			if rs := v["receipts"].([]any); len(rs) != 3 || rs[0].(map[string]any)["id"] != "r-49" {
				t.Errorf("receipts %v", rs)
			}
		}},
		{"/console/receipts/r-3?format=json", "", func(t *testing.T, v map[string]any) {
			if ps := v["explanation"].([]any); len(ps) != 6 {
				t.Errorf("explanation %v", ps)
			}
		}},
		{"/console/probes", "application/json, text/html;q=0.5", func(t *testing.T, v map[string]any) {
			if v["subjects"] != 2.0 || v["recentCalls"] == 0.0 {
				t.Errorf("probes %v", v)
			}
		}},
		{"/console/fleet?format=json", "", func(t *testing.T, v map[string]any) {
			a := v["agents"].([]any)[0].(map[string]any)
			ty := a["types"].([]any)[0].(map[string]any)
			if a["nodeId"] != "host-1" || ty["nackReason"] == "" {
				t.Errorf("fleet %v", a)
			}
		}},
	} {
		code, body, hdr := get(t, h, tc.path, tc.accept)
		if code != 200 || hdr.Get("Content-Type") != "application/json" {
			t.Errorf("%s: %d %s %s", tc.path, code, hdr.Get("Content-Type"), body)
			continue
		}
		var v map[string]any
		if err := json.Unmarshal([]byte(body), &v); err != nil {
			t.Errorf("%s: %v", tc.path, err)
			continue
		}
		tc.check(t, v)
	}
}

func has(t *testing.T, v map[string]any, k string) {
	t.Helper()
	if _, ok := v[k]; !ok {
		t.Errorf("no %q in %v", k, v)
	}
}

// Refusals are specific: a bad search is 400 naming the parameter, an
// unknown receipt 404, a write method 405; none of them shows data.
func TestRefusals(t *testing.T) {
	e := newEnv(t, 10)
	h := e.handler(t, nil)
	for path, want := range map[string]int{
		"/console/receipts?limit=0":                                               400,
		"/console/receipts?since=yesterday":                                       400,
		"/console/receipts?colour=red":                                            400,
		"/console/receipts?since=2026-01-02T00:00:00Z&until=2026-01-01T00:00:00Z": 400,
		"/console/receipts/nope":                                                  404,
		"/console/nope":                                                           404,
	} {
		code, body, _ := get(t, h, path, "application/json")
		if code != want {
			t.Errorf("%s: %d, want %d: %s", path, code, want, body)
		}
	}
	_, body, _ := get(t, h, "/console/receipts?limit=0&format=json", "")
	if !strings.Contains(body, "limit") {
		t.Errorf("400 does not name the parameter: %s", body)
	}
	req := httptest.NewRequest(http.MethodPost, "/console/registry", strings.NewReader("x"))
	req.RemoteAddr = "127.0.0.1:1"
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST: %d", rec.Code)
	}
}

// The console needs the reader (or admin) role, from a verified client
// certificate: an agent's certificate is refused (403), no certificate is
// refused (401), a reader's and an admin's are served. Without mTLS the
// quickstart rule of the admin API holds: loopback callers may read,
// others may not.
func TestReaderRole(t *testing.T) {
	e := newEnv(t, 5)
	f := testpki.TLS(t, t.TempDir())
	srv := mtlsServer(t, e.handler(t, testpki.Roles()), f)
	readerCert, readerKey := f.Client(t, "reader-alice")
	adminCert, adminKey := f.Client(t, "admin-bob")
	nodeCert, nodeKey := f.Client(t, "node-7")
	for _, tc := range []struct {
		name, cert, key string
		want            int
	}{
		{"reader", readerCert, readerKey, 200},
		{"admin", adminCert, adminKey, 200},
		{"agent", nodeCert, nodeKey, 403},
		{"none", "", "", 401},
	} {
		resp, err := client(t, f, tc.cert, tc.key).Get(srv.URL + "/console/registry?format=json")
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%s: %d, want %d: %s", tc.name, resp.StatusCode, tc.want, body)
		}
		if tc.want != 200 && strings.Contains(string(body), oldEntry) {
			t.Errorf("%s: refused, but the body shows the registry", tc.name)
		}
	}
	// Over plaintext the mTLS console refuses even loopback callers.
	if code, _, _ := get(t, e.handler(t, testpki.Roles()), "/console/registry", ""); code != 401 {
		t.Errorf("plaintext loopback under mTLS rules: %d", code)
	}
	// The quickstart (no client certificates) serves loopback only.
	h := e.handler(t, nil)
	req := httptest.NewRequest(http.MethodGet, "/console/registry", nil)
	req.RemoteAddr = "192.0.2.7:5000"
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != 401 {
		t.Errorf("quickstart, off loopback: %d", rec.Code)
	}
}

func TestParseSearch(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	s, err := console.ParseSearch(url.Values{"subject": {"com.example/docs/docs.lookup"}}, now)
	if err != nil || s.Query.ServerName != "com.example/docs" || s.Query.ToolName != "docs.lookup" {
		t.Fatalf("subject split: %+v %v", s.Query, err)
	}
	s, err = console.ParseSearch(url.Values{"subject": {"docs/lookup"}, "since": {"90m"}, "until": {"2026-12-01T11:59:00Z"}, "workflow": {"wf"}, "limit": {"7"}}, now)
	if err != nil {
		t.Fatal(err)
	}
	q := s.Query
	if q.ServerName != "docs" || q.ToolName != "lookup" || !q.Since.Equal(now.Add(-90*time.Minute)) || q.Until.Hour() != 11 || q.WorkflowID != "wf" || q.Limit != 7 {
		t.Fatalf("%+v", q)
	}
	for _, bad := range []url.Values{{"limit": {"1001"}}, {"id": {"a", "b"}}, {"since": {"-5m"}}, {"agent": {"a\x00b"}}, {"subject": {"/x"}}, {"subject": {"docs"}}, {"subject": {"a/b"}, "server": {"a"}}, {"x": {""}}} {
		_, err := console.ParseSearch(bad, now)
		var qe *console.QueryError
		if !errors.As(err, &qe) || !errors.Is(err, console.ErrBadQuery) || qe.Param == "" {
			t.Errorf("%v: %v", bad, err)
		}
	}
}

// FuzzParseSearch: any query string parses or is refused with a
// *QueryError naming a parameter; never a panic, never an inverted range
// or a limit out of bounds.
func FuzzParseSearch(f *testing.F) {
	for _, s := range []string{"id=r-1", "subject=a/b&since=90m", "since=2026-01-01T00:00:00Z&until=2026-01-02T00:00:00Z", "limit=0", "x=1", "workflow=%00", "since=1h&until=2h"} {
		f.Add(s)
	}
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, raw string) {
		v, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		s, err := console.ParseSearch(v, now)
		if err != nil {
			var qe *console.QueryError
			if !errors.As(err, &qe) || !errors.Is(err, console.ErrBadQuery) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		q := s.Query
		if q.Limit < 1 || q.Limit > console.MaxLimit {
			t.Fatalf("limit %d", q.Limit)
		}
		if !q.Since.IsZero() && !q.Until.IsZero() && !q.Until.After(q.Since) {
			t.Fatalf("inverted range %v %v", q.Since, q.Until)
		}
	})
}

// A replica without a receipt store or Discovery says so instead of
// showing empty pages as if nothing had happened.
func TestWithoutReceiptsOrFleet(t *testing.T) {
	e := newEnv(t, 0)
	az, err := authz.New(authz.Options{LocalPlaintext: true})
	if err != nil {
		t.Fatal(err)
	}
	h, err := console.New(console.Options{Registry: e.lc, Artifacts: e.st, Authorizer: az})
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{
		"/console/receipts": "keeps no receipts",
		"/console/probes":   "keeps no receipts",
		"/console/fleet":    "the fleet is unknown",
	} {
		code, body, _ := get(t, h, path, "")
		if code != 200 || !strings.Contains(body, want) {
			t.Errorf("%s: %d, lacks %q", path, code, want)
		}
	}
	if code, _, _ := get(t, h, "/console/receipts/r-1", ""); code != 404 {
		t.Errorf("receipt without a store: %d", code)
	}
	if _, err := console.New(console.Options{Registry: e.lc}); !errors.Is(err, console.ErrConfig) {
		t.Errorf("incomplete options: %v", err)
	}
}

// Reader's refusals carry their reason as a type wrapping authz's
// sentinels, with the HTTP status to answer: the control plane's /metrics
// guard relies on them.
func TestReaderRefusals(t *testing.T) {
	az, err := authz.New(authz.Options{Rules: testpki.Roles()})
	if err != nil {
		t.Fatal(err)
	}
	as := func(cn string) *http.Request {
		r := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		r.RemoteAddr = "127.0.0.1:1"
		if cn != "" {
			r.TLS = &tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{{Subject: pkix.Name{CommonName: cn}}}}}
		}
		return r
	}
	if ref := console.Reader(az, as("")); ref == nil || !errors.Is(ref, authz.ErrUnauthenticated) || ref.Reason != "unauthenticated" || ref.Code() != http.StatusUnauthorized {
		t.Errorf("no certificate: %#v", ref)
	}
	if ref := console.Reader(az, as("node-7")); ref == nil || !errors.Is(ref, authz.ErrForbidden) || ref.Reason != "forbidden" || ref.Code() != http.StatusForbidden || ref.Identity != "node-7" {
		t.Errorf("agent certificate: %#v", ref)
	}
	if ref := console.Reader(az, as("reader-alice")); ref != nil {
		t.Errorf("reader certificate: %v", ref)
	}
}
