package pipeline

import (
	"context"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpready/mcpready/agent/decide"
	"github.com/mcpready/mcpready/agent/internal/mcptest"
	"github.com/mcpready/mcpready/agent/upstream"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
)

// canned is a Transport whose upstream answers every call at once with
// one fixed result: its session is dialled once, for real (the pipeline
// reads its protocol version), and calls never leave the process, so the
// allocations of a call through it are the pipeline's own.
type canned struct {
	up  *upstream.Session
	res upstream.Result
}

func newCanned(t testing.TB, endpoint string) *canned {
	up, err := newFake(t).Dial(context.Background(), upstream.Target{Server: "test", Endpoint: endpoint})
	if err != nil {
		t.Fatal(err)
	}
	res := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "hi"}}}
	return &canned{up: up, res: upstream.Result{CallToolResult: res, JSON: []byte(`{"content":[{"type":"text","text":"hi"}]}`)}}
}

func (c *canned) Dial(context.Context, upstream.Target) (*upstream.Session, error) { return c.up, nil }

func (c *canned) Call(context.Context, *upstream.Session, *mcp.CallToolParams) (upstream.Result, any, error) {
	return c.res, nil, nil
}

func (c *canned) Approve(context.Context, decide.Route) (bool, any, error) { return false, nil, nil }

// maxCallAllocs bounds the allocations of a read-only tools/call answered
// on the fast path (a Later in its context) and of its Later work: the
// agent's own cost per call, which the proxy overhead benchmark measures.
const maxCallAllocs = 29

func TestCallAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts vary under the race detector")
	}
	up := mcptest.New(t, mcptest.Options{})
	pl, st, _ := setup(t, policy(), map[string]*mcpreadyv1.RegistryEntry{"a": entry("test", up.URL)})
	var recs int
	pl.opts.Emit = func(*mcpreadyv1.Receipt) { recs++ }
	tr, req := newCanned(t, up.URL), request("test/echo")
	var l Later
	ctx := WithLater(context.Background(), &l)
	n := testing.AllocsPerRun(100, func() {
		res := pl.Call(ctx, st, req, tr)
		l.Run()
		if res.Answer == nil || res.Answer.IsError || res.Receipt.GetArgumentsDigest() == "" || res.Receipt.GetResultDigest() == "" {
			t.Fatalf("answer %+v, receipt %v", res.Answer, res.Receipt)
		}
	})
	if recs == 0 {
		t.Fatal("no receipt emitted")
	}
	if n > maxCallAllocs {
		t.Errorf("%v allocations per call, want at most %d", n, maxCallAllocs)
	}
}
