package invoke

import (
	"context"
	"errors"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/mcpready/mcpready/agent/circuit"
	"github.com/mcpready/mcpready/agent/decide"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/readiness"
)

const (
	success   = mcpreadyv1.OutcomeClass_OUTCOME_CLASS_SUCCESS
	transport = mcpreadyv1.OutcomeClass_OUTCOME_CLASS_TRANSPORT_FAILURE
	ambiguous = mcpreadyv1.OutcomeClass_OUTCOME_CLASS_AMBIGUOUS
	limited   = mcpreadyv1.OutcomeClass_OUTCOME_CLASS_RATE_LIMITED
)

func route(name string, readOnly bool) decide.Route {
	r := decide.Route{Entry: name, CircuitKey: circuit.Key("https://"+name, "t"), ReadOnly: readOnly, Retryable: readOnly,
		MaxAttempts: 1, PerAttempt: time.Second}
	if readOnly {
		r.MaxAttempts = 3
	}
	return r
}

func decision(routes ...decide.Route) decide.Decision {
	return decide.Decision{Routes: routes, Deadline: 5 * time.Second, Backoff: decide.Backoff{Base: 100 * time.Millisecond, Max: time.Second}}
}

// script returns an Attempt that answers from a per-route queue of outcomes
// (the last one repeats) and records the calls.
type script struct {
	mu    sync.Mutex
	plan  map[string][]Outcome
	calls []string
}

func (s *script) do(ctx context.Context, r decide.Route, n int) Outcome {
	s.mu.Lock()
	s.calls = append(s.calls, r.Entry)
	q := s.plan[r.Entry]
	o := q[0]
	if len(q) > 1 {
		s.plan[r.Entry] = q[1:]
	}
	s.mu.Unlock()
	if o.Err == errHang {
		<-ctx.Done()
		return Outcome{Class: mcpreadyv1.OutcomeClass_OUTCOME_CLASS_TRANSPORT_FAILURE, Sent: o.Sent, Err: ctx.Err()}
	}
	return o
}

var errHang = errors.New("hang until the deadline")

type sleeps struct {
	mu sync.Mutex
	d  []time.Duration
}

func (s *sleeps) sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	s.d = append(s.d, d)
	s.mu.Unlock()
	return ctx.Err()
}

func opts(s *sleeps) Options {
	return Options{Sleep: s.sleep, Jitter: func(n int64) int64 { return n - 1 }}
}

func fail(class mcpreadyv1.OutcomeClass, sent bool) Outcome {
	return Outcome{Class: class, Sent: sent, Err: errors.New(class.String())}
}

func TestRetryReadOnly(t *testing.T) {
	sc := &script{plan: map[string][]Outcome{"a": {fail(transport, true), fail(transport, true), {Class: success}}}}
	var sl sleeps
	res := Run(context.Background(), decision(route("a", true)), sc.do, opts(&sl))
	if res.Final.Class != success || len(res.Attempts) != 3 || !slices.Equal(readiness.ActionStrings(res.Actions), []string{"retry:a", "retry:a"}) {
		t.Fatalf("%+v", res)
	}
	// Exponential backoff with full jitter (jitter at its max here).
	if !slices.Equal(sl.d, []time.Duration{100 * time.Millisecond, 200 * time.Millisecond}) {
		t.Fatalf("backoff %v", sl.d)
	}
	for i, a := range res.Attempts {
		if a.GetNumber() != int32(i+1) || a.GetEntry() != "a" || a.GetLatency() == nil {
			t.Fatalf("attempt %d: %v", i, a)
		}
	}
	if res.Route == nil || res.Route.Entry != "a" {
		t.Fatal("route")
	}
}

func TestNeverRetryStateChanging(t *testing.T) {
	for _, o := range []Outcome{fail(transport, true), fail(limited, true), {Class: transport, Sent: true, HTTPStatus: 500}} {
		sc := &script{plan: map[string][]Outcome{"w": {o}, "w2": {{Class: success}}}}
		res := Run(context.Background(), decision(route("w", false), route("w2", false)), sc.do, opts(&sleeps{}))
		wantFallback := o.Class == limited // 429 was refused before execution
		if len(sc.calls) == 0 || sc.calls[0] != "w" || slices.Contains(readiness.ActionStrings(res.Actions), "retry:w") {
			t.Fatalf("%v: calls %v actions %v", o.Class, sc.calls, readiness.ActionStrings(res.Actions))
		}
		if got := slices.Contains(sc.calls, "w2"); got != wantFallback {
			t.Fatalf("%v (http %d): fallback %v, want %v", o.Class, o.HTTPStatus, got, wantFallback)
		}
	}
}

func TestAmbiguousTimeout(t *testing.T) {
	sc := &script{plan: map[string][]Outcome{"w": {{Sent: true, Err: errHang}}, "w2": {{Class: success}}}}
	w := route("w", false)
	w.PerAttempt = 30 * time.Millisecond
	res := Run(context.Background(), decision(w, route("w2", false)), sc.do, opts(&sleeps{}))
	if res.Final.Class != ambiguous || res.Final.Layer != mcpreadyv1.ReadinessLayer_READINESS_LAYER_INVOCATION ||
		!slices.Equal(sc.calls, []string{"w"}) || !slices.Equal(readiness.ActionStrings(res.Actions), []string{"ambiguous-no-retry"}) {
		t.Fatalf("final %v calls %v actions %v", res.Final.Class, sc.calls, readiness.ActionStrings(res.Actions))
	}
	if res.Attempts[0].GetOutcome() != ambiguous || !errors.Is(res.Final.Err, context.DeadlineExceeded) {
		t.Fatalf("attempt %v err %v", res.Attempts[0], res.Final.Err)
	}
	// Timeout before send: a plain timeout, safe to fall back.
	sc = &script{plan: map[string][]Outcome{"w": {{Sent: false, Err: errHang}}, "w2": {{Class: success}}}}
	res = Run(context.Background(), decision(w, route("w2", false)), sc.do, opts(&sleeps{}))
	if res.Final.Class != success || !slices.Equal(sc.calls, []string{"w", "w2"}) || res.Attempts[0].GetOutcome() != mcpreadyv1.OutcomeClass_OUTCOME_CLASS_TIMEOUT {
		t.Fatalf("calls %v attempts %v", sc.calls, res.Attempts)
	}
	// Keyed idempotent route: an ambiguous outcome may be retried.
	sc = &script{plan: map[string][]Outcome{"k": {{Sent: true, Err: errHang}, {Class: success}}}}
	k := route("k", false)
	k.Retryable, k.MaxAttempts, k.PerAttempt = true, 2, 30*time.Millisecond
	res = Run(context.Background(), decision(k), sc.do, opts(&sleeps{}))
	if res.Final.Class != success || len(res.Attempts) != 2 {
		t.Fatalf("keyed: %v %v", res.Final.Class, readiness.ActionStrings(res.Actions))
	}
}

func TestRetryAfter(t *testing.T) {
	ra := Outcome{Class: limited, Sent: true, RetryAfter: 2 * time.Second, HTTPStatus: 429}
	sc := &script{plan: map[string][]Outcome{"a": {ra, {Class: success}}}}
	var sl sleeps
	res := Run(context.Background(), decision(route("a", true)), sc.do, opts(&sl))
	if res.Final.Class != success || len(sl.d) != 1 || sl.d[0] < 2*time.Second || sl.d[0] > 4*time.Second {
		t.Fatalf("final %v sleeps %v", res.Final.Class, sl.d)
	}
	// A Retry-After beyond the deadline is not waited for.
	ra.RetryAfter = time.Minute
	sc = &script{plan: map[string][]Outcome{"a": {ra, {Class: success}}}}
	sl = sleeps{}
	res = Run(context.Background(), decision(route("a", true)), sc.do, opts(&sl))
	if res.Final.Class != limited || len(sl.d) != 0 || !slices.Contains(readiness.ActionStrings(res.Actions), "retry-after-exceeds-deadline") {
		t.Fatalf("final %v sleeps %v actions %v", res.Final.Class, sl.d, readiness.ActionStrings(res.Actions))
	}
	// Full jitter: proportional to the Retry-After, and to the capped backoff.
	rn := &runner{opts: Options{Jitter: func(n int64) int64 { return n / 2 }}, policy: decide.Backoff{Base: 100 * time.Millisecond, Max: time.Second}}
	if w := rn.backoff(1, time.Second); w != time.Second+500*time.Millisecond {
		t.Fatalf("retry-after jitter %v", w)
	}
	if w := rn.backoff(10, 0); w != 500*time.Millisecond {
		t.Fatalf("capped backoff %v", w)
	}
}

// An upstream's Retry-After far in the future (an HTTP date in the year
// 9999 parses to the largest duration) is a wait past the deadline, not a
// panic in the jitter or a wrapped, negative wait that retries at once.
func TestRetryAfterHuge(t *testing.T) {
	for _, d := range []time.Duration{math.MaxInt64, math.MaxInt64 / 2, math.MaxInt64 - time.Second} {
		ra := Outcome{Class: limited, Sent: true, RetryAfter: d, HTTPStatus: 503}
		sc := &script{plan: map[string][]Outcome{"a": {ra, {Class: success}}}}
		var sl sleeps
		res := Run(context.Background(), decision(route("a", true)), sc.do, Options{Sleep: sl.sleep})
		if res.Final.Class != limited || len(sl.d) != 0 || !slices.Contains(readiness.ActionStrings(res.Actions), "retry-after-exceeds-deadline") {
			t.Errorf("Retry-After %v: final %v sleeps %v actions %v", d, res.Final.Class, sl.d, readiness.ActionStrings(res.Actions))
		}
	}
}

// A policy's backoff near the largest duration doubles without wrapping
// to a negative value (whose jitter panicked).
func TestBackoffSaturates(t *testing.T) {
	for _, b := range []decide.Backoff{{Base: math.MaxInt64/2 + 1, Max: math.MaxInt64}, {Base: time.Hour, Max: math.MaxInt64}} {
		rn := &runner{opts: Options{Jitter: func(n int64) int64 { return n - 1 }}, policy: b}
		for n := 1; n < 70; n++ {
			if w := rn.backoff(n, 0); w < b.Base || w > b.Max {
				t.Fatalf("backoff %+v attempt %d: %v", b, n, w)
			}
		}
	}
}

func TestRetryBudget(t *testing.T) {
	b := NewBudget(0.1, 1)
	sc := &script{plan: map[string][]Outcome{"a": {fail(transport, true)}}}
	res := Run(context.Background(), decision(route("a", true)), sc.do, Options{Budget: b, Sleep: (&sleeps{}).sleep})
	if len(res.Attempts) != 2 || !slices.Equal(readiness.ActionStrings(res.Actions), []string{"retry:a", "retry-budget-exhausted"}) {
		t.Fatalf("attempts %d actions %v", len(res.Attempts), readiness.ActionStrings(res.Actions))
	}
	// Calls refill the bucket at the ratio: 10 calls buy one retry.
	for i := 0; i < 10; i++ {
		b.Deposit()
	}
	if !b.Withdraw() || b.Withdraw() {
		t.Fatal("refill at ratio")
	}
	if NewBudget(0, 0).Tokens() != DefaultBudgetCapacity || BudgetFromPolicy(&mcpreadyv1.RetryRules{BudgetRatio: 0.5}).ratio != 500 {
		t.Fatal("defaults")
	}
}

func TestHedging(t *testing.T) {
	var n atomic.Int32
	do := func(ctx context.Context, r decide.Route, _ int) Outcome {
		if n.Add(1) == 1 {
			<-ctx.Done() // the slow primary
			return Outcome{Class: transport, Sent: true, Err: ctx.Err()}
		}
		return Outcome{Class: success, Sent: true}
	}
	a := route("a", true)
	a.HedgeAfter = 20 * time.Millisecond
	cs := circuit.NewSet(circuit.Config{ConsecutiveFailures: 1})
	res := Run(context.Background(), decision(a), do, Options{Circuits: cs})
	if res.Final.Class != success || len(res.Attempts) != 2 || !res.Attempts[1].GetHedged() || !slices.Equal(readiness.ActionStrings(res.Actions), []string{"hedge:a"}) {
		t.Fatalf("final %v attempts %v actions %v", res.Final.Class, res.Attempts, readiness.ActionStrings(res.Actions))
	}
	// The cancelled loser is not reported as a failure.
	if cs.State(a.CircuitKey, time.Now()) != circuit.Closed {
		t.Fatal("hedge loser opened the breaker")
	}
	// Never hedge a state-changing route, even if asked.
	n.Store(0)
	w := route("w", false)
	w.HedgeAfter, w.PerAttempt = 20*time.Millisecond, 60*time.Millisecond
	res = Run(context.Background(), decision(w), do, Options{})
	if len(res.Attempts) != 1 || res.Final.Class != ambiguous || slices.Contains(readiness.ActionStrings(res.Actions), "hedge:w") {
		t.Fatalf("state-changing hedged: %v %v", res.Attempts, readiness.ActionStrings(res.Actions))
	}
	// No budget, no hedge.
	n.Store(0)
	b := NewBudget(0.1, 1)
	b.Withdraw()
	a.PerAttempt, a.MaxAttempts = 60*time.Millisecond, 1
	res = Run(context.Background(), decision(a), do, Options{Budget: b})
	if len(res.Attempts) != 1 {
		t.Fatalf("hedged without budget: %v", readiness.ActionStrings(res.Actions))
	}
}

func TestCircuit(t *testing.T) {
	cs := circuit.NewSet(circuit.Config{ConsecutiveFailures: 2, BaseEjection: time.Minute})
	sc := &script{plan: map[string][]Outcome{"a": {fail(transport, false)}, "b": {{Class: success}}}}
	d := decision(route("a", false), route("b", false))
	Run(context.Background(), d, sc.do, Options{Circuits: cs})
	Run(context.Background(), d, sc.do, Options{Circuits: cs})
	if cs.State(d.Routes[0].CircuitKey, time.Now()) != circuit.Open {
		t.Fatal("breaker did not open after 2 failures")
	}
	sc.calls = nil
	res := Run(context.Background(), d, sc.do, Options{Circuits: cs})
	if !slices.Equal(sc.calls, []string{"b"}) || !slices.Equal(readiness.ActionStrings(res.Actions), []string{"circuit-open:a", "fallback:b"}) || res.Final.Class != success {
		t.Fatalf("calls %v actions %v", sc.calls, readiness.ActionStrings(res.Actions))
	}
	// Every route open: CIRCUIT_OPEN, nothing attempted.
	res = Run(context.Background(), decision(route("a", false)), sc.do, Options{Circuits: cs})
	if res.Final.Class != mcpreadyv1.OutcomeClass_OUTCOME_CLASS_CIRCUIT_OPEN || !errors.Is(res.Final.Err, ErrNoRoute) || len(res.Attempts) != 0 || res.Route != nil {
		t.Fatalf("%+v", res)
	}
}

func TestRefusedAndApproval(t *testing.T) {
	res := Run(context.Background(), decide.Decision{Refusal: &decide.RefusalError{Step: 2, Code: readiness.CodePrincipalDenied}}, nil, Options{})
	if res.Final.Class != mcpreadyv1.OutcomeClass_OUTCOME_CLASS_REFUSED || !errors.Is(res.Final.Err, decide.ErrRefused) {
		t.Fatalf("%+v", res.Final)
	}
	// A human's "no" is never routed around, even on read-only routes.
	sc := &script{plan: map[string][]Outcome{"a": {{Class: mcpreadyv1.OutcomeClass_OUTCOME_CLASS_APPROVAL_DENIED}}, "b": {{Class: success}}}}
	res = Run(context.Background(), decision(route("a", true), route("b", true)), sc.do, Options{})
	if res.Final.Class != mcpreadyv1.OutcomeClass_OUTCOME_CLASS_APPROVAL_DENIED || !slices.Equal(sc.calls, []string{"a"}) {
		t.Fatalf("calls %v", sc.calls)
	}
}

func TestFallbackSafe(t *testing.T) {
	w, ro := route("w", false), route("r", true)
	cases := []struct {
		o    Outcome
		r    decide.Route
		want bool
	}{
		{fail(transport, false), w, true},
		{fail(transport, true), w, false},
		{Outcome{Class: transport, Sent: true, HTTPStatus: 503}, w, true},
		{Outcome{Class: transport, Sent: true, HTTPStatus: 502}, w, false},
		{fail(mcpreadyv1.OutcomeClass_OUTCOME_CLASS_ACCESS_NOT_READY, true), w, true},
		{fail(mcpreadyv1.OutcomeClass_OUTCOME_CLASS_BILLING, true), w, true},
		{Outcome{Class: mcpreadyv1.OutcomeClass_OUTCOME_CLASS_PROTOCOL_ERROR, Sent: true, JSONRPCCode: -32601}, w, true},
		{Outcome{Class: mcpreadyv1.OutcomeClass_OUTCOME_CLASS_PROTOCOL_ERROR, Sent: true, JSONRPCCode: -32603}, w, false},
		{fail(mcpreadyv1.OutcomeClass_OUTCOME_CLASS_TOOL_ERROR, true), w, false},
		{fail(ambiguous, true), w, false},
		{fail(ambiguous, true), ro, true},
		{fail(mcpreadyv1.OutcomeClass_OUTCOME_CLASS_INVALID_RESULT, true), ro, true},
		{fail(mcpreadyv1.OutcomeClass_OUTCOME_CLASS_REFUSED, false), ro, false},
	}
	for i, tc := range cases {
		if got := FallbackSafe(tc.o, &tc.r); got != tc.want {
			t.Errorf("%d %v sent=%v retryable=%v: got %v", i, tc.o.Class, tc.o.Sent, tc.r.Retryable, got)
		}
	}
}

// End to end with a real decision: fallback stays inside the approved class
// (the look-alike on another server is never called) and a state-changing
// exact tool is called once.
func TestWithDecide(t *testing.T) {
	ent := func(server, tool, ep string) *mcpreadyv1.RegistryEntry {
		return &mcpreadyv1.RegistryEntry{Identity: &mcpreadyv1.ToolIdentity{ServerName: server, ToolName: tool, Endpoint: ep},
			State: mcpreadyv1.LifecycleState_LIFECYCLE_STATE_QUALIFIED}
	}
	s, err := decide.NewSnapshot(decide.Inputs{
		Policy: &mcpreadyv1.Policy{
			Inventory:   []string{"*"},
			SideEffects: []*mcpreadyv1.SideEffectRule{{Match: "*/lookup", Assigned: mcpreadyv1.SideEffectClass_SIDE_EFFECT_CLASS_READ_ONLY}},
			Retry:       &mcpreadyv1.RetryRules{MaxAttempts: 2},
			Deadline:    durationpb.New(2 * time.Second),
			EquivalenceClasses: []*mcpreadyv1.EquivalenceClass{{Name: "lookup", FallbackAllowed: true,
				Members: []string{"a/lookup", "b/lookup"}}},
			Principals: []*mcpreadyv1.PrincipalRule{{PrincipalClass: "*", Allow: []string{"*"}}},
		},
		Entries: map[string]*mcpreadyv1.RegistryEntry{
			"a": ent("a", "lookup", "https://a"), "b": ent("b", "lookup", "https://b"),
			"evil": ent("evil", "lookup", "https://evil"), "w": ent("a", "write", "https://a"),
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	sc := &script{plan: map[string][]Outcome{"a": {fail(transport, true)}, "b": {fail(transport, true)},
		"evil": {{Class: success}}, "w": {fail(transport, true)}}}
	res := Run(context.Background(), s.Decide(decide.Request{Tool: "lookup", Now: time.Now()}, nil), sc.do, opts(&sleeps{}))
	// Two attempts (max_attempts) plus one for the fallback: the call's
	// attempts are bounded over its routes, not per route.
	if res.Final.Class != transport || slices.Contains(sc.calls, "evil") || !slices.Equal(sc.calls, []string{"a", "a", "b"}) {
		t.Fatalf("calls %v", sc.calls)
	}
	sc.calls = nil
	d := s.Decide(decide.Request{Tool: "a/write", Now: time.Now()}, nil)
	if d.Routes[0].ConsumerSideEffect != mcpreadyv1.SideEffectClass_SIDE_EFFECT_CLASS_UNKNOWN {
		t.Fatal("unknown side effect expected")
	}
	res = Run(context.Background(), d, sc.do, opts(&sleeps{}))
	if !slices.Equal(sc.calls, []string{"w"}) {
		t.Fatalf("unknown side effect retried: %v", sc.calls)
	}
}

func TestCondition(t *testing.T) {
	protocol := mcpreadyv1.OutcomeClass_OUTCOME_CLASS_PROTOCOL_ERROR
	for _, tc := range []struct {
		o    Outcome
		want decide.RetryConditions
	}{
		{Outcome{Class: transport}, decide.RetryTransport},
		{Outcome{Class: transport, HTTPStatus: 500}, decide.RetryHTTP500},
		{Outcome{Class: transport, HTTPStatus: 502}, decide.RetryHTTP502},
		{Outcome{Class: transport, HTTPStatus: 503}, decide.RetryHTTP503},
		{Outcome{Class: transport, HTTPStatus: 504}, decide.RetryHTTP504},
		{Outcome{Class: transport, HTTPStatus: 507}, decide.RetryHTTP5xxOther},
		{Outcome{Class: mcpreadyv1.OutcomeClass_OUTCOME_CLASS_TIMEOUT}, decide.RetryTimeout},
		{Outcome{Class: ambiguous, Sent: true}, decide.RetryTimeout},
		{Outcome{Class: limited, HTTPStatus: 429}, decide.RetryHTTP429},
		{Outcome{Class: protocol, JSONRPCCode: -32603}, decide.RetryJSONRPCError},
		{Outcome{Class: protocol, JSONRPCCode: -32602}, 0},
		{Outcome{Class: protocol, HTTPStatus: 404}, 0},
		{Outcome{Class: mcpreadyv1.OutcomeClass_OUTCOME_CLASS_TOOL_ERROR}, 0},
		{Outcome{Class: success}, 0},
	} {
		got := Condition(tc.o)
		if got != tc.want {
			t.Errorf("%v http %d jsonrpc %d: %v, want %v", tc.o.Class, tc.o.HTTPStatus, tc.o.JSONRPCCode, got, tc.want)
		}
		// The default set is exactly the transient outcomes.
		if def := decide.RetryConditions(0).Has(got); def != Transient(tc.o) {
			t.Errorf("%v http %d: default set %v, Transient %v", tc.o.Class, tc.o.HTTPStatus, def, Transient(tc.o))
		}
	}
}

// Retries follow the route's conditions, and the side-effect invariants
// hold whatever the conditions say.
func TestRetryConditions(t *testing.T) {
	h503 := Outcome{Class: transport, Sent: true, HTTPStatus: 503, Err: errors.New("503")}
	h502 := Outcome{Class: transport, Sent: true, HTTPStatus: 502, Err: errors.New("502")}
	rpc := Outcome{Class: mcpreadyv1.OutcomeClass_OUTCOME_CLASS_PROTOCOL_ERROR, Sent: true, JSONRPCCode: -32603, Err: errors.New("internal")}
	keyed := route("k", false)
	keyed.Retryable, keyed.MaxAttempts = true, 3 // state-changing, idempotency key present
	write := route("w", false)                   // state-changing, no key: not retryable
	with := func(r decide.Route, c decide.RetryConditions) decide.Route {
		r.RetryOn = c
		return r
	}
	cases := []struct {
		name    string
		r       decide.Route
		first   Outcome
		calls   int
		actions []string
	}{
		{"default retries 503", route("a", true), h503, 2, []string{"retry:a"}},
		{"default skips JSON-RPC", route("a", true), rpc, 1, nil},
		{"named 503 retried", with(route("a", true), decide.RetryHTTP503), h503, 2, []string{"retry:a"}},
		{"unnamed 502 not retried", with(route("a", true), decide.RetryHTTP503), h502, 1,
			[]string{"retry-condition-not-allowed:http-502"}},
		{"named JSON-RPC retried", with(route("a", true), decide.RetryJSONRPCError), rpc, 2, []string{"retry:a"}},
		{"keyed ambiguous with timeout", with(keyed, decide.RetryTimeout), fail(ambiguous, true), 2, []string{"retry:k"}},
		{"keyed ambiguous without timeout", with(keyed, decide.RetryHTTP503), fail(ambiguous, true), 1,
			[]string{"retry-condition-not-allowed:timeout"}},
		{"no key: never retried", with(write, decide.RetryTimeout|decide.RetryHTTP503), h503, 1, nil},
		{"no key: ambiguous final", with(write, decide.RetryTimeout), fail(ambiguous, true), 1, []string{"ambiguous-no-retry"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sc := &script{plan: map[string][]Outcome{tc.r.Entry: {tc.first, {Class: success}}}}
			res := Run(context.Background(), decision(tc.r), sc.do, opts(&sleeps{}))
			if len(sc.calls) != tc.calls || !slices.Equal(readiness.ActionStrings(res.Actions), tc.actions) {
				t.Fatalf("calls %v actions %v, want %d calls, actions %v", sc.calls, readiness.ActionStrings(res.Actions), tc.calls, tc.actions)
			}
		})
	}
}

// Approval is asked per route, before that route's first attempt: a
// fallback route that requires approval is never attempted unasked, and a
// refusal ends the call there.
func TestApprovalPerRoute(t *testing.T) {
	for _, grant := range []bool{false, true} {
		sc := &script{plan: map[string][]Outcome{"a": {{Class: transport}}, "b": {{Class: success}}}}
		a, b := route("a", true), route("b", true)
		a.MaxAttempts, b.ApprovalRequired = 1, true
		var asked []string
		approve := func(_ context.Context, r *decide.Route) (Outcome, bool) {
			asked = append(asked, r.Entry)
			return Outcome{Class: mcpreadyv1.OutcomeClass_OUTCOME_CLASS_APPROVAL_DENIED}, grant
		}
		res := Run(context.Background(), decision(a, b), sc.do, Options{Approve: approve})
		if !slices.Equal(asked, []string{"b"}) {
			t.Fatalf("grant %v: asked %v, want [b]", grant, asked)
		}
		wantCalls, wantClass := []string{"a"}, mcpreadyv1.OutcomeClass_OUTCOME_CLASS_APPROVAL_DENIED
		if grant {
			wantCalls, wantClass = []string{"a", "b"}, success
		}
		if !slices.Equal(sc.calls, wantCalls) || res.Final.Class != wantClass || res.Route.Entry != "b" {
			t.Fatalf("grant %v: calls %v final %v route %v", grant, sc.calls, res.Final.Class, res.Route.Entry)
		}
	}
	// Without an approver, a route that requires approval is not attempted.
	sc := &script{plan: map[string][]Outcome{"b": {{Class: success}}}}
	b := route("b", true)
	b.ApprovalRequired = true
	if res := Run(context.Background(), decision(b), sc.do, Options{}); len(sc.calls) != 0 || !errors.Is(res.Final.Err, ErrNoApprover) {
		t.Fatalf("no approver: calls %v final %+v", sc.calls, res.Final)
	}
}

// One call's attempts over all its routes, retries and hedges together are
// bounded by max_attempts plus one per fallback route, and every route still
// gets its first attempt. Before, each route had max_attempts of its own
// (3 routes x 3 attempts = 9).
func TestCallAttemptsBounded(t *testing.T) {
	sc := &script{plan: map[string][]Outcome{"a": {fail(transport, true)}, "b": {fail(transport, true)}, "c": {fail(transport, true)}}}
	d := decision(route("a", true), route("b", true), route("c", true))
	d.MaxAttempts = 3
	res := Run(context.Background(), d, sc.do, opts(&sleeps{}))
	if !slices.Equal(sc.calls, []string{"a", "a", "a", "b", "c"}) {
		t.Fatalf("calls %v actions %v", sc.calls, readiness.ActionStrings(res.Actions))
	}
	if !slices.Contains(readiness.ActionStrings(res.Actions), "retry-budget-exhausted:call") {
		t.Fatalf("actions %v", readiness.ActionStrings(res.Actions))
	}
}

// A route in its slow-start ramp takes only its share: the other calls go
// to the fallback, each with a slow-start action naming the skipped route.
func TestSlowStartSkipsToFallback(t *testing.T) {
	set := circuit.NewSet(circuit.Config{ConsecutiveFailures: 1, BaseEjection: time.Second, ReadmitRatio: 0.1, SlowStart: time.Hour})
	now := time.Unix(1_700_000_000, 0)
	a, b := route("a", true), route("b", true)
	set.Report(a.CircuitKey, false, now)
	now = now.Add(time.Second)
	set.Allow(a.CircuitKey, now)
	set.Report(a.CircuitKey, true, now)
	onA, skipped := 0, 0
	for range 100 {
		sc := &script{plan: map[string][]Outcome{"a": {{Class: success}}, "b": {{Class: success}}}}
		o := opts(&sleeps{})
		o.Circuits, o.Now = set, func() time.Time { return now }
		res := Run(context.Background(), decision(a, b), sc.do, o)
		if res.Route.Entry == "a" {
			onA++
		} else if slices.Contains(readiness.ActionStrings(res.Actions), "slow-start:a") {
			skipped++
		}
	}
	if onA < 5 || onA > 15 || onA+skipped != 100 {
		t.Fatalf("%d calls on the ramping route, %d skipped with slow-start", onA, skipped)
	}
}

// After a route fails in a way that says something about its health, a
// fallback sharing its failure domain is skipped (same-domain) and one in
// another domain is tried; the routes' domains are marked suspect and
// recorded. Before, the same-domain fallback was tried (and failed the
// same way).
func TestSameDomainFallbackSkipped(t *testing.T) {
	a, b, c := route("a", true), route("b", true), route("c", true)
	a.Domains, b.Domains, c.Domains = "operator:acme", "cloud:x,operator:acme", "operator:other"
	a.MaxAttempts = 1
	sc := &script{plan: map[string][]Outcome{"a": {fail(transport, true)}, "b": {{Class: success}}, "c": {{Class: success}}}}
	set := circuit.NewSet(circuit.Config{})
	o := opts(&sleeps{})
	o.Circuits = set
	res := Run(context.Background(), decision(a, b, c), sc.do, o)
	if !slices.Equal(sc.calls, []string{"a", "c"}) || res.Route.Entry != "c" {
		t.Fatalf("calls %v", sc.calls)
	}
	if !slices.Contains(readiness.ActionStrings(res.Actions), "same-domain:operator:acme") {
		t.Fatalf("actions %v", readiness.ActionStrings(res.Actions))
	}
	if !slices.Equal(res.Domains, []string{"operator:acme", "operator:other"}) || !set.Suspect("operator:acme", time.Now()) || set.Suspect("operator:other", time.Now()) {
		t.Fatalf("domains %v", res.Domains)
	}
	// A tool error says nothing about the domain: the fallback is not skipped.
	sc = &script{plan: map[string][]Outcome{"a": {{Class: mcpreadyv1.OutcomeClass_OUTCOME_CLASS_ACCESS_NOT_READY, Sent: true}}, "b": {{Class: success}}}}
	res = Run(context.Background(), decision(a, b), sc.do, opts(&sleeps{}))
	if !slices.Equal(sc.calls, []string{"a", "b"}) {
		t.Fatalf("access failure: calls %v", sc.calls)
	}
}

// The attempt's context ends at the earlier of the call's deadline and
// the route's per-attempt timeout, and either way a hang becomes TIMEOUT
// (not sent) or AMBIGUOUS (sent); cancelling Run's context cancels the
// attempt.
func TestAttemptDeadline(t *testing.T) {
	for _, c := range []struct {
		name          string
		deadline, per time.Duration
		sent          bool
		want          mcpreadyv1.OutcomeClass
	}{
		{"call deadline first, sent", 40 * time.Millisecond, time.Second, true, ambiguous},
		{"call deadline first, not sent", 40 * time.Millisecond, time.Second, false, mcpreadyv1.OutcomeClass_OUTCOME_CLASS_TIMEOUT},
		{"no per-attempt timeout", 40 * time.Millisecond, 0, true, ambiguous},
		{"per-attempt first, sent", 5 * time.Second, 40 * time.Millisecond, true, ambiguous},
		{"per-attempt first, not sent", 5 * time.Second, 40 * time.Millisecond, false, mcpreadyv1.OutcomeClass_OUTCOME_CLASS_TIMEOUT},
	} {
		w := route("w", false)
		w.PerAttempt = c.per
		d := decision(w)
		d.Deadline = c.deadline
		var left time.Duration
		do := func(ctx context.Context, _ decide.Route, _ int) Outcome {
			dl, ok := ctx.Deadline()
			if !ok {
				t.Errorf("%s: the attempt has no deadline", c.name)
			}
			left = time.Until(dl)
			<-ctx.Done()
			return Outcome{Sent: c.sent, Err: ctx.Err()}
		}
		start := time.Now()
		res := Run(context.Background(), d, do, Options{})
		if left > 40*time.Millisecond || time.Since(start) > 2*time.Second {
			t.Fatalf("%s: attempt deadline %v away, run took %v", c.name, left, time.Since(start))
		}
		if res.Final.Class != c.want || res.Attempts[0].GetOutcome() != c.want || !errors.Is(res.Final.Err, context.DeadlineExceeded) {
			t.Fatalf("%s: final %v (%v), attempt %v", c.name, res.Final.Class, res.Final.Err, res.Attempts[0].GetOutcome())
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	do := func(actx context.Context, _ decide.Route, _ int) Outcome {
		cancel()
		<-actx.Done()
		return Outcome{Class: transport, Sent: true, Err: actx.Err()}
	}
	if res := Run(ctx, decision(route("a", true)), do, opts(&sleeps{})); len(res.Attempts) != 1 || !errors.Is(res.Final.Err, context.Canceled) {
		t.Fatalf("cancelled: %d attempts, %v", len(res.Attempts), res.Final.Err)
	}
	// A parent deadline earlier than the call's bounds the attempt too.
	pctx, pcancel := context.WithTimeout(context.Background(), 40*time.Millisecond)
	defer pcancel()
	do = func(actx context.Context, _ decide.Route, _ int) Outcome {
		<-actx.Done()
		return Outcome{Sent: true, Err: actx.Err()}
	}
	if res := Run(pctx, decision(route("w", false)), do, Options{}); res.Final.Class != ambiguous {
		t.Fatalf("parent deadline: %v", res.Final.Class)
	}
}

// An attempt's StartedAt and Latency are the clock's readings as
// timestamppb.New and durationpb.New would write them, for a clock that
// moves forward or (a negative latency) back.
func TestAttemptTimes(t *testing.T) {
	for _, step := range []time.Duration{1234567891 * time.Nanosecond, -1234567891 * time.Nanosecond} {
		var mu sync.Mutex
		var read []time.Time
		at := time.Unix(1_700_000_000, 987654321)
		o := opts(&sleeps{})
		o.Now = func() time.Time {
			mu.Lock()
			defer mu.Unlock()
			at = at.Add(step)
			read = append(read, at)
			return at
		}
		res := Run(context.Background(), decision(route("a", true)), (&script{plan: map[string][]Outcome{"a": {{Class: success}}}}).do, o)
		a := res.Attempts[0]
		if err := a.GetStartedAt().CheckValid(); err != nil || !slices.ContainsFunc(read, a.GetStartedAt().AsTime().Equal) {
			t.Fatalf("step %v: started %v (%v), clock read %v", step, a.GetStartedAt(), err, read)
		}
		lat := a.GetLatency()
		if err := lat.CheckValid(); err != nil || lat.AsDuration()%step != 0 || lat.AsDuration()/step < 1 {
			t.Fatalf("step %v: latency %v (%v)", step, lat, err)
		}
		if want := durationpb.New(lat.AsDuration()); want.GetSeconds() != lat.GetSeconds() || want.GetNanos() != lat.GetNanos() {
			t.Fatalf("latency %v, durationpb.New gives %v", lat, want)
		}
	}
}

// The call's deadline is on the system clock (it becomes a context
// deadline), so it is compared with the system clock too, whatever
// Options.Now (the attempts' and breakers' clock) reads. Failed before:
// with Now an hour ahead every call timed out unattempted (rem < 0), and
// with Now behind, a Retry-After past the deadline was still waited for.
func TestDeadlineOnTheSystemClock(t *testing.T) {
	for _, skew := range []time.Duration{time.Hour, -48 * time.Hour} {
		sc := &script{plan: map[string][]Outcome{"a": {{Class: success}}}}
		o := opts(&sleeps{})
		o.Now = func() time.Time { return time.Now().Add(skew) }
		if res := Run(context.Background(), decision(route("a", true)), sc.do, o); res.Final.Class != success || len(sc.calls) != 1 {
			t.Fatalf("Now %s off the system clock: %v after calls %v", skew, res.Final.Class, sc.calls)
		}
	}
	// A Retry-After that ends after the call's deadline is not waited for,
	// with Now far behind.
	sc := &script{plan: map[string][]Outcome{"a": {{Class: limited, Sent: true, RetryAfter: time.Hour, Err: errors.New("429")}, {Class: success}}}}
	var sl sleeps
	o := opts(&sl)
	o.Now = func() time.Time { return time.Now().Add(-48 * time.Hour) }
	res := Run(context.Background(), decision(route("a", true)), sc.do, o)
	if len(sl.d) != 0 || !slices.Contains(readiness.ActionStrings(res.Actions), "retry-after-exceeds-deadline") {
		t.Fatalf("slept %v, actions %v", sl.d, readiness.ActionStrings(res.Actions))
	}
}
