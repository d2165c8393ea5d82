package front

import (
	"bytes"
	"context"
	"net/http"
	neturl "net/url"
	"slices"
	"testing"

	"golang.org/x/oauth2/clientcredentials"

	"github.com/mcpready/mcpready/agent/config"
	"github.com/mcpready/mcpready/agent/workflow"
	"github.com/mcpready/mcpready/internal/oauthtest"
)

// TestIdentityProviderWorkflowReporter: a principal authenticated by a JWT
// of the identity provider whose class is in
// identityProvider.workflowReporters may report its workflows (the report
// tool is listed to it and the HTTP endpoint takes its report); a token of
// another class may not. Before, no identity-provider principal could
// report (403 workflow_report_not_permitted for every one).
func TestIdentityProviderWorkflowReporter(t *testing.T) {
	as := oauthtest.Start(t, oauthtest.Options{Clients: []oauthtest.Client{
		{ID: "robot", Secret: "robot-secret", Claims: map[string]any{"principal_class": "dev"}},
		{ID: "alice", Secret: "alice-secret", Claims: map[string]any{"principal_class": "viewer"}},
	}})
	token := func(id, secret string) string {
		cc := clientcredentials.Config{ClientID: id, ClientSecret: secret, TokenURL: as.TokenEndpoint(), Scopes: []string{"read"},
			EndpointParams: neturl.Values{"resource": {"mcpready-agent"}}}
		tok, err := cc.Token(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return tok.AccessToken
	}
	robot, alice := token("robot", "robot-secret"), token("alice", "alice-secret")
	h := newHarness(t)
	cfg, err := config.New(config.File{Upstreams: []config.Upstream{{Name: "test", URL: h.up.URL}},
		IdentityProvider: &config.IdentityProvider{Issuer: as.Issuer, Audience: "mcpready-agent", JWKSURL: as.JWKSURL(), WorkflowReporters: []string{"dev"}}})
	if err != nil {
		t.Fatal(err)
	}
	h.serveWorkflows(t, cfg, workflow.Options{})

	rs := h.connect(t, "/mcp", robot, nil, "2025-11-25")
	if !slices.Contains(toolNames(t, rs), workflow.ReportTool) {
		t.Fatal("report tool not listed to an identity-provider principal of a reporting class")
	}
	if slices.Contains(toolNames(t, h.connect(t, "/mcp", alice, nil, "2025-11-25")), workflow.ReportTool) {
		t.Fatal("report tool listed to a class that may not report")
	}
	if res := callIn(t, rs, "wf-idp", "echo_anything", map[string]any{"text": "hi"}); res.IsError {
		t.Fatalf("call in wf-idp: %+v", res.Content)
	}
	post := func(tok string) int {
		req, _ := http.NewRequest(http.MethodPost, h.url+"/workflows/report", bytes.NewBufferString(`{"workflow":"wf-idp","state":"completed"}`))
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := post(alice); got != http.StatusForbidden {
		t.Errorf("report by a non-reporting class: %d, want 403", got)
	}
	if got := post(robot); got != http.StatusOK {
		t.Errorf("report by idp:robot: %d, want 200", got)
	}
}
