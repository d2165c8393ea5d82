// Command client is the MCP client under test of conformance/client.sh: the
// agent's upstream client (agent/upstream with agent/access) configured with
// one upstream at the URL the conformance suite passes as the last
// argument. It connects, lists the tools and calls each one the way the
// suite's client scenarios expect, then exits 0, or 1 with the error.
//
// For the suite's auth/* scenarios (MCP_CONFORMANCE_SCENARIO) the upstream
// is configured for OAuth: client credentials (client secret, or
// private_key_jwt with the suite's key) for auth/client-credentials-*, else
// the JWT-bearer grant of the suite's workload token for
// auth/wif-jwt-bearer, the ID-JAG grant with the suite's identity provider
// where the context names one, else
// the authorization-code flow (client ID metadata document, the suite's
// pre-registered client when MCP_CONFORMANCE_CONTEXT names one, dynamic
// registration; with DPoP for auth/dpop*), whose redirect the harness follows itself: the suite's
// authorization server approves at once. Secrets reach the configuration
// through an environment variable or a file, as the agent requires. The
// suite's authorization server issues opaque tokens, so the upstream says
// tokenVerification: unverified.
// It is a test harness: it must not be shipped or configured otherwise.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpready/mcpready/agent/access"
	"github.com/mcpready/mcpready/agent/config"
	"github.com/mcpready/mcpready/agent/upstream"
)

const secretEnv = "MCPREADY_CONFORMANCE_CLIENT_SECRET"

// The harness's redirect URL (never served: the harness reads the
// redirect itself) and client ID metadata document URL.
const (
	redirectURL = "http://localhost:3000/callback"
	metadataURL = "https://conformance-test.local/client-metadata.json"
)

// suiteContext is the part of MCP_CONFORMANCE_CONTEXT the harness reads.
type suiteContext struct {
	ClientID      string `json:"client_id"`
	ClientSecret  string `json:"client_secret"`
	PrivateKeyPEM string `json:"private_key_pem"`
	// auth/wif-jwt-bearer's workload identity token.
	ValidJWT string `json:"valid_jwt"`
	// The enterprise identity provider of auth/enterprise-managed-authorization
	// (auth/cross-app-access-complete-flow in 0.1.16).
	IdPClientID      string `json:"idp_client_id"`
	IdPIDToken       string `json:"idp_id_token"`
	IdPTokenEndpoint string `json:"idp_token_endpoint"`
	ToolCalls        []struct {
		Name      string         `json:"name"`
		Arguments map[string]any `json:"arguments"`
	} `json:"toolCalls"`
}

// arguments the suite's scenarios expect for the tools they offer.
var arguments = map[string]map[string]any{
	"add_numbers": {"a": 2, "b": 3},
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: client URL")
		os.Exit(2)
	}
	if err := run(os.Args[len(os.Args)-1]); err != nil {
		fmt.Fprintln(os.Stderr, "client:", err)
		os.Exit(1)
	}
}

func run(url string) error {
	up := config.Upstream{Name: "upstream", URL: url}
	var sc suiteContext
	if c := os.Getenv("MCP_CONFORMANCE_CONTEXT"); c != "" {
		if err := json.Unmarshal([]byte(c), &sc); err != nil {
			return fmt.Errorf("MCP_CONFORMANCE_CONTEXT: %w", err)
		}
	}
	scenario := os.Getenv("MCP_CONFORMANCE_SCENARIO")
	o, err := oauthFor(scenario, sc)
	if err != nil {
		return err
	}
	up.OAuth = o
	defer removeFiles()
	if _, err := config.New(config.File{Upstreams: []config.Upstream{up}}); err != nil {
		return err
	}
	pool := upstream.NewPool(upstream.Options{
		Resolve: func(t upstream.Target) (config.Upstream, bool) { return up, t.Server == up.Name },
		Access:  access.New(access.Options{Authorizer: followRedirect}),
	})
	defer pool.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Second)
	defer cancel()
	s, err := pool.Shared(ctx, upstream.Target{Server: up.Name})
	if err != nil {
		return err
	}
	tools, err := s.ListTools(ctx)
	if err != nil {
		return err
	}
	return callsFor(scenario, sc, tools, func(name string, args map[string]any) error {
		if _, err := s.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args}); err != nil {
			return fmt.Errorf("tools/call %s: %w", name, err)
		}
		return nil
	})
}

// callsFor makes the calls scenario expects after listing tools: none for
// json-schema-ref-no-deref (the listing is the test), the focal tool's
// input schema echoed for json-schema-2020-12-preservation (what the
// agent's client kept of it), the suite's toolCalls when the context names
// any (their failures are the suite's to judge), else every tool once.
func callsFor(scenario string, sc suiteContext, tools []*mcp.Tool, call func(string, map[string]any) error) error {
	switch {
	case scenario == "json-schema-ref-no-deref":
		return nil
	case scenario == "json-schema-2020-12-preservation":
		for _, t := range tools {
			if t.Name == "json_schema_2020_12_tool" {
				return call("json_schema_echo", map[string]any{"schema": t.InputSchema})
			}
		}
		return fmt.Errorf("tool json_schema_2020_12_tool not listed")
	case len(sc.ToolCalls) > 0:
		for _, tc := range sc.ToolCalls {
			if tc.Arguments == nil {
				tc.Arguments = map[string]any{}
			}
			if err := call(tc.Name, tc.Arguments); err != nil {
				fmt.Fprintln(os.Stderr, "client:", err)
			}
		}
		return nil
	}
	for _, t := range tools {
		args := arguments[t.Name]
		if args == nil {
			args = map[string]any{}
		}
		if err := call(t.Name, args); err != nil {
			return err
		}
	}
	return nil
}

// oauthFor is the upstream's OAuth settings for scenario, nil for a
// scenario without authorization.
func oauthFor(scenario string, sc suiteContext) (*config.OAuth, error) {
	if !strings.HasPrefix(scenario, "auth/") {
		return nil, nil
	}
	o := &config.OAuth{TokenVerification: config.VerifyUnverified, ClientID: sc.ClientID}
	if sc.ClientSecret != "" {
		if err := os.Setenv(secretEnv, sc.ClientSecret); err != nil {
			return nil, err
		}
		o.ClientSecretEnv = secretEnv
	}
	if sc.PrivateKeyPEM != "" {
		f, err := tempFile("key", sc.PrivateKeyPEM)
		if err != nil {
			return nil, err
		}
		o.TokenEndpointAuth, o.PrivateKeyFile = config.AuthPrivateKeyJWT, f
	}
	switch {
	case strings.HasPrefix(scenario, "auth/client-credentials"):
		o.Grant = config.GrantClientCredentials
		return o, nil
	case scenario == "auth/wif-jwt-bearer":
		f, err := tempFile("workload-token", sc.ValidJWT)
		if err != nil {
			return nil, err
		}
		o.Grant, o.TokenEndpointAuth, o.AssertionFile = config.GrantJWTBearer, config.AuthNone, f
		return o, nil
	case sc.IdPTokenEndpoint != "":
		f, err := tempFile("id-token", sc.IdPIDToken)
		if err != nil {
			return nil, err
		}
		o.Grant = config.GrantIDJAG
		o.EnterpriseIdP = &config.EnterpriseIdP{TokenEndpoint: sc.IdPTokenEndpoint, ClientID: sc.IdPClientID, IDTokenFile: f}
		return o, nil
	}
	if strings.HasPrefix(scenario, "auth/dpop") {
		o.DPoP = &config.DPoP{}
	}
	o.Grant, o.RedirectURL, o.ClientIDMetadataURL, o.DynamicRegistration = config.GrantAuthorizationCode, redirectURL, metadataURL, true
	return o, nil
}

// files are the temporary files the harness wrote.
var files []string

// tempFile writes content (a key or token of the suite's) to a new
// temporary file, as the agent reads them from files only.
func tempFile(kind, content string) (string, error) {
	f, err := os.CreateTemp("", "mcpready-conformance-"+kind+"-*")
	if err != nil {
		return "", err
	}
	defer f.Close()
	files = append(files, f.Name())
	_, err = f.WriteString(content)
	return f.Name(), err
}

func removeFiles() {
	for _, f := range files {
		_ = os.Remove(f)
	}
}

// followRedirect completes an authorization the way the suite's
// authorization server expects of a browser: it approves at once, and its
// redirect carries the code.
func followRedirect(ctx context.Context, r *access.AuthorizationRequest) (*access.AuthorizationResponse, error) {
	hc := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.URL, nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	loc, err := url.Parse(resp.Header.Get("Location"))
	if err != nil || resp.StatusCode/100 != 3 {
		return nil, fmt.Errorf("authorization endpoint: HTTP %d without a redirect", resp.StatusCode)
	}
	q := loc.Query()
	return &access.AuthorizationResponse{Code: q.Get("code"), State: q.Get("state"), Iss: q.Get("iss")}, nil
}
