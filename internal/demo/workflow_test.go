package demo

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/mcpready/mcpready/agent/front"
	"github.com/mcpready/mcpready/controlplane/aggregate"
	"github.com/mcpready/mcpready/explain"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/readiness"
	"github.com/mcpready/mcpready/sign"
)

const bobToken = "bob-orchestrator-token"

// workflowConfig: the default principal may report workflows; bob (same
// classes, its own token) may too, but only its own.
func workflowConfig() string {
	sum := sha256.Sum256([]byte(bobToken))
	return fmt.Sprintf(`defaultPrincipal:
  name: local
  principalClass: %s
  tenantClass: %s
  reportWorkflows: true
principals:
  - name: bob
    principalClass: %s
    tenantClass: %s
    reportWorkflows: true
    tokenSHA256: "sha256:%s"
`, PrincipalClass, TenantClass, PrincipalClass, TenantClass, hex.EncodeToString(sum[:]))
}

func wfConnect(t *testing.T, url, token string) *mcp.ClientSession {
	t.Helper()
	tr := &mcp.StreamableClientTransport{Endpoint: url, MaxRetries: -1}
	if token != "" {
		tr.HTTPClient = &http.Client{Transport: bearer{token, http.DefaultTransport}}
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "orchestrator"}, nil).Connect(context.Background(), tr, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// lookup calls the docs_lookup capability in workflow wf; it returns the
// answer and the receipt id the answer's _meta names.
func wfLookup(t *testing.T, cs *mcp.ClientSession, wf, query string) (*mcp.CallToolResult, string) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: CapabilityDocsLookup, Arguments: map[string]any{"query": query},
		Meta: mcp.Meta{front.MetaWorkflow: wf}})
	if err != nil {
		t.Fatal(err)
	}
	id, _ := res.Meta["mcpready.dev/receipt"].(string)
	return res, id
}

func wfReport(t *testing.T, cs *mcp.ClientSession, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "mcpready.workflow.report", Arguments: args})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func postReport(t *testing.T, agentURL, token, body string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, strings.TrimSuffix(agentURL, "/mcp")+"/workflows/report", bytes.NewBufferString(body))
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

func refusalCode(t *testing.T, res *mcp.CallToolResult) (string, string) {
	t.Helper()
	te, ok := front.ParseToolError(res)
	if !ok {
		t.Fatalf("not a structured tool error: %+v", res.Content)
	}
	return te.Code, te.Receipt
}

// TestWorkflowOutcomeEndToEnd: an orchestrator's calls through the agent
// to the demo's go-sdk servers (one answered by the fallback provider),
// its reports through the MCP tool and the HTTP endpoint, the refusals of
// foreign, unknown and repeated reports with their receipts, the workflow
// receipts shipped to the control plane referencing the stored request
// receipts, explain, and the workflow evidence the control plane folds
// from them: completion rate, tool contribution, recovery cost and
// fallback divergence. The tool that succeeded in the failed workflow is
// not counted as contributing.
func TestWorkflowOutcomeEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the whole stack")
	}
	st := startStackWith(t, StackOptions{DataDir: t.TempDir(), EvidenceWindow: 4 * time.Second, AgentConfig: workflowConfig()})
	defer st.Close()
	local, bob := wfConnect(t, st.AgentURL, ""), wfConnect(t, st.AgentURL, bobToken)

	tools, err := local.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(tools.Tools, func(x *mcp.Tool) bool { return x.Name == "mcpready.workflow.report" && x.InputSchema != nil }) {
		t.Fatal("the report tool is not listed to a principal allowed to report")
	}

	// wf-ok: a primary answer (not named as contributing), then a fallback answer.
	if res, _ := wfLookup(t, local, "wf-ok", "receipts"); res.IsError {
		t.Fatalf("primary lookup: %+v", res.Content)
	}
	res, viaFallback := wfLookup(t, local, "wf-ok", "receipts "+FailTrigger)
	if res.IsError || viaFallback == "" {
		t.Fatalf("fallback lookup: %+v (receipt %q)", res.Content, viaFallback)
	}
	// wf-bad: the tool succeeds, the workflow fails.
	if res, id := wfLookup(t, local, "wf-bad", "receipts"); res.IsError || id == "" {
		t.Fatalf("lookup in wf-bad: %+v", res.Content)
	}
	// bob may not call in, or report, local's workflow.
	res, _ = wfLookup(t, bob, "wf-bad", "receipts")
	if code, rid := refusalCode(t, res); code != string(readiness.CodeWorkflowForeign) || rid == "" {
		t.Fatalf("bob's call in wf-bad: %s (receipt %q)", code, rid)
	}
	if code, _ := refusalCode(t, wfReport(t, bob, map[string]any{"workflow": "wf-bad", "state": "completed"})); code != string(readiness.CodeWorkflowForeign) {
		t.Fatalf("bob's report of wf-bad: %s", code)
	}
	if status, body := postReport(t, st.AgentURL, bobToken, `{"workflow":"wf-bad","state":"completed"}`); status != http.StatusForbidden ||
		body["mcpreadyError"].(map[string]any)["code"] != string(readiness.CodeWorkflowForeign) {
		t.Fatalf("bob's HTTP report of wf-bad: %d %v", status, body)
	}

	// The reports: wf-ok through the tool, wf-bad through the endpoint.
	res = wfReport(t, local, map[string]any{"workflow": "wf-ok", "state": "completed", "contributed": []any{viaFallback}})
	if res.IsError {
		t.Fatalf("report of wf-ok: %+v", res.Content)
	}
	okReceipt, _ := res.StructuredContent.(map[string]any)["receipt"].(string)
	status, body := postReport(t, st.AgentURL, "", `{"workflow":"wf-bad","state":"failed"}`)
	if status != http.StatusOK || body["calls"] != float64(1) {
		t.Fatalf("HTTP report of wf-bad: %d %v", status, body)
	}
	// Bad reports: unknown, repeated, malformed, unauthenticated.
	if status, body := postReport(t, st.AgentURL, "", `{"workflow":"wf-never","state":"completed"}`); status != http.StatusNotFound ||
		body["mcpreadyError"].(map[string]any)["receipt"] == "" {
		t.Fatalf("unknown workflow: %d %v", status, body)
	}
	if code, _ := refusalCode(t, wfReport(t, local, map[string]any{"workflow": "wf-ok", "state": "failed"})); code != string(readiness.CodeWorkflowClosed) {
		t.Fatalf("second report of wf-ok: %s", code)
	}
	if status, _ := postReport(t, st.AgentURL, "", `{"workflow":"wf-ok","state":"done"}`); status != http.StatusBadRequest {
		t.Fatalf("malformed report: %d", status)
	}
	if status, _ := postReport(t, st.AgentURL, "wrong-token", `{"workflow":"wf-ok","state":"completed"}`); status != http.StatusUnauthorized {
		t.Fatalf("unauthenticated report: %d", status)
	}
	if res, _ := wfLookup(t, local, "wf-ok", "receipts"); !res.IsError {
		t.Fatal("a call in a reported workflow was admitted")
	}

	// The workflow receipt reached the control plane, chained with the
	// request receipts it references.
	conn, err := grpc.NewClient(st.ControlPlane, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rc := mcpreadyv1.NewReceiptsServiceClient(conn)
	get := func(id string) *mcpreadyv1.StoredReceipt {
		deadline := time.Now().Add(30 * time.Second)
		for {
			resp, err := rc.QueryReceipts(context.Background(), &mcpreadyv1.QueryReceiptsRequest{ReceiptId: id})
			if err == nil && len(resp.GetReceipts()) == 1 {
				return resp.GetReceipts()[0]
			}
			if time.Now().After(deadline) {
				t.Fatalf("receipt %s not stored: %v", id, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	wr := get(okReceipt)
	wf := wr.GetReceipt().GetWorkflow()
	if wf.GetEndState() != mcpreadyv1.WorkflowEndState_WORKFLOW_END_STATE_COMPLETED || len(wf.GetCalls()) != 2 || wr.GetReceipt().GetWorkflowId() != "wf-ok" {
		t.Fatalf("workflow receipt %v", wr.GetReceipt())
	}
	attempts := int32(0)
	for i, c := range wf.GetCalls() {
		req := get(c.GetReceiptId()).GetReceipt()
		if req.GetWorkflowId() != "wf-ok" || req.GetAttemptCount() != c.GetAttempts() || req.GetSelected().GetEntry() != c.GetSelected().GetEntry() {
			t.Errorf("call %d of the workflow receipt %v does not match its request receipt %v", i, c, req)
		}
		attempts += req.GetAttemptCount()
	}
	if c := wf.GetCalls()[1]; !c.GetFallback() || !c.GetContributed() || c.GetSelected().GetServerName() != ServerDocsB || wf.GetCalls()[0].GetContributed() {
		t.Errorf("calls %v", wf.GetCalls())
	}
	var words bytes.Buffer
	if err := explain.Write(&words, wr); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Workflow wf-ok of principal class", "ended completed", "through a fallback route; contributed.",
		"Fallback used: 1 of 1 contributing call(s)"} {
		if !strings.Contains(words.String(), want) {
			t.Errorf("explain lacks %q:\n%s", want, words.String())
		}
	}

	// The control plane folds both workflows into workflow evidence (all
	// of its revisions together, should the reports straddle windows).
	name := aggregate.WorkflowEvidenceName("passive", PrincipalClass, TenantClass, RegionAgent)
	var sum struct{ workflows, completed, attempts, fallback int64 }
	tools2 := map[string]*mcpreadyv1.WorkflowToolRate{}
	deadline := time.Now().Add(60 * time.Second)
	for sum.workflows < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("workflow evidence %s after 60s: %+v", name, sum)
		}
		time.Sleep(time.Second)
		h, err := st.admin.History(context.Background(), &mcpreadyv1.HistoryRequest{Kind: "Evidence", Name: name})
		if err != nil {
			continue
		}
		sum = struct{ workflows, completed, attempts, fallback int64 }{}
		clear(tools2)
		for _, rev := range h.GetRevisions() {
			v, err := sign.VerifyWithKey(rev.GetBundle(), testKeys[KeyObserver].Public())
			if err != nil {
				t.Fatal(err)
			}
			w := v.Object.Spec.(*mcpreadyv1.Evidence).GetWorkflow()
			sum.workflows += w.GetWorkflows()
			sum.completed += w.GetCompleted()
			sum.attempts += w.GetAttemptsInCompleted()
			sum.fallback += w.GetCompletedViaFallback()
			for _, tr := range w.GetTools() {
				k := tr.GetServerName()
				if tools2[k] == nil {
					tools2[k] = &mcpreadyv1.WorkflowToolRate{}
				}
				tools2[k].Calls += tr.GetCalls()
				tools2[k].Contributing += tr.GetContributing()
				tools2[k].SucceededInUnsuccessful += tr.GetSucceededInUnsuccessful()
			}
		}
	}
	if sum.workflows != 2 || sum.completed != 1 || sum.attempts != int64(attempts) || sum.fallback != 1 {
		t.Errorf("workflow figures %+v, want 2 workflows, 1 completed, %d attempts, 1 via fallback", sum, attempts)
	}
	// docs-a answered the primary call of wf-ok (not contributing) and the
	// call of the failed wf-bad (succeeded, never a contribution); docs-b
	// the contributing fallback answer.
	if a := tools2[ServerDocsA]; a.GetCalls() != 2 || a.GetContributing() != 0 || a.GetSucceededInUnsuccessful() != 1 {
		t.Errorf("docs-a %v", a)
	}
	if b := tools2[ServerDocsB]; b.GetCalls() != 1 || b.GetContributing() != 1 {
		t.Errorf("docs-b %v", b)
	}
}
