package upstream

import (
	"context"
	"errors"
	"net/http"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpready/mcpready/agent/config"
	"github.com/mcpready/mcpready/agent/internal/mcptest"
	"github.com/mcpready/mcpready/agent/validate"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
)

func newPool(t *testing.T, up *mcptest.Upstream) *Pool {
	t.Helper()
	p := NewPool(Options{Resolve: func(tg Target) (config.Upstream, bool) {
		if tg.Server != "t" {
			return config.Upstream{}, false
		}
		return config.Upstream{Name: "t", URL: up.URL}, true
	}})
	t.Cleanup(p.Close)
	return p
}

func TestCallAndClassify(t *testing.T) {
	up := mcptest.New(t, mcptest.Options{})
	p := newPool(t, up)
	ctx := context.Background()
	s, err := p.Shared(ctx, Target{Server: "t"})
	if err != nil {
		t.Fatal(err)
	}
	if s.ProtocolVersion() == "" {
		t.Fatal("no negotiated protocol version")
	}
	res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi"}})
	if err != nil || res.IsError {
		t.Fatalf("echo: %v %+v", err, res)
	}
	tests := []struct {
		fault   mcptest.Fault
		outcome mcpreadyv1.OutcomeClass
		check   func(*validate.Outcome) bool
	}{
		{mcptest.FaultUnauthorized, mcpreadyv1.OutcomeClass_OUTCOME_CLASS_ACCESS_NOT_READY, func(f *validate.Outcome) bool { return f.ResourceMetadata != "" }},
		{mcptest.FaultPaymentRequired, mcpreadyv1.OutcomeClass_OUTCOME_CLASS_BILLING, nil},
		{mcptest.FaultRateLimited, mcpreadyv1.OutcomeClass_OUTCOME_CLASS_RATE_LIMITED, func(f *validate.Outcome) bool { return f.RetryAfter == time.Second }},
		{mcptest.FaultServerError, mcpreadyv1.OutcomeClass_OUTCOME_CLASS_TRANSPORT_FAILURE, func(f *validate.Outcome) bool { return f.HTTPStatus == 500 }},
		{mcptest.FaultRPCError, mcpreadyv1.OutcomeClass_OUTCOME_CLASS_PROTOCOL_ERROR, func(f *validate.Outcome) bool { return f.JSONRPCCode == mcptest.RPCErrorCode }},
		{mcptest.FaultGarbage, mcpreadyv1.OutcomeClass_OUTCOME_CLASS_PROTOCOL_ERROR, nil},
		{mcptest.FaultReset, mcpreadyv1.OutcomeClass_OUTCOME_CLASS_TRANSPORT_FAILURE, func(f *validate.Outcome) bool { return f.Sent }},
		{mcptest.FaultHang, mcpreadyv1.OutcomeClass_OUTCOME_CLASS_AMBIGUOUS, func(f *validate.Outcome) bool { return f.Sent }},
	}
	for _, tt := range tests {
		up.SetFault(tt.fault, "tools/call")
		s, err := p.Shared(ctx, Target{Server: "t"})
		if err != nil {
			t.Fatalf("fault %d: reconnect: %v", tt.fault, err)
		}
		cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		_, err = s.CallTool(cctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi"}})
		cancel()
		var f *validate.Outcome
		if !errors.As(err, &f) {
			t.Fatalf("fault %d: error %v is not a *validate.Outcome", tt.fault, err)
		}
		if f.Class != tt.outcome || (tt.check != nil && !tt.check(f)) {
			t.Errorf("fault %d: got %+v, want outcome %v", tt.fault, f, tt.outcome)
		}
		up.SetFault(mcptest.FaultNone, "")
	}
	// The pool recovers once the upstream behaves again.
	s, err = p.Shared(ctx, Target{Server: "t"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "ok"}}); err != nil {
		t.Fatalf("after recovery: %v", err)
	}
}

func TestUnknownUpstream(t *testing.T) {
	up := mcptest.New(t, mcptest.Options{})
	p := newPool(t, up)
	if _, err := p.Shared(context.Background(), Target{Server: "nope"}); !errors.Is(err, ErrUnknownUpstream) {
		t.Fatalf("got %v", err)
	}
}

func TestStdioUpstream(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a server binary")
	}
	bin := filepath.Join(t.TempDir(), "everything")
	build := exec.Command("go", "build", "-o", bin, "github.com/modelcontextprotocol/go-sdk/conformance/everything-server")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	p := NewPool(Options{Resolve: func(tg Target) (config.Upstream, bool) {
		return config.Upstream{Name: tg.Server, Command: []string{bin}, Env: map[string]string{"X_TEST": "1"}}, tg.Server == "ev"
	}})
	defer p.Close()
	s, err := p.Shared(context.Background(), Target{Server: "ev"})
	if err != nil {
		t.Fatal(err)
	}
	if p.Endpoint(Target{Server: "ev"}) != "stdio:"+bin || s.ProtocolVersion() == "" {
		t.Fatalf("endpoint %q protocol %q", p.Endpoint(Target{Server: "ev"}), s.ProtocolVersion())
	}
	res, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: "test_simple_text", Arguments: map[string]any{}})
	if err != nil || res.IsError {
		t.Fatalf("stdio call: %v %+v", err, res)
	}
}

// TestDoContextWatchedWithoutGoroutine: the context Do hands to its function
// carries the call's headers and exchange and none of the caller's other
// values, and contexts derived from it (as the transport derives one per
// request to watch its cancellation) wait on the caller's cancellation
// without a goroutine each.
func TestDoContextWatchedWithoutGoroutine(t *testing.T) {
	up := mcptest.New(t, mcptest.Options{})
	s, err := newPool(t, up).Shared(context.Background(), Target{Server: "t"})
	if err != nil {
		t.Fatal(err)
	}
	type key struct{}
	parent, cancel := context.WithCancel(context.WithValue(context.Background(), key{}, "front value"))
	defer cancel()
	parent = WithHeader(parent, "Idempotency-Key", "k1")
	err = s.Do(parent, func(ctx context.Context, _ *mcp.ClientSession) error {
		if ctx.Value(key{}) != nil {
			t.Error("a value of the caller leaked")
		}
		if x, _ := ctx.Value(exchangeKey{}).(*exchange); x == nil || headersOf(ctx).Get("Idempotency-Key") != "k1" {
			t.Error("the call's exchange or headers are missing")
		}
		before := runtime.NumGoroutine()
		var stops []func() bool
		for range 50 {
			stops = append(stops, context.AfterFunc(ctx, func() {}))
		}
		if n := runtime.NumGoroutine(); n > before+5 {
			t.Errorf("%d goroutines for 50 watches of the call's context", n-before)
		}
		for _, stop := range stops {
			stop()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Do's context costs one allocation beyond the isolation of the caller's
// values, whatever the call carries (headers, a response observer) and
// with its exchange: not a value context each.
func TestDoAllocations(t *testing.T) {
	up := mcptest.New(t, mcptest.Options{})
	s, err := newPool(t, up).Shared(context.Background(), Target{Server: "t"})
	if err != nil {
		t.Fatal(err)
	}
	parent := WithResponseHeaders(WithHeader(context.Background(), "Idempotency-Key", "k1"), func(http.Header) {})
	isolation := testing.AllocsPerRun(100, func() { _ = isolate(parent) })
	var observed bool
	fn := func(ctx context.Context, _ *mcp.ClientSession) error {
		x, _ := ctx.Value(exchangeKey{}).(*exchange)
		observed = x != nil && headersOf(ctx).Get("Idempotency-Key") == "k1" && ctx.Value(responseKey{}) != nil
		return nil
	}
	if n := testing.AllocsPerRun(100, func() { _ = s.Do(parent, fn) }); n > isolation+1 {
		t.Errorf("Do: %v allocations, isolating the caller's values: %v", n, isolation)
	}
	if !observed {
		t.Error("the call's exchange, headers or response observer are missing")
	}
}

// TestAfterFuncOfIsolated: the transport's watch of a request under an
// isolated context costs what a watch of the parent itself costs, and
// fires and stops as context.AfterFunc's does.
func TestAfterFuncOfIsolated(t *testing.T) {
	parent, cancel := context.WithCancel(context.Background())
	defer cancel()
	var ctx context.Context = isolate(parent) // as a request carries it
	f := func() {}
	own := testing.AllocsPerRun(100, func() { context.AfterFunc(parent, f)() })
	if n := testing.AllocsPerRun(100, func() { afterFunc(ctx, f)() }); n > own {
		t.Errorf("watching the isolated context: %v allocations, the parent: %v", n, own)
	}
	fired := make(chan struct{})
	stop := afterFunc(ctx, func() { close(fired) })
	if !afterFunc(ctx, f)() {
		t.Error("a watch not fired did not stop")
	}
	cancel()
	<-fired
	if stop() {
		t.Error("a fired watch stopped")
	}
}
