package receipt_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/protobuf/proto"

	"github.com/mcpready/mcpready/agent/circuit"
	"github.com/mcpready/mcpready/agent/config"
	"github.com/mcpready/mcpready/agent/decide"
	"github.com/mcpready/mcpready/agent/internal/mcptest"
	"github.com/mcpready/mcpready/agent/pipeline"
	"github.com/mcpready/mcpready/agent/upstream"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
)

// transport is a pipeline.Transport over a real upstream pool.
type transport struct{ pool *upstream.Pool }

func (tr transport) Dial(ctx context.Context, t upstream.Target) (*upstream.Session, error) {
	return tr.pool.Shared(ctx, t)
}

func (tr transport) Call(ctx context.Context, up *upstream.Session, params *mcp.CallToolParams) (upstream.Result, any, error) {
	res, err := up.Call(ctx, params)
	return res, nil, err
}

func (transport) Approve(context.Context, decide.Route) (bool, any, error) { return true, nil, nil }

// An upstream that echoes an argument secret back, in a JSON-RPC error
// message and in an isError result's text: the secret is in no field of
// any receipt (the encoded receipt's bytes are searched).
func TestUpstreamErrorTextNeverInReceipt(t *testing.T) {
	const secret = "sk-live-ARGUMENT-SECRET-4242"
	up := mcptest.New(t, mcptest.Options{})
	mcptest.AddFailTool(up.Server)
	call, recs := callThrough(t, up)
	up.SetFault(mcptest.FaultEchoError, "tools/call")
	call("echo", secret)
	up.SetFault(mcptest.FaultNone, "")
	call("fail", secret)
	if len(*recs) != 2 {
		t.Fatalf("%d receipts", len(*recs))
	}
	for _, r := range *recs {
		b, err := proto.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte(secret)) || bytes.Contains(b, []byte("ARGUMENT-SECRET")) {
			t.Errorf("receipt (outcome %v) carries the upstream's echo of the argument secret; error_message %q", r.GetOutcome(), r.GetErrorMessage())
		}
		if r.GetOutcome() == mcpreadyv1.OutcomeClass_OUTCOME_CLASS_PROTOCOL_ERROR && r.GetErrorMessage() == "" {
			t.Error("the JSON-RPC error left no classified error message")
		}
	}
}

// A redirect to another origin reaches the AI agent as a structured tool
// error at the reachability layer and is receipted as a network-identity
// failure naming the pinned endpoint; the other origin sees nothing.
func TestRedirectReceipted(t *testing.T) {
	var seen atomic.Int64
	other := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { seen.Add(1) }))
	defer other.Close()
	up := mcptest.New(t, mcptest.Options{})
	up.RedirectTo(other.URL + "/mcp")
	call, recs := callThrough(t, up)
	up.SetFault(mcptest.FaultRedirect, "tools/call")
	te := call("echo", "hi")
	if te.Layer != "REACHABILITY" || !strings.Contains(te.Reason, "network identity") {
		t.Fatalf("tool error %+v", te)
	}
	if len(*recs) != 1 || seen.Load() != 0 {
		t.Fatalf("%d receipts, other origin saw %d requests", len(*recs), seen.Load())
	}
	r := (*recs)[0]
	if r.GetFailedLayer() != mcpreadyv1.ReadinessLayer_READINESS_LAYER_REACHABILITY || !strings.Contains(r.GetErrorMessage(), "network identity") ||
		r.GetSelected().GetEndpoint() != up.URL {
		t.Fatalf("receipt layer %v error %q endpoint %q", r.GetFailedLayer(), r.GetErrorMessage(), r.GetSelected().GetEndpoint())
	}
}

// callThrough returns a function calling a tool of up through a real
// pipeline (every tool read-only and admitted), and the receipts it emits.
func callThrough(t *testing.T, up *mcptest.Upstream) (func(tool, text string) pipeline.ToolError, *[]*mcpreadyv1.Receipt) {
	t.Helper()
	pool := upstream.NewPool(upstream.Options{Resolve: func(tg upstream.Target) (config.Upstream, bool) {
		return config.Upstream{Name: tg.Server, URL: tg.Endpoint}, tg.Endpoint != ""
	}})
	t.Cleanup(pool.Close)
	entries := map[string]*mcpreadyv1.RegistryEntry{}
	for _, tool := range []string{"echo", "fail"} {
		entries[tool] = &mcpreadyv1.RegistryEntry{
			Identity: &mcpreadyv1.ToolIdentity{ServerName: "test", ServerVersion: "1.0.0", ToolName: tool, Endpoint: up.URL, ProtocolVersion: "2025-11-25"},
			State:    mcpreadyv1.LifecycleState_LIFECYCLE_STATE_QUALIFIED,
		}
	}
	snap, err := decide.NewSnapshot(decide.Inputs{PolicyVersion: "1", Entries: entries, Policy: &mcpreadyv1.Policy{
		Inventory:   []string{"*"},
		Evidence:    &mcpreadyv1.EvidenceRules{OnUnknown: mcpreadyv1.UnknownEvidenceAction_UNKNOWN_EVIDENCE_ACTION_ALLOW},
		SideEffects: []*mcpreadyv1.SideEffectRule{{Match: "*", Assigned: mcpreadyv1.SideEffectClass_SIDE_EFFECT_CLASS_READ_ONLY}},
		Principals:  []*mcpreadyv1.PrincipalRule{{PrincipalClass: "dev", Allow: []string{"*"}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	recs := &[]*mcpreadyv1.Receipt{}
	pl := pipeline.New(pipeline.Options{Region: "eu", Emit: func(r *mcpreadyv1.Receipt) { mu.Lock(); *recs = append(*recs, r); mu.Unlock() }})
	st := pipeline.State{Decide: snap, Circuits: circuit.NewSet(circuit.Config{})}
	call := func(tool, text string) pipeline.ToolError {
		t.Helper()
		res := pl.Call(context.Background(), st, pipeline.Request{Requested: "test/" + tool, Tool: "test/" + tool,
			Caller: pipeline.Caller{Name: "c", Principal: "dev"}, Arguments: []byte(`{"text":"` + text + `"}`)}, transport{pool})
		if res.Answer == nil || !res.Answer.IsError {
			t.Fatalf("%s: want an error answer, got %+v", tool, res.Answer)
		}
		te, _ := pipeline.ParseToolError(res.Answer)
		return te
	}
	return call, recs
}
