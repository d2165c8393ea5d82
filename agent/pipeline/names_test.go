package pipeline

import (
	"context"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/protobuf/proto"

	"github.com/mcpready/mcpready/agent/receipt"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/readiness"
)

// A client's tool name or resource URI is copied into its receipt. A
// request body may be 4 MiB, so a few dozen calls naming a 4 MiB tool
// filled the 256 MiB spool, after which every state-changing call on the
// host was refused. Names are now bounded in receipts (distinct names
// stay distinct), and a tool name longer than any tool's is refused as
// unknown without quoting it.
func TestLongNamesBounded(t *testing.T) {
	long := strings.Repeat("x", 1<<20)
	pm := newPayment(t, payOpts{noStore: true})
	for _, name := range []string{long, "test/" + long, long + "y"} {
		res := pm.pl.Call(context.Background(), pm.st, Request{Requested: name, Tool: name,
			Caller: Caller{Name: "c", Principal: "dev"}, Arguments: []byte(`{"amount":1}`)}, pm.tr)
		refusedWith(t, res, readiness.CodeUnknownTool)
		if n := proto.Size(res.Receipt); n > 4096 {
			t.Fatalf("receipt of a %d-byte name is %d bytes", len(name), n)
		}
		if te, _ := ParseToolError(res.Answer); len(te.Reason) > 1024 {
			t.Fatalf("reason of %d bytes", len(te.Reason))
		}
	}
	if a, b := receipt.BoundName(long), receipt.BoundName(long+"y"); a == b || len(a) > receipt.MaxNameBytes {
		t.Fatalf("bounded names %d and %d bytes, equal %v", len(a), len(b), a == b)
	}
	var recs []*mcpreadyv1.Receipt
	p := New(Options{Emit: func(r *mcpreadyv1.Receipt) { recs = append(recs, r) }})
	_, _ = p.Method(context.Background(), State{}, Method{Method: "resources/read", Server: "s", Name: "s://" + long},
		func(context.Context) (mcp.Result, error) { return &mcp.ReadResourceResult{}, nil })
	if len(recs) != 1 || proto.Size(recs[0]) > 4096 || !strings.HasPrefix(recs[0].GetRequested(), "resources/read s://xxx") {
		t.Fatalf("method receipt %d bytes", proto.Size(recs[0]))
	}
}
