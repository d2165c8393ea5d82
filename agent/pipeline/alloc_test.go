package pipeline

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

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
const maxCallAllocs = 18

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

// setDuration makes what durationpb.New makes, negative durations and the
// extremes included.
func TestSetDuration(t *testing.T) {
	for _, d := range []time.Duration{0, 1, -1, 1500 * time.Millisecond, -1500 * time.Millisecond, 30 * time.Second,
		time.Duration(math.MaxInt64), time.Duration(math.MinInt64)} {
		var x durationpb.Duration
		if got, want := setDuration(&x, d), durationpb.New(d); got != &x || !proto.Equal(got, want) {
			t.Errorf("%v: %v, want %v", d, got, want)
		}
	}
}

// The receipt records the decision's deadline, and the selected route's
// per-attempt timeout and identity, as the decision and the dialled
// session give them (the records allocated together, recordParts).
func TestReceiptRecordsSelection(t *testing.T) {
	up := mcptest.New(t, mcptest.Options{})
	pl, st, _ := setup(t, policy(), map[string]*mcpreadyv1.RegistryEntry{"a": entry("test", up.URL)})
	tr, req := newCanned(t, up.URL), request("test/echo")
	d := st.Decide.Decide(pl.request(&st, req.Caller, req.Tool, time.Now()), st.Health())
	if d.Refusal != nil || len(d.Routes) != 1 {
		t.Fatalf("decision %+v", d)
	}
	r := d.Routes[0]
	rec := pl.Call(context.Background(), st, req, tr).Receipt
	id := r.Identity
	want := &mcpreadyv1.Selection{Entry: r.Entry, Endpoint: id.GetEndpoint(), ServerName: id.GetServerName(), ServerVersion: id.GetServerVersion(),
		ToolName: id.GetToolName(), InputSchemaDigest: id.GetInputSchemaDigest(), OutputSchemaDigest: id.GetOutputSchemaDigest(),
		ProtocolVersion: tr.up.ProtocolVersion()}
	if !proto.Equal(rec.GetSelected(), want) || want.ProtocolVersion == "" {
		t.Errorf("selected %v, want %v", rec.GetSelected(), want)
	}
	if !proto.Equal(rec.GetDeadline(), durationpb.New(d.Deadline)) || !proto.Equal(rec.GetPerAttemptTimeout(), durationpb.New(r.PerAttempt)) {
		t.Errorf("deadline %v, per attempt %v; want %v, %v", rec.GetDeadline(), rec.GetPerAttemptTimeout(), d.Deadline, r.PerAttempt)
	}
}

func BenchmarkCannedCall(b *testing.B) {
	up := mcptest.New(b, mcptest.Options{})
	pl, st, _ := setup(b, policy(), map[string]*mcpreadyv1.RegistryEntry{"a": entry("test", up.URL)})
	pl.opts.Emit = func(*mcpreadyv1.Receipt) {}
	tr, req := newCanned(b, up.URL), request("test/echo")
	var l Later
	ctx := WithLater(context.Background(), &l)
	b.ReportAllocs()
	for b.Loop() {
		pl.Call(ctx, st, req, tr)
		l.Run()
	}
}

// A read-only call's receipt waits in its Later until Run, with its
// arguments' and result's digests; a second call under a Later that
// already holds one has its receipt emitted before it returns, and Run
// still emits the first.
func TestLaterHoldsReceiptWork(t *testing.T) {
	up := mcptest.New(t, mcptest.Options{})
	pl, st, out := setup(t, policy(), map[string]*mcpreadyv1.RegistryEntry{"a": entry("test", up.URL)})
	tr, req := newCanned(t, up.URL), request("test/echo")
	var l Later
	ctx := WithLater(context.Background(), &l)
	first := pl.Call(ctx, st, req, tr)
	if first.Answer == nil || !l.Pending() || len(out.recs) != 0 || first.Receipt.GetResultDigest() != "" {
		t.Fatalf("first call: answer %v, pending %v, %d receipts emitted, result digest %q", first.Answer, l.Pending(), len(out.recs), first.Receipt.GetResultDigest())
	}
	second := pl.Call(ctx, st, req, tr)
	if second.Answer == nil || len(out.recs) != 1 || out.recs[0] != second.Receipt {
		t.Fatalf("second call: answer %v, receipts %v", second.Answer, out.recs)
	}
	l.Run()
	if l.Pending() || len(out.recs) != 2 || out.recs[1] != first.Receipt {
		t.Fatalf("after Run: pending %v, receipts %v", l.Pending(), out.recs)
	}
	for _, rec := range out.recs {
		if rec.GetArgumentsDigest() == "" || rec.GetResultDigest() == "" || rec.GetEndedAt() == nil {
			t.Errorf("receipt %v", rec)
		}
	}
	l.Run() // once
	if len(out.recs) != 2 {
		t.Fatalf("Run again emitted %d receipts", len(out.recs)-2)
	}
}

// maxCallClockReadings bounds the readings of Options.Now by a call
// without budgets, costs, upstream tokens or validators: each reading
// costs about as much as an allocation, so none is made for a value no
// one uses.
const maxCallClockReadings = 6

func TestCallClockReadings(t *testing.T) {
	up := mcptest.New(t, mcptest.Options{})
	pl, st, _ := setup(t, policy(), map[string]*mcpreadyv1.RegistryEntry{"a": entry("test", up.URL)})
	var readings int
	pl.opts.Now = func() time.Time { readings++; return time.Now() }
	res := pl.Call(context.Background(), st, request("test/echo"), newCanned(t, up.URL))
	if res.Answer == nil || res.Answer.IsError {
		t.Fatalf("answer %+v", res.Answer)
	}
	if readings > maxCallClockReadings {
		t.Errorf("%d clock readings, want at most %d", readings, maxCallClockReadings)
	}
}
