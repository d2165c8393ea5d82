package upstream

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpready/mcpready/agent/config"
)

// stdioChildMarker makes the test binary act as a stdio MCP server whose
// "env" tool answers with its whole environment.
const stdioChildMarker = "MCPREADY_TEST_STDIO_CHILD"

// configChildMarker makes the test binary parse a runAs configuration
// and print the error (run as an unprivileged user by the runAs test).
const configChildMarker = "MCPREADY_TEST_CONFIG_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(stdioChildMarker) == "1" {
		srv := mcp.NewServer(&mcp.Implementation{Name: "env", Version: "1"}, nil)
		mcp.AddTool(srv, &mcp.Tool{Name: "env"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Join(os.Environ(), "\n")}}}, nil, nil
		})
		mcp.AddTool(srv, &mcp.Tool{Name: "whoami"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			wd, _ := os.Getwd()
			groups, _ := os.Getgroups()
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("%d %d %s %v", os.Getuid(), os.Getgid(), wd, groups)}}}, nil, nil
		})
		mcp.AddTool(srv, &mcp.Tool{Name: "stderr"}, func(_ context.Context, _ *mcp.CallToolRequest, in struct {
			Lines []string `json:"lines"`
		}) (*mcp.CallToolResult, any, error) {
			for _, l := range in.Lines {
				fmt.Fprintln(os.Stderr, os.ExpandEnv(l))
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "written"}}}, nil, nil
		})
		_ = srv.Run(context.Background(), &mcp.StdioTransport{})
		os.Exit(0)
	}
	if os.Getenv(configChildMarker) == "1" {
		_, err := config.Parse([]byte("upstreams: [{name: a, command: [x], runAs: {uid: 0, gid: 0}}]"))
		fmt.Println(err)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// A stdio child sees only what its configuration names (and PATH/HOME),
// never a secret of the agent's environment.
func TestStdioChildEnvironment(t *testing.T) {
	t.Setenv("MCPREADY_TEST_KEY_PASSWORD", "agent-key-password")
	t.Setenv("MCPREADY_TEST_OTHER_TOKEN", "other-upstream-token")
	t.Setenv("MCPREADY_TEST_PASSED", "named-for-the-child")
	up := config.Upstream{Name: "env", Command: []string{os.Args[0], "-test.run=^$"},
		Env:     map[string]string{stdioChildMarker: "1", "GREETING": "hello"},
		EnvFrom: map[string]string{"CHILD_TOKEN": "MCPREADY_TEST_PASSED"}}
	p := NewPool(Options{Resolve: func(Target) (config.Upstream, bool) { return up, true }})
	defer p.Close()
	s, err := p.Shared(context.Background(), Target{Server: "env"})
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: "env", Arguments: map[string]any{}})
	if err != nil || res.IsError || len(res.Content) != 1 {
		t.Fatalf("env: %v %+v", err, res)
	}
	got := map[string]string{}
	for _, kv := range strings.Split(res.Content[0].(*mcp.TextContent).Text, "\n") {
		k, v, _ := strings.Cut(kv, "=")
		got[k] = v
	}
	for _, secret := range []string{"MCPREADY_TEST_KEY_PASSWORD", "MCPREADY_TEST_OTHER_TOKEN", "MCPREADY_TEST_PASSED"} {
		if _, ok := got[secret]; ok {
			t.Errorf("child inherited %s", secret)
		}
	}
	if got["GREETING"] != "hello" || got["CHILD_TOKEN"] != "named-for-the-child" || got["PATH"] != os.Getenv("PATH") {
		t.Errorf("child environment lacks what the configuration names: GREETING=%q CHILD_TOKEN=%q", got["GREETING"], got["CHILD_TOKEN"])
	}
	for k := range got {
		switch k {
		case "PATH", "HOME", "GREETING", "CHILD_TOKEN", stdioChildMarker:
		default:
			t.Errorf("child got unnamed variable %s", k)
		}
	}
	// A variable EnvFrom names that the agent lacks fails the connection
	// without starting the child.
	up.EnvFrom = map[string]string{"X": "MCPREADY_TEST_UNSET_VARIABLE"}
	p2 := NewPool(Options{Resolve: func(Target) (config.Upstream, bool) { return up, true }})
	defer p2.Close()
	if _, err := p2.Shared(context.Background(), Target{Server: "env"}); err == nil || !strings.Contains(err.Error(), "MCPREADY_TEST_UNSET_VARIABLE") {
		t.Fatalf("unset envFrom variable: %v", err)
	}
}

// After Close the pool opens no dedicated session: no stdio child is
// started for a front session initialized while the agent shuts down
// (failed before: Open ignored Close and started a child nobody closed).
func TestOpenAfterCloseRefused(t *testing.T) {
	up := config.Upstream{Name: "env", Command: []string{os.Args[0], "-test.run=^$"}, Env: map[string]string{stdioChildMarker: "1"}}
	p := NewPool(Options{Resolve: func(Target) (config.Upstream, bool) { return up, true }})
	p.Close()
	s, err := p.Open(context.Background(), Target{Server: "env"}, nil)
	if !errors.Is(err, ErrClosed) {
		if s != nil {
			_ = s.Close()
		}
		t.Fatalf("Open after Close: %v, want ErrClosed", err)
	}
}
