package front

// Workflow reports (readiness layer 7): the orchestrator reports how a
// workflow ended through the tool mcpready.workflow.report on the
// aggregate view (/mcp), listed only to principals with reportWorkflows,
// or through WorkflowReports (POST /workflows/report on the agent's
// listener), both authenticated like every front request. Package
// workflow checks the report and records the workflow receipt.

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpready/mcpready/agent/config"
	"github.com/mcpready/mcpready/agent/pipeline"
	"github.com/mcpready/mcpready/agent/workflow"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/readiness"
)

// reportTool is the listed definition of workflow.ReportTool.
var reportTool = &mcp.Tool{
	Name: workflow.ReportTool,
	Description: "Report how a workflow ended (completed, failed or abandoned) and, optionally, which calls contributed " +
		"(receipt ids from their answers' _meta \"" + workflow.MetaReceipt + "\"; none named means every call of the workflow).",
	InputSchema: map[string]any{
		"type": "object", "additionalProperties": false, "required": []any{"workflow", "state"},
		"properties": map[string]any{
			"workflow":    map[string]any{"type": "string", "minLength": 1, "maxLength": workflow.MaxIDLen, "pattern": "^[A-Za-z0-9._:/@-]+$"},
			"state":       map[string]any{"type": "string", "enum": []any{"completed", "failed", "abandoned"}},
			"contributed": map[string]any{"type": "array", "items": map[string]any{"type": "string", "minLength": 1, "maxLength": 64}},
		},
	},
}

// reporter is id as package workflow sees it.
func reporter(id config.Identity) workflow.Principal {
	return workflow.Principal{Name: id.Name, Class: id.PrincipalClass, Tenant: id.TenantClass, MayReport: id.ReportWorkflows}
}

// report hands body to the tracker: the answer, or the refusal as a
// ToolError naming its code and receipt.
func (f *Front) report(id config.Identity, body []byte) (workflow.Answer, *pipeline.ToolError) {
	ans, rid, err := f.workflows.Report(reporter(id), body)
	if err == nil {
		return ans, nil
	}
	code := workflow.Code(err)
	if code == "" { // the Ledger's: the receipt could not be recorded
		code = readiness.CodeReceiptNotDurable
	}
	return ans, &pipeline.ToolError{Layer: "WORKFLOW", Outcome: readiness.OutcomeName(mcpreadyv1.OutcomeClass_OUTCOME_CLASS_REFUSED), Code: string(code), Reason: err.Error(), Receipt: rid}
}

// reportTool answers a call of the report tool.
func (f *Front) reportTool(id config.Identity, args json.RawMessage) *mcp.CallToolResult {
	ans, te := f.report(id, args)
	if te != nil {
		return pipeline.ErrorResult(*te)
	}
	b, _ := json.Marshal(ans)
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}, StructuredContent: ans}
}

// WorkflowReports is the HTTP endpoint of workflow reports: POST with a
// JSON report body (workflow.Report), the front's bearer authentication;
// 200 with the answer, else the ToolError body ({"mcpreadyError": ...})
// with 400 (malformed), 403 (not permitted, or another principal's
// workflow), 404 (unknown workflow), 409 (already reported) or 503 (the
// receipt could not be recorded). 404 for every request when the front
// tracks no workflows.
func (f *Front) WorkflowReports() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if f.workflows == nil {
			http.NotFound(w, r)
			return
		}
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			http.Error(w, "workflow reports are POSTed", http.StatusMethodNotAllowed)
			return
		}
		if f.fromElsewhere(w, r) {
			return
		}
		id, ok := f.authenticated(w, r)
		if !ok {
			return
		}
		_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(f.opts.BodyTimeout))
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, workflow.MaxReportBytes))
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			http.Error(w, "workflow report too large", http.StatusRequestEntityTooLarge)
			return
		}
		if err != nil {
			http.Error(w, "reading the workflow report: "+err.Error(), http.StatusBadRequest)
			return
		}
		ans, te := f.report(id, body)
		w.Header().Set("Content-Type", "application/json")
		if te == nil {
			_ = json.NewEncoder(w).Encode(ans)
			return
		}
		w.WriteHeader(reportStatus[readiness.Code(te.Code)])
		_ = json.NewEncoder(w).Encode(struct {
			Error *pipeline.ToolError `json:"mcpreadyError"`
		}{te})
	})
}

// reportStatus is the HTTP status of each refusal of a report.
var reportStatus = map[readiness.Code]int{
	readiness.CodeWorkflowIDInvalid: http.StatusBadRequest, readiness.CodeWorkflowReportInvalid: http.StatusBadRequest,
	readiness.CodeWorkflowReportNotPermitted: http.StatusForbidden, readiness.CodeWorkflowForeign: http.StatusForbidden,
	readiness.CodeWorkflowUnknown: http.StatusNotFound, readiness.CodeWorkflowClosed: http.StatusConflict,
	readiness.CodeReceiptNotDurable: http.StatusServiceUnavailable,
}

// Workflows is the front's workflow tracker (nil when it tracks none):
// the agent runs its idle sweep.
func (f *Front) Workflows() *workflow.Tracker { return f.workflows }
