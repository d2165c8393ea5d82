// Command client is the MCP client under test of conformance/client.sh: the
// agent's upstream client (agent/upstream with agent/access) configured with
// one upstream at the URL the conformance suite passes as the last
// argument. It connects, lists the tools and calls each one the way the
// suite's client scenarios expect, then exits 0, or 1 with the error.
//
// When the suite's MCP_CONFORMANCE_CONTEXT carries client credentials, the
// upstream is configured for OAuth client credentials with them (the secret
// through an environment variable, as the agent configuration requires).
// It is a test harness: it must not be shipped or configured otherwise.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpready/mcpready/agent/access"
	"github.com/mcpready/mcpready/agent/config"
	"github.com/mcpready/mcpready/agent/upstream"
)

const secretEnv = "MCPREADY_CONFORMANCE_CLIENT_SECRET"

// suiteContext is the part of MCP_CONFORMANCE_CONTEXT the harness reads.
type suiteContext struct {
	ClientID     string `json:"client_id"`
	ClientSecret string `json:"client_secret"`
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
	if sc.ClientID != "" && sc.ClientSecret != "" {
		if err := os.Setenv(secretEnv, sc.ClientSecret); err != nil {
			return err
		}
		up.OAuth = &config.OAuth{Grant: config.GrantClientCredentials, ClientID: sc.ClientID, ClientSecretEnv: secretEnv}
	}
	if _, err := config.New(config.File{Upstreams: []config.Upstream{up}}); err != nil {
		return err
	}
	pool := upstream.NewPool(upstream.Options{
		Resolve: func(t upstream.Target) (config.Upstream, bool) { return up, t.Server == up.Name },
		Access:  access.New(access.Options{}),
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
	for _, t := range tools {
		args := arguments[t.Name]
		if args == nil {
			args = map[string]any{}
		}
		if _, err := s.CallTool(ctx, &mcp.CallToolParams{Name: t.Name, Arguments: args}); err != nil {
			return fmt.Errorf("tools/call %s: %w", t.Name, err)
		}
	}
	return nil
}
