package pipeline

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/mcpready/mcpready/agent/circuit"
	"github.com/mcpready/mcpready/agent/decide"
	"github.com/mcpready/mcpready/agent/idempotency"
	"github.com/mcpready/mcpready/agent/internal/mcptest"
	"github.com/mcpready/mcpready/agent/invoke"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/readiness"
)

// payment is a KEYED, state-changing "charge" tool whose Declaration says
// the key travels in header (or argument) and is kept for an hour.
type payment struct {
	up     *mcptest.Upstream
	ledger *mcptest.Ledger
	pl     *Pipeline
	st     State
	out    *sink
	tr     *fake
}

type payOpts struct {
	header, argument string // where the Declaration says the key travels
	undeclared       bool   // the Declaration does not declare key support
	dir              string // the store's directory ("" for a fresh one)
	noStore          bool
	approvals        []*mcpreadyv1.ApprovalRule
	rollback         bool // the entry supports rollback
	cost             *mcpreadyv1.CostRules
	unpriced         bool // the Declaration declares no price
}

func newPayment(t *testing.T, o payOpts) *payment {
	t.Helper()
	up := mcptest.New(t, mcptest.Options{})
	ledger := mcptest.NewLedger(o.header, o.argument, "")
	mcptest.AddChargeTool(up.Server, ledger)
	tool := &mcpreadyv1.DeclaredTool{Name: "charge", SideEffect: mcpreadyv1.SideEffectClass_SIDE_EFFECT_CLASS_STATE_CHANGING,
		Idempotency: mcpreadyv1.IdempotencyClass_IDEMPOTENCY_CLASS_KEYED, IdempotencyKeyHeader: o.header,
		IdempotencyKeyArgument: o.argument, IdempotencyKeyRetention: durationpb.New(time.Hour)}
	if o.undeclared {
		tool = &mcpreadyv1.DeclaredTool{Name: "charge", SideEffect: mcpreadyv1.SideEffectClass_SIDE_EFFECT_CLASS_STATE_CHANGING}
	}
	e := entry("test", up.URL)
	e.Identity.ToolName = "charge"
	e.SideEffect = mcpreadyv1.SideEffectClass_SIDE_EFFECT_CLASS_STATE_CHANGING
	p := policy()
	p.SideEffects = append(p.SideEffects, &mcpreadyv1.SideEffectRule{Match: "*/charge", Assigned: mcpreadyv1.SideEffectClass_SIDE_EFFECT_CLASS_STATE_CHANGING})
	p.Principals = append(p.Principals, &mcpreadyv1.PrincipalRule{PrincipalClass: "ops", Allow: []string{"*"}})
	p.Retry = &mcpreadyv1.RetryRules{MaxAttempts: 3, BaseBackoff: durationpb.New(time.Millisecond)}
	p.Approvals, p.Cost = o.approvals, o.cost
	pricing := &mcpreadyv1.DeclaredPricing{Amount: "0.02", Currency: "EUR"}
	if o.unpriced {
		pricing = nil
	}
	e.RollbackSupported = o.rollback
	snap, err := decide.NewSnapshot(decide.Inputs{PolicyVersion: "1", Policy: p, Entries: map[string]*mcpreadyv1.RegistryEntry{"pay": e},
		Declarations: map[string]*mcpreadyv1.Declaration{"test": {ServerName: "test", Tools: []*mcpreadyv1.DeclaredTool{tool},
			Pricing: pricing}}})
	if err != nil {
		t.Fatal(err)
	}
	out := &sink{}
	opts := Options{Region: "eu", Emit: out.emit}
	if !o.noStore {
		dir := o.dir
		if dir == "" {
			dir = t.TempDir()
		}
		keys, err := idempotency.Open(dir, idempotency.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = keys.Close() })
		opts.Keys = keys
	}
	return &payment{up: up, ledger: ledger, pl: New(opts), out: out, tr: newFake(t),
		st: State{Decide: snap, Circuits: circuit.NewSet(circuit.Config{}), Budget: invoke.NewBudget(1, 10)}}
}

func (pm *payment) call(t *testing.T, principal, key string, amount int) Result {
	t.Helper()
	req := Request{Requested: "test/charge", Tool: "test/charge", Caller: Caller{Name: "c", Principal: principal},
		Arguments: json.RawMessage(`{"amount":` + string(rune('0'+amount)) + `}`)}
	if key != "" {
		req.IdempotencyKey, req.HasKey = key, true
		req.Meta = map[string]any{idempotency.MetaKey: key}
	}
	return pm.pl.Call(context.Background(), pm.st, req, pm.tr)
}

func refusedWith(t *testing.T, res Result, code readiness.Code) {
	t.Helper()
	te, ok := ParseToolError(res.Answer)
	if !ok || te.Code != string(code) {
		t.Fatalf("answer %+v, want refusal %s", res.Answer, code)
	}
	if res.Receipt.GetOutcome() != mcpreadyv1.OutcomeClass_OUTCOME_CLASS_REFUSED {
		t.Fatalf("receipt outcome %v", res.Receipt.GetOutcome())
	}
}

// The same key with the same payload is charged once: the key travels in
// the header the Declaration names (not only in _meta), the second call is
// forwarded and recorded as a repeat, and receipts hold a keyed reference.
// Before: the key travelled only in _meta and the provider charged twice.
func TestKeyTravelsWhereDeclared(t *testing.T) {
	for _, tc := range []payOpts{{header: "Idempotency-Key"}, {argument: "key"}} {
		pm := newPayment(t, tc)
		for i := range 2 {
			res := pm.call(t, "dev", "order-42", 5)
			if res.Answer == nil || res.Answer.IsError {
				t.Fatalf("%+v call %d: %+v", tc, i, res.Answer)
			}
			ir := res.Receipt.GetIdempotency()
			if ir.GetRepeat() != (i == 1) || ir.GetScope() != "dev/test/charge" || ir.GetRetention().AsDuration() != time.Hour {
				t.Fatalf("%+v call %d: idempotency record %v", tc, i, ir)
			}
			if res.Receipt.GetCost() != "0.02 EUR" {
				t.Fatalf("receipt cost %q", res.Receipt.GetCost())
			}
			if !strings.HasPrefix(ir.GetKeyRef(), "hmac-sha256:") || strings.Contains(ir.GetKeyRef(), "order-42") || res.Receipt.GetIdempotencyKeyRef() != ir.GetKeyRef() {
				t.Fatalf("key ref %q", ir.GetKeyRef())
			}
		}
		if pm.ledger.Effects() != 1 || pm.ledger.Calls() != 2 {
			t.Fatalf("%+v: %s, want 1 effect from 2 calls", tc, pm.ledger)
		}
	}
}

// The same key with another payload, from another principal class, or
// malformed, is refused before any upstream sees it; the binding survives
// a restart of the agent.
func TestKeyReuseRefusedBeforeUpstream(t *testing.T) {
	dir := t.TempDir()
	pm := newPayment(t, payOpts{header: "Idempotency-Key", dir: dir})
	if res := pm.call(t, "dev", "order-42", 5); res.Answer.IsError {
		t.Fatalf("first call: %+v", res.Answer)
	}
	refusedWith(t, pm.call(t, "dev", "order-42", 7), readiness.CodeIdempotencyKeyReused)
	refusedWith(t, pm.call(t, "ops", "order-42", 5), readiness.CodeIdempotencyKeyReused)
	refusedWith(t, pm.call(t, "dev", strings.Repeat("k", 300), 5), readiness.CodeIdempotencyKeyInvalid)
	refusedWith(t, pm.call(t, "dev", "has space", 5), readiness.CodeIdempotencyKeyInvalid)
	if pm.ledger.Calls() != 1 || pm.ledger.Conflicts() != 0 {
		t.Fatalf("%s: the upstream saw a refused call", pm.ledger)
	}
	pm.pl.opts.Keys.Close()
	again := newPayment(t, payOpts{header: "Idempotency-Key", dir: dir})
	refusedWith(t, again.call(t, "dev", "order-42", 7), readiness.CodeIdempotencyKeyReused)
	if again.ledger.Calls() != 0 {
		t.Fatal("after restart the reused key reached the upstream")
	}
}

// A client that gave no key to a provider that declares key support gets
// one allocated: the call whose answer was lost after it took effect is
// retried with the same key and charged once. Without declared support
// the same call is not retried (and no key is made up).
func TestKeyAllocatedMakesRetrySafe(t *testing.T) {
	pm := newPayment(t, payOpts{header: "Idempotency-Key"})
	pm.up.SetFaultTimes(mcptest.FaultLostAnswer, "tools/call", 1)
	res := pm.call(t, "dev", "", 5)
	if res.Answer == nil || res.Answer.IsError {
		t.Fatalf("answer %+v (%s)", res.Answer, pm.ledger)
	}
	if ir := res.Receipt.GetIdempotency(); !ir.GetAllocated() || ir.GetKeyRef() == "" || len(ir.GetCarried()) != 1 || ir.GetCarried()[0] != "header:Idempotency-Key" {
		t.Fatalf("idempotency record %v", ir)
	}
	if res.Receipt.GetAttemptCount() != 2 || pm.ledger.Effects() != 1 || pm.ledger.Calls() != 2 {
		t.Fatalf("attempts %d, %s: want 2 attempts, 1 effect", res.Receipt.GetAttemptCount(), pm.ledger)
	}

	plain := newPayment(t, payOpts{header: "Idempotency-Key", undeclared: true})
	plain.up.SetFaultTimes(mcptest.FaultLostAnswer, "tools/call", 1)
	res = plain.call(t, "dev", "", 5)
	if res.Receipt.GetAttemptCount() != 1 || res.Receipt.GetIdempotency() != nil || plain.ledger.Calls() != 1 {
		t.Fatalf("undeclared: attempts %d, record %v, %s", res.Receipt.GetAttemptCount(), res.Receipt.GetIdempotency(), plain.ledger)
	}
	// A client key does not make it retryable either.
	plain.up.SetFaultTimes(mcptest.FaultLostAnswer, "tools/call", 1)
	if res = plain.call(t, "dev", "k-1", 5); res.Receipt.GetAttemptCount() != 1 {
		t.Fatalf("undeclared with a client key: %d attempts", res.Receipt.GetAttemptCount())
	}
}

// A header the Declaration names that is the connection's own is never
// set from a key (it would replace credentials or framing).
func TestKeyHeaderReserved(t *testing.T) {
	pm := newPayment(t, payOpts{header: "Authorization"})
	res := pm.call(t, "dev", "order-1", 5)
	if res.Answer.IsError || len(res.Receipt.GetIdempotency().GetCarried()) != 0 {
		t.Fatalf("answer %+v record %v", res.Answer, res.Receipt.GetIdempotency())
	}
}

// The decision warns about a reserved header (the key then travels in
// _meta only), so the Declaration is not silently half-applied.
func TestKeyHeaderReservedWarns(t *testing.T) {
	pm := newPayment(t, payOpts{header: "Authorization"})
	w := pm.st.Decide.Warnings()
	if len(w) != 1 || !strings.Contains(w[0], `idempotencyKeyHeader "Authorization"`) {
		t.Fatalf("warnings %q", w)
	}
}
