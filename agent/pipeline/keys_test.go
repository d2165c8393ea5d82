package pipeline

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/mcpready/mcpready/agent/circuit"
	"github.com/mcpready/mcpready/agent/decide"
	"github.com/mcpready/mcpready/agent/idempotency"
	"github.com/mcpready/mcpready/agent/internal/mcptest"
	"github.com/mcpready/mcpready/agent/invoke"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/internal/jsonwire"
	"github.com/mcpready/mcpready/readiness"
)

// payment is a KEYED, state-changing "charge" tool whose Declaration says
// the key travels in header (or argument, or only _meta) and is kept for
// an hour.
type payment struct {
	up      *mcptest.Upstream
	ledger  *mcptest.Ledger
	pl      *Pipeline
	st      State
	out     *sink
	tr      *fake
	o       payOpts
	entries map[string]*mcpreadyv1.RegistryEntry
	// twin is the ledger of entry "pay-b" (payOpts.twin); refunds counts
	// the calls that reached "refund" (payOpts.refund).
	twin    *mcptest.Ledger
	refunds *atomic.Int32
}

type payOpts struct {
	header, argument string // where the Declaration says the key travels
	undeclared       bool   // the Declaration does not declare key support
	dir              string // the store's directory ("" for a fresh one)
	noStore          bool
	maxKeys          int // the store's MaxKeysPerCaller (0: its default)
	approvals        []*mcpreadyv1.ApprovalRule
	rollback         bool // the entry supports rollback
	dryRun           bool // the entry offers a dry run
	cost             *mcpreadyv1.CostRules
	unpriced         bool // the Declaration declares no price
	quota            *mcpreadyv1.DeclaredQuota
	twin             bool // a second entry "pay-b" of the same tool on another upstream
	refund           bool // a second keyed tool "refund" on the same upstream
	owners           []*mcpreadyv1.IncidentOwner
}

func newPayment(t *testing.T, o payOpts) *payment {
	t.Helper()
	pm := &payment{o: o, out: &sink{}, tr: newFake(t), entries: map[string]*mcpreadyv1.RegistryEntry{}}
	add := func(name, tool string) (*mcptest.Upstream, *mcptest.Ledger) {
		up := mcptest.New(t, mcptest.Options{})
		// The ledger reads the key where the Declaration says, or from
		// _meta when it names no other place.
		meta := ""
		if o.header == "" && o.argument == "" {
			meta = idempotency.MetaKey
		}
		ledger := mcptest.NewLedger(o.header, o.argument, meta)
		mcptest.AddChargeTool(up.Server, ledger)
		e := entry("test", up.URL)
		e.Identity.ToolName = tool
		e.SideEffect = mcpreadyv1.SideEffectClass_SIDE_EFFECT_CLASS_STATE_CHANGING
		e.RollbackSupported, e.DryRunSupported = o.rollback, o.dryRun
		pm.entries[name] = e
		return up, ledger
	}
	pm.up, pm.ledger = add("pay", "charge")
	if o.twin {
		_, pm.twin = add("pay-b", "charge")
	}
	if o.refund {
		pm.refunds = &atomic.Int32{}
		mcp.AddTool(pm.up.Server, &mcp.Tool{Name: "refund", Description: "Refunds."},
			func(context.Context, *mcp.CallToolRequest, mcptest.ChargeInput) (*mcp.CallToolResult, any, error) {
				pm.refunds.Add(1)
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "refunded"}}}, nil, nil
			})
		e := entry("test", pm.up.URL)
		e.Identity.ToolName = "refund"
		e.SideEffect = mcpreadyv1.SideEffectClass_SIDE_EFFECT_CLASS_STATE_CHANGING
		pm.entries["refund"] = e
	}
	opts := Options{Region: "eu", Emit: pm.out.emit}
	if !o.noStore {
		dir := o.dir
		if dir == "" {
			dir = t.TempDir()
		}
		keys, err := idempotency.Open(dir, idempotency.Options{MaxKeysPerCaller: o.maxKeys})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = keys.Close() })
		opts.Keys = keys
	}
	pm.pl = New(opts)
	pm.st = State{Decide: pm.snapshot(t, pm.entries), Circuits: circuit.NewSet(circuit.Config{}), Budget: invoke.NewBudget(1, 10)}
	return pm
}

// snapshot compiles the payment's policy and Declaration over entries.
func (pm *payment) snapshot(t *testing.T, entries map[string]*mcpreadyv1.RegistryEntry) *decide.Snapshot {
	t.Helper()
	o := pm.o
	names := []string{"charge"}
	if o.refund {
		names = append(names, "refund")
	}
	var tools []*mcpreadyv1.DeclaredTool
	for _, name := range names {
		tool := &mcpreadyv1.DeclaredTool{Name: name, SideEffect: mcpreadyv1.SideEffectClass_SIDE_EFFECT_CLASS_STATE_CHANGING,
			Idempotency: mcpreadyv1.IdempotencyClass_IDEMPOTENCY_CLASS_KEYED, IdempotencyKeyHeader: o.header,
			IdempotencyKeyArgument: o.argument, IdempotencyKeyRetention: durationpb.New(time.Hour)}
		if o.undeclared {
			tool = &mcpreadyv1.DeclaredTool{Name: name, SideEffect: mcpreadyv1.SideEffectClass_SIDE_EFFECT_CLASS_STATE_CHANGING}
		}
		tools = append(tools, tool)
	}
	p := policy()
	p.SideEffects = append(p.SideEffects, &mcpreadyv1.SideEffectRule{Match: "*/charge", Assigned: mcpreadyv1.SideEffectClass_SIDE_EFFECT_CLASS_STATE_CHANGING},
		&mcpreadyv1.SideEffectRule{Match: "*/refund", Assigned: mcpreadyv1.SideEffectClass_SIDE_EFFECT_CLASS_STATE_CHANGING})
	p.Principals = append(p.Principals, &mcpreadyv1.PrincipalRule{PrincipalClass: "ops", Allow: []string{"*"}})
	p.Retry = &mcpreadyv1.RetryRules{MaxAttempts: 3, BaseBackoff: durationpb.New(time.Millisecond)}
	p.Approvals, p.Cost, p.IncidentOwners = o.approvals, o.cost, o.owners
	pricing := &mcpreadyv1.DeclaredPricing{Amount: "0.02", Currency: "EUR"}
	if o.unpriced {
		pricing = nil
	}
	snap, err := decide.NewSnapshot(decide.Inputs{PolicyVersion: "1", Policy: p, Entries: entries,
		Declarations: map[string]*mcpreadyv1.Declaration{"test": {ServerName: "test", Tools: tools, Pricing: pricing, Quota: o.quota}}})
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

func (pm *payment) call(t *testing.T, principal, key string, amount int) Result {
	t.Helper()
	return pm.callTool(t, "test/charge", principal, key, amount)
}

func (pm *payment) callTool(t *testing.T, tool, principal, key string, amount int) Result {
	t.Helper()
	return pm.callAs(t, tool, Caller{Name: "c", Principal: principal}, key, amount)
}

func (pm *payment) callAs(t *testing.T, tool string, c Caller, key string, amount int) Result {
	t.Helper()
	req := Request{Requested: tool, Tool: tool, Caller: c,
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

// emitted returns the emitted receipt of res (refusals included).
func (pm *payment) emitted(t *testing.T, res Result) *mcpreadyv1.Receipt {
	t.Helper()
	pm.out.mu.Lock()
	defer pm.out.mu.Unlock()
	for _, r := range pm.out.recs {
		if r.GetReceiptId() == res.Receipt.GetReceiptId() {
			return r
		}
	}
	t.Fatalf("receipt %s was not emitted", res.Receipt.GetReceiptId())
	return nil
}

// A key first used for one tool is refused for another tool of the same
// principal, even with the same arguments, before the upstream sees it;
// the refusal is receipted with the key's keyed reference and the call's
// own scope.
func TestKeyReusedAcrossTools(t *testing.T) {
	pm := newPayment(t, payOpts{header: "Idempotency-Key", refund: true})
	if res := pm.call(t, "dev", "order-42", 5); res.Answer.IsError {
		t.Fatalf("charge: %+v", res.Answer)
	}
	res := pm.callTool(t, "test/refund", "dev", "order-42", 5)
	refusedWith(t, res, readiness.CodeIdempotencyKeyReused)
	rec := pm.emitted(t, res)
	if ir := rec.GetIdempotency(); ir.GetScope() != "dev/test/refund" || !strings.HasPrefix(ir.GetKeyRef(), "hmac-sha256:") || len(rec.GetAttempts()) != 0 {
		t.Fatalf("receipt idempotency %v, attempts %d", ir, len(rec.GetAttempts()))
	}
	if pm.refunds.Load() != 0 {
		t.Fatal("the refund upstream saw a call with a key bound to charge")
	}
	// Another key for refund goes through: the tool itself is admitted.
	if res := pm.callTool(t, "test/refund", "dev", "refund-1", 5); res.Answer.IsError || pm.refunds.Load() != 1 {
		t.Fatalf("refund with its own key: %+v (%d calls)", res.Answer, pm.refunds.Load())
	}
}

// For a provider that declares key support but no header or argument, the
// key travels in _meta (idempotency.MetaKey) alone, and that is where the
// provider reads it: a client's key repeated is charged once, and an
// allocated key makes a lost answer safely retryable.
func TestKeyTravelsInMeta(t *testing.T) {
	pm := newPayment(t, payOpts{})
	for range 2 {
		if res := pm.call(t, "dev", "order-42", 5); res.Answer.IsError {
			t.Fatalf("%+v", res.Answer)
		}
	}
	if pm.ledger.Effects() != 1 || pm.ledger.Calls() != 2 {
		t.Fatalf("client key: %s, want 1 effect from 2 calls", pm.ledger)
	}
	pm.up.SetFaultTimes(mcptest.FaultLostAnswer, "tools/call", 1)
	res := pm.call(t, "dev", "", 6)
	if ir := res.Receipt.GetIdempotency(); res.Answer.IsError || !ir.GetAllocated() || len(ir.GetCarried()) != 0 {
		t.Fatalf("answer %+v, record %v", res.Answer, ir)
	}
	if res.Receipt.GetAttemptCount() != 2 || pm.ledger.Effects() != 2 || pm.ledger.Calls() != 4 {
		t.Fatalf("allocated: attempts %d, %s; want 2 attempts and one more effect", res.Receipt.GetAttemptCount(), pm.ledger)
	}
}

// A repeat runs on the route that ran the key first, whatever the ranking
// says now; when that route is no longer admitted, the repeat is refused
// (idempotency_route_unavailable) rather than sent to another provider
// that never saw the key and would apply it again.
func TestKeyRepeatPinnedToFirstRoute(t *testing.T) {
	pm := newPayment(t, payOpts{header: "Idempotency-Key", twin: true})
	first := pm.call(t, "dev", "order-42", 5)
	if first.Answer.IsError || first.Route == nil {
		t.Fatalf("first: %+v", first.Answer)
	}
	other := "pay-b"
	if first.Route.Entry == "pay-b" {
		other = "pay"
	}
	for range 3 {
		if res := pm.call(t, "dev", "order-42", 5); res.Answer.IsError || res.Route.Entry != first.Route.Entry {
			t.Fatalf("repeat ran on %v, first on %s", res.Route, first.Route.Entry)
		}
	}
	if pm.ledger.Effects()+pm.twin.Effects() != 1 || pm.ledger.Calls()+pm.twin.Calls() != 4 {
		t.Fatalf("pay %s, pay-b %s: want 1 effect, 4 calls on one ledger", pm.ledger, pm.twin)
	}
	calls := pm.ledger.Calls() + pm.twin.Calls()
	pm.st.Decide = pm.snapshot(t, map[string]*mcpreadyv1.RegistryEntry{other: pm.entries[other]})
	res := pm.call(t, "dev", "order-42", 5)
	refusedWith(t, res, readiness.CodeIdempotencyRouteUnavailable)
	if rec := pm.emitted(t, res); !rec.GetIdempotency().GetRepeat() || len(rec.GetAttempts()) != 0 {
		t.Fatalf("receipt %v", rec)
	}
	if pm.ledger.Calls()+pm.twin.Calls() != calls {
		t.Fatal("the repeat reached the other route")
	}
}

// A binding that cannot be stored refuses the call (idempotency_store)
// before any upstream sees it, with a receipt: without the binding a
// reuse with another payload could not be refused later.
func TestKeyStoreFailureRefuses(t *testing.T) {
	pm := newPayment(t, payOpts{header: "Idempotency-Key"})
	if err := pm.pl.opts.Keys.Close(); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"order-42", ""} { // the client's key, an allocated one
		res := pm.call(t, "dev", key, 5)
		refusedWith(t, res, readiness.CodeIdempotencyStore)
		if rec := pm.emitted(t, res); rec.GetIdempotency().GetKeyRef() == "" || len(rec.GetAttempts()) != 0 {
			t.Fatalf("receipt %v", rec)
		}
	}
	if pm.ledger.Calls() != 0 {
		t.Fatalf("%s: a call whose key was not bound reached the upstream", pm.ledger)
	}
}

// A key is bound to the caller's tenant class as well: another tenant's
// caller of the same principal class presenting the same key with the same
// arguments is refused before any upstream sees it, not forwarded as a
// repeat (the provider would return the first tenant's result to it).
// Before: the binding's scope was principal class and tool alone, and the
// second tenant's call reached the provider as a repeat.
func TestKeyBoundToTenant(t *testing.T) {
	keyRefusedToOther(t, Caller{Name: "alice", Principal: "dev", Tenant: "acme"}, Caller{Name: "bob", Principal: "dev", Tenant: "globex"})
}

// A key is bound to the principal too: another principal of the same
// tenant and principal class presenting the same key with the same
// arguments is refused before any upstream sees it, not forwarded as a
// repeat (the provider, called with the agent's one credential, would
// return the first principal's result to it). The receipt's scope still
// names classes only: principal names are not put in receipts. Before, two
// principals of one class shared their keys.
func TestKeyBoundToPrincipal(t *testing.T) {
	keyRefusedToOther(t, Caller{Name: "alice", Principal: "dev", Tenant: "acme"}, Caller{Name: "bob", Principal: "dev", Tenant: "acme"})
}

// keyRefusedToOther: first's keyed call runs (its receipt's scope naming
// classes and tool only), other presenting the same key and arguments is
// refused before the provider, and first's own repeat is still a repeat.
func keyRefusedToOther(t *testing.T, first, other Caller) {
	t.Helper()
	pm := newPayment(t, payOpts{header: "Idempotency-Key"})
	res := pm.callAs(t, "test/charge", first, "order-42", 5)
	if res.Answer == nil || res.Answer.IsError {
		t.Fatalf("first call: %+v", res.Answer)
	}
	if sc := res.Receipt.GetIdempotency().GetScope(); sc != "acme;dev/test/charge" {
		t.Fatalf("scope %q", sc)
	}
	refusedWith(t, pm.callAs(t, "test/charge", other, "order-42", 5), readiness.CodeIdempotencyKeyReused)
	if pm.ledger.Calls() != 1 {
		t.Fatalf("%s: %s's call reached the provider", pm.ledger, other.Name)
	}
	if res := pm.callAs(t, "test/charge", first, "order-42", 5); res.Answer.IsError || !res.Receipt.GetIdempotency().GetRepeat() {
		t.Fatalf("%s's repeat: %+v %v", first.Name, res.Answer, res.Receipt.GetIdempotency())
	}
}

// A caller past its share of live keys is refused before any upstream
// sees the call, with the reason; its bound keys keep working and another
// principal class keeps its own share.
func TestKeysPastTheStoreLimit(t *testing.T) {
	pm := newPayment(t, payOpts{maxKeys: 2})
	for _, key := range []string{"k-1", "k-2"} {
		if res := pm.call(t, "dev", key, 1); res.Answer.IsError {
			t.Fatalf("%s: %+v", key, res.Answer)
		}
	}
	res := pm.call(t, "dev", "k-3", 1)
	refusedWith(t, res, readiness.CodeIdempotencyStore)
	if te, _ := ParseToolError(res.Answer); !strings.Contains(te.Reason, "live idempotency keys") || pm.ledger.Calls() != 2 {
		t.Fatalf("reason %q, upstream calls %d", te.Reason, pm.ledger.Calls())
	}
	if res := pm.call(t, "dev", "k-1", 1); res.Answer.IsError || !res.Receipt.GetIdempotency().GetRepeat() {
		t.Fatalf("bound key: %+v", res.Answer)
	}
	if res := pm.call(t, "ops", "k-4", 1); res.Answer.IsError {
		t.Fatalf("another class: %+v", res.Answer)
	}
}

// The key the agent puts in the declared argument is the only value a
// provider can read there. Go providers commonly decode their arguments
// with encoding/json (mcp-go's BindArguments), which matches an object
// key to a field ignoring case and keeps the last match; the agent writes
// the arguments with their keys sorted. A client argument
// "\u212aey" (KELVIN SIGN, sorted after "key") or "idempotencykey"
// (sorted after "idempotencyKey") was kept beside the agent's key, so
// such a provider read the client's value: a key of the client's choosing
// reached the provider unbound to the arguments, tenant and principal,
// while the receipt named the agent's. Before: the provider read
// "client-chosen"; the arguments also had a key twice, which the agent
// refuses in a client's arguments (jsonwire.RepeatedKey).
func TestKeyArgumentNotShadowedByCase(t *testing.T) {
	for _, tc := range []struct{ argument, args string }{
		{"key", `{"amount":5,"\u212aey":"client-chosen"}`},
		{"key", `{"amount":5,"KEY":"client-chosen"}`},
		{"idempotencyKey", `{"amount":5,"idempotencykey":"client-chosen"}`},
		{"idempotencyKey", `{"amount":5,"IDEMPOTENCYKEY":"client-chosen"}`},
	} {
		_, _, out := keyed{key: "agent-key"}.carry(context.Background(), decide.Route{KeyArgument: tc.argument}, nil, json.RawMessage(tc.args))
		if err := jsonwire.RepeatedKey(out); err != nil {
			t.Errorf("%s in %s: carried arguments %s: %v", tc.argument, tc.args, out, err)
		}
		var provider map[string]any // what encoding/json gives a field tagged with the argument
		field := reflect.StructOf([]reflect.StructField{{Name: "K", Type: reflect.TypeFor[string](), Tag: reflect.StructTag(`json:"` + tc.argument + `"`)}})
		v := reflect.New(field)
		if err := json.Unmarshal(out, v.Interface()); err != nil {
			t.Fatal(err)
		}
		if got := v.Elem().Field(0).String(); got != "agent-key" {
			t.Errorf("%s in %s: the provider reads %q from %s, want the agent's key", tc.argument, tc.args, got, out)
		}
		if err := json.Unmarshal(out, &provider); err != nil || provider["amount"] != float64(5) {
			t.Errorf("%s: other arguments not kept: %s", tc.argument, out)
		}
	}
}
