package front

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpready/mcpready/agent/config"
	"github.com/mcpready/mcpready/agent/spool"
	"github.com/mcpready/mcpready/agent/workflow"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/readiness"
)

const orchToken = "tok-orchestrator"

// workflowHarness is the harness with a front that tracks workflows (at
// most two open per principal): dev-client may not report, orchestrator
// may. The report endpoint is served beside the front.
func workflowHarness(t *testing.T) *harness {
	t.Helper()
	h := newHarness(t)
	cfg, err := config.New(config.File{
		Principals: []config.Principal{{Identity: config.Identity{Name: "dev-client", PrincipalClass: "dev"}, TokenSHA256: config.TokenDigest(devToken)},
			{Identity: config.Identity{Name: "orchestrator", PrincipalClass: "dev", ReportWorkflows: true}, TokenSHA256: config.TokenDigest(orchToken)}},
		Upstreams: []config.Upstream{{Name: "test", URL: h.up.URL}},
	})
	if err != nil {
		t.Fatal(err)
	}
	h.serveWorkflows(t, cfg, workflow.Options{MaxOpenPerPrincipal: 2})
	return h
}

// serveWorkflows replaces h's front with one of cfg that tracks workflows
// with wopts (and has h's state), served with the report endpoint beside
// it on a loopback listener.
func (h *harness) serveWorkflows(t *testing.T, cfg *config.Config, wopts workflow.Options) {
	t.Helper()
	f := New(Options{Config: cfg, Workflows: &wopts,
		Receipts: func(r *mcpreadyv1.Receipt) { h.mu.Lock(); h.recs = append(h.recs, r); h.mu.Unlock() }})
	t.Cleanup(f.Close)
	f.SetState(h.front.state.Load())
	mux := http.NewServeMux()
	mux.Handle("/mcp", f)
	mux.Handle("/mcp/", f)
	mux.Handle("/workflows/report", f.WorkflowReports())
	hs := httptest.NewServer(mux)
	t.Cleanup(hs.Close)
	h.front, h.url = f, hs.URL
}

func (h *harness) receipt(id string) *mcpreadyv1.Receipt {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, r := range h.recs {
		if r.GetReceiptId() == id {
			return r
		}
	}
	return nil
}

func callIn(t *testing.T, cs *mcp.ClientSession, wf, name string, args any) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args, Meta: mcp.Meta{MetaWorkflow: wf}})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestWorkflowReportTool: the tool is listed on /mcp to a principal that
// may report, to no other and on no transparent view; a principal that
// may not report is refused with a receipt.
func TestWorkflowReportTool(t *testing.T) {
	h := workflowHarness(t)
	orch := h.connect(t, "/mcp", orchToken, nil, "2025-11-25")
	if !slices.Contains(toolNames(t, orch), workflow.ReportTool) {
		t.Fatal("report tool not listed to the orchestrator")
	}
	if slices.Contains(toolNames(t, h.connect(t, "/mcp/servers/test", orchToken, nil, "2025-11-25")), workflow.ReportTool) {
		t.Error("report tool listed on a transparent view")
	}
	dev := h.connect(t, "/mcp", devToken, nil, "2025-11-25")
	if slices.Contains(toolNames(t, dev), workflow.ReportTool) {
		t.Error("report tool listed to a principal that may not report")
	}
	if res := callIn(t, orch, "wf-1", "echo_anything", map[string]any{"text": "hi"}); res.IsError || res.Meta[workflow.MetaReceipt] == nil {
		t.Fatalf("call in wf-1: %+v meta %v", res.Content, res.Meta)
	}
	te := wantToolError(t, call(t, dev, workflow.ReportTool, map[string]any{"workflow": "wf-1", "state": "completed"}), "REFUSED", readiness.CodeWorkflowReportNotPermitted)
	if r := h.receipt(te.Receipt); r.GetWorkflow().GetRefusalCode() != string(readiness.CodeWorkflowReportNotPermitted) || r.GetRequested() != workflow.ReportTool {
		t.Errorf("refused report's receipt %v", r)
	}
	res := call(t, orch, workflow.ReportTool, map[string]any{"workflow": "wf-1", "state": "completed"})
	if res.IsError {
		t.Fatalf("report: %+v", res.Content)
	}
	id, _ := res.StructuredContent.(map[string]any)["receipt"].(string)
	if r := h.receipt(id); r.GetWorkflow().GetEndState() != mcpreadyv1.WorkflowEndState_WORKFLOW_END_STATE_COMPLETED || len(r.GetWorkflow().GetCalls()) != 1 {
		t.Errorf("workflow receipt %v", r)
	}
}

// TestWorkflowCallRefusals: calls in another principal's workflow, past
// the per-principal cap, or with a malformed id are refused before any
// upstream sees them, each with its code and receipt. (Before workflow
// tracking, each of these calls reached the upstream.)
func TestWorkflowCallRefusals(t *testing.T) {
	h := workflowHarness(t)
	orch, dev := h.connect(t, "/mcp", orchToken, nil, "2025-11-25"), h.connect(t, "/mcp", devToken, nil, "2025-11-25")
	for _, wf := range []string{"a", "b"} {
		if res := callIn(t, orch, wf, "echo_anything", map[string]any{"text": "hi"}); res.IsError {
			t.Fatalf("call in %s: %+v", wf, res.Content)
		}
	}
	hits := h.up.Hits()
	for _, c := range []struct {
		cs   *mcp.ClientSession
		wf   string
		code readiness.Code
	}{
		{dev, "a", readiness.CodeWorkflowForeign},
		{orch, "c", readiness.CodeWorkflowLimit},
		{orch, "bad id", readiness.CodeWorkflowIDInvalid},
		{orch, strings.Repeat("w", workflow.MaxIDLen+1), readiness.CodeWorkflowIDInvalid},
	} {
		te := wantToolError(t, callIn(t, c.cs, c.wf, "echo_anything", map[string]any{"text": "hi"}), "REFUSED", c.code)
		if r := h.receipt(te.Receipt); r.GetWorkflowId() != c.wf || r.GetAttemptCount() != 0 {
			t.Errorf("%s: receipt %v", c.code, r)
		}
	}
	if h.up.Hits() != hits {
		t.Errorf("refused calls reached the upstream (%d requests)", h.up.Hits()-hits)
	}
}

// TestWorkflowReportEndpoint: method, authentication and size are checked
// before the report; a front that tracks no workflows has no endpoint.
func TestWorkflowReportEndpoint(t *testing.T) {
	h := workflowHarness(t)
	post := func(token, body string) int {
		req, _ := http.NewRequest(http.MethodPost, h.url+"/workflows/report", bytes.NewBufferString(body))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if resp, err := http.Get(h.url + "/workflows/report"); err != nil || resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET: %v %v", resp.StatusCode, err)
	}
	for _, c := range []struct {
		token, body string
		want        int
	}{
		{"", `{"workflow":"w","state":"completed"}`, http.StatusUnauthorized},
		{orchToken, `{"workflow":"w","state":"completed","contributed":["` + strings.Repeat("x", workflow.MaxReportBytes) + `"]}`, http.StatusRequestEntityTooLarge},
		{orchToken, `{"workflow":"w","state":"completed"}`, http.StatusNotFound},
		{orchToken, `{"workflow":"w","state":"won"}`, http.StatusBadRequest},
		{devToken, `{"workflow":"w","state":"completed"}`, http.StatusForbidden},
	} {
		if got := post(c.token, c.body); got != c.want {
			t.Errorf("%.60s: %d, want %d", c.body, got, c.want)
		}
	}
	orch := h.connect(t, "/mcp", orchToken, nil, "2025-11-25")
	if res := callIn(t, orch, "w", "echo_anything", map[string]any{"text": "hi"}); res.IsError {
		t.Fatalf("call: %+v", res.Content)
	}
	if got := post(orchToken, `{"workflow":"w","state":"completed"}`); got != http.StatusOK {
		t.Errorf("report: %d", got)
	}
	if got := post(orchToken, `{"workflow":"w","state":"completed"}`); got != http.StatusConflict {
		t.Errorf("second report: %d, want 409", got)
	}
	plain := httptest.NewServer(newHarness(t).front.WorkflowReports())
	defer plain.Close()
	if resp, err := http.Post(plain.URL, "application/json", bytes.NewBufferString(`{}`)); err != nil || resp.StatusCode != http.StatusNotFound {
		t.Errorf("front without workflows: %v %v", resp.StatusCode, err)
	}
}

// failDurable records queued receipts and fails every durable one.
type failDurable struct{}

func (failDurable) Accepting(bool) error { return nil }
func (failDurable) Record(_ *mcpreadyv1.Receipt, durable bool) error {
	if durable {
		return errors.New("disk full")
	}
	return nil
}
func (failDurable) Defer(p spool.Pending) { p.Receipt() }

// TestWorkflowReportNotDurable: a report whose workflow receipt cannot be
// made durable is refused (503, receipt_not_durable) and the workflow
// stays open for a later report.
func TestWorkflowReportNotDurable(t *testing.T) {
	h := newHarness(t)
	cfg, err := config.New(config.File{Principals: []config.Principal{
		{Identity: config.Identity{Name: "orchestrator", PrincipalClass: "dev", ReportWorkflows: true}, TokenSHA256: config.TokenDigest(orchToken)}},
		Upstreams: []config.Upstream{{Name: "test", URL: h.up.URL}}})
	if err != nil {
		t.Fatal(err)
	}
	f := New(Options{Config: cfg, Workflows: &workflow.Options{}, Ledger: failDurable{}})
	t.Cleanup(f.Close)
	f.SetState(h.front.state.Load())
	hs := httptest.NewServer(f)
	t.Cleanup(hs.Close)
	h.front, h.url = f, hs.URL
	orch := h.connect(t, "/mcp", orchToken, nil, "2025-11-25")
	if res := callIn(t, orch, "w", "echo_anything", map[string]any{"text": "hi"}); res.IsError {
		t.Fatalf("call: %+v", res.Content)
	}
	rep := httptest.NewServer(f.WorkflowReports())
	t.Cleanup(rep.Close)
	req, _ := http.NewRequest(http.MethodPost, rep.URL, bytes.NewBufferString(`{"workflow":"w","state":"completed"}`))
	req.Header.Set("Authorization", "Bearer "+orchToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("status %d, want 503", resp.StatusCode)
	}
	if f.Workflows().Open() != 1 {
		t.Error("the workflow was closed without its receipt")
	}
}
