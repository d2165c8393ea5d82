package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpready/mcpready/probe"
)

// TestProbeCommand probes a real go-sdk server: the read-only tool named is
// called with the token from the file, the report is JSON with every layer,
// and the exit code says whether every measured layer is ready.
func TestProbeCommand(t *testing.T) {
	s := mcp.NewServer(&mcp.Implementation{Name: "com.example/docs", Version: "1"}, nil)
	type in struct {
		Q string `json:"q"`
	}
	called := 0
	mcp.AddTool(s, &mcp.Tool{Name: "lookup"}, func(context.Context, *mcp.CallToolRequest, in) (*mcp.CallToolResult, any, error) {
		called++
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil, nil
	})
	var auth string
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: true})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth = r.Header.Get("Authorization")
		h.ServeHTTP(w, r)
	}))
	defer ts.Close()
	tok := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tok, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runKeyCLI(t, "probe", "--url", ts.URL, "--read-only", "lookup", "--token-file", tok, "-o", "json")
	if code != exitOK {
		t.Fatalf("exit %d: %s %s", code, out, errOut)
	}
	var r probe.Report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Layers) != len(probe.Layers()) || r.Layer(probe.LayerInvocation).Status != probe.Ready || called != 1 || auth != "Bearer s3cret" {
		t.Fatalf("layers %+v called %d auth %q", r.Layers, called, auth)
	}
	if strings.Contains(out, "s3cret") {
		t.Fatal("the token is in the report")
	}
	code, out, _ = runKeyCLI(t, "probe", "--url", ts.URL)
	if code != exitOK || !strings.Contains(out, "no-read-only-tool") || !strings.Contains(out, "era 2026-07-28:") || called != 1 {
		t.Fatalf("exit %d called %d:\n%s", code, called, out)
	}
}
