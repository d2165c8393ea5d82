package front

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/mcpready/mcpready/agent/config"
	"github.com/mcpready/mcpready/agent/internal/mcptest"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
)

// stdioChild makes the test binary a stdio MCP server ("kid") that writes
// its process id as a file name into the directory pidDir names, and whose
// "pid" tool answers with it.
const (
	stdioChild = "MCPREADY_FRONT_TEST_STDIO_CHILD"
	pidDir     = "MCPREADY_FRONT_TEST_PID_DIR"
)

func TestMain(m *testing.M) {
	if os.Getenv(stdioChild) == "1" {
		pid := strconv.Itoa(os.Getpid())
		if d := os.Getenv(pidDir); d != "" {
			_ = os.WriteFile(filepath.Join(d, pid), nil, 0o600)
		}
		srv := mcp.NewServer(&mcp.Implementation{Name: "kid", Version: "1"}, nil)
		mcp.AddTool(srv, &mcp.Tool{Name: "pid", Description: "Answers its process id.", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
			func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: pid}}}, nil, nil
			})
		_ = srv.Run(context.Background(), &mcp.StdioTransport{})
		os.Exit(0)
	}
	os.Exit(m.Run())
}

const opsToken = "tok-ops" // a second principal of class dev

// boundsHarness serves an HTTP upstream "web" (a go-sdk server) and a
// stdio upstream "kid" (this test binary, its children's pids written to
// the returned directory) to two principals of class dev, dev-client and
// ops-client, through a front with fopts.
func boundsHarness(t *testing.T, fopts Options) (*harness, string) {
	t.Helper()
	h := &harness{entries: map[string]*mcpreadyv1.RegistryEntry{}}
	h.up = mcptest.New(t, mcptest.Options{Name: "web", NoDefaultTools: true})
	mcp.AddTool(h.up.Server, &mcp.Tool{Name: "alpha", Description: "Tool alpha.", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil, nil
		})
	pids := t.TempDir()
	web := config.Upstream{Name: "web", URL: h.up.URL}
	kid := config.Upstream{Name: "kid", Command: []string{os.Args[0], "-test.run=^$"}, Env: map[string]string{stdioChild: "1", pidDir: pids}}
	h.enrollQualified(t, web)
	h.enrollQualified(t, kid)
	h.serve(t, fopts, []config.Principal{
		{Identity: config.Identity{Name: "dev-client", PrincipalClass: "dev"}, TokenSHA256: config.TokenDigest(devToken)},
		{Identity: config.Identity{Name: "ops-client", PrincipalClass: "dev"}, TokenSHA256: config.TokenDigest(opsToken)}}, web, kid)
	return h, pids
}

// open initializes a 2025-11-25 session on path as the holder of token.
func (h *harness) open(t *testing.T, path, token string) (*mcp.ClientSession, error) {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "ai-agent", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: h.url + path,
		HTTPClient: &http.Client{Transport: bearer{token}}, MaxRetries: -1}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err == nil {
		t.Cleanup(func() { cs.Close() })
	}
	return cs, err
}

// The overall cap on dedicated upstream sessions holds across principals
// and counts stdio children with HTTP sessions: with a total of 2 and a
// per-principal cap of 5, dev-client's HTTP session and ops-client's stdio
// child leave no room for dev-client's second, which is refused with the
// specific error, counted by scope "total", and receipted as refused.
func TestDedicatedSessionCapOverall(t *testing.T) {
	h, _ := boundsHarness(t, Options{MaxUpstreamSessions: 2, MaxUpstreamSessionsPerPrincipal: 5})
	if _, err := h.open(t, "/mcp/servers/web", devToken); err != nil {
		t.Fatal(err)
	}
	if _, err := h.open(t, "/mcp/servers/kid", opsToken); err != nil {
		t.Fatal(err)
	}
	_, err := h.open(t, "/mcp/servers/kid", devToken)
	if err == nil {
		t.Fatalf("a third dedicated session opened past the overall cap of 2 (%d held)", h.front.caps.openCount())
	}
	if !strings.Contains(err.Error(), "too many upstream sessions") || !strings.Contains(err.Error(), "limit of 2") {
		t.Fatalf("refusal does not say why: %v", err)
	}
	if n := testutil.ToFloat64(h.front.metrics.sessionsRefused.WithLabelValues("total")); n != 1 {
		t.Fatalf("overall-cap refusals counted %v, want 1", n)
	}
	if n := testutil.ToFloat64(h.front.metrics.sessionsRefused.WithLabelValues("principal")); n != 0 {
		t.Fatalf("per-principal refusals counted %v, want 0", n)
	}
	var refused []*mcpreadyv1.Receipt
	for _, r := range h.receiptsFor("initialize") {
		if r.GetOutcome() != mcpreadyv1.OutcomeClass_OUTCOME_CLASS_SUCCESS {
			refused = append(refused, r)
		}
	}
	if len(refused) != 1 || refused[0].GetOutcome() != mcpreadyv1.OutcomeClass_OUTCOME_CLASS_REFUSED ||
		!strings.Contains(refused[0].GetErrorMessage(), "too many upstream sessions") || refused[0].GetSelected().GetServerName() != "kid" {
		t.Fatalf("receipts of refused initializes: %v", refused)
	}
}

// Close ends every dedicated upstream session of live client sessions:
// the HTTP upstream sees each of the agent's sessions end (a DELETE the
// go-sdk server acts on), and every stdio child has exited (reaped).
func TestCloseEndsUpstreamSessions(t *testing.T) {
	h, pids := boundsHarness(t, Options{})
	web, err := h.open(t, "/mcp/servers/web", devToken)
	if err != nil {
		t.Fatal(err)
	}
	call(t, web, "alpha", map[string]any{})
	kid, err := h.open(t, "/mcp/servers/kid", devToken)
	if err != nil {
		t.Fatal(err)
	}
	res := call(t, kid, "pid", map[string]any{})
	pid, err := strconv.Atoi(res.Content[0].(*mcp.TextContent).Text)
	if err != nil {
		t.Fatalf("pid answer %+v", res.Content[0])
	}
	if err := syscall.Kill(pid, 0); err != nil {
		t.Fatalf("the dedicated child %d is not running before Close: %v", pid, err)
	}
	upstreamSessions := func() int {
		n := 0
		for range h.up.Server.Sessions() {
			n++
		}
		return n
	}
	if n := upstreamSessions(); n == 0 || h.front.caps.openCount() != 2 {
		t.Fatalf("before Close: %d upstream sessions, %d dedicated held", n, h.front.caps.openCount())
	}

	h.front.Close()
	alive := func() []int {
		var out []int
		ents, _ := os.ReadDir(pids)
		for _, e := range ents {
			p, _ := strconv.Atoi(e.Name())
			if err := syscall.Kill(p, 0); !errors.Is(err, syscall.ESRCH) {
				out = append(out, p)
			}
		}
		return out
	}
	deadline := time.Now().Add(10 * time.Second)
	for (upstreamSessions() != 0 || len(alive()) != 0 || h.front.caps.openCount() != 0) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n, a, o := upstreamSessions(), alive(), h.front.caps.openCount(); n != 0 || len(a) != 0 || o != 0 {
		t.Fatalf("after Close: the HTTP upstream holds %d sessions, stdio children %v still exist, %d dedicated sessions held", n, a, o)
	}
	if ents, _ := os.ReadDir(pids); len(ents) < 2 {
		t.Fatalf("only %d stdio children recorded", len(ents))
	}
}

// A session initialized after Close starts no stdio child: the agent is
// shutting down (failed before: Close left the pool opening dedicated
// sessions, each a child process nobody would close).
func TestNoChildAfterClose(t *testing.T) {
	h, pids := boundsHarness(t, Options{})
	before, _ := os.ReadDir(pids)
	h.front.Close()
	if cs, err := h.open(t, "/mcp/servers/kid", devToken); err == nil {
		cs.Close()
	}
	if after, _ := os.ReadDir(pids); len(after) != len(before) {
		t.Fatalf("%d stdio children started after Close", len(after)-len(before))
	}
	if n := h.front.caps.openCount(); n != 0 {
		t.Fatalf("%d dedicated sessions held after Close", n)
	}
}
