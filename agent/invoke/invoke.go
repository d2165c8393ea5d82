// Package invoke executes a routing decision: one end-to-end deadline,
// per-attempt timeouts derived from it, retries only on retryable routes
// (consumer read-only, or keyed idempotent with a key) and only for the
// failure conditions the route allows (Route.RetryOn: the policy's
// retryable conditions narrowed by the provider's), honouring
// Retry-After with jitter under an agent-wide retry budget, hedging only
// read-only routes, fallback to the next approved route only when the failed
// call cannot have had an effect (or the route is retryable), and outcome
// reports to the circuit breakers.
//
// Human approval is asked per route (Options.Approve), before that route's
// first attempt, so a fallback route that requires approval never runs
// unasked.
//
// It never talks to a server itself: the caller supplies an Attempt that
// performs one upstream call, and it never retries, hedges or falls back
// from a call that may have changed state: a timeout after send on such a
// call is AMBIGUOUS and final.
package invoke

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/mcpready/mcpready/agent/circuit"
	"github.com/mcpready/mcpready/agent/decide"
	"github.com/mcpready/mcpready/agent/validate"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/readiness"
)

// Attempt performs one upstream call of route r; n is the attempt number
// within the whole call (1-based). It must return promptly once ctx is done,
// set Outcome.Sent as soon as any request byte may have reached the upstream,
// and classify the outcome (validate.Classify and validate.Checker).
type Attempt func(ctx context.Context, r decide.Route, n int) Outcome

// Approve asks a human to approve route r (r.ApprovalRequired) before its
// first attempt. It returns ok to go ahead; otherwise out is the call's
// final outcome (APPROVAL_DENIED when refused or unavailable, or any
// outcome whose Result tells the caller to ask and resume later), and Run
// neither attempts r nor routes around it.
type Approve func(ctx context.Context, r *decide.Route) (out Outcome, ok bool)

// Outcome is what one attempt (or the whole call) came to: the agent's
// one failure/outcome type, defined by package validate. Result is opaque
// to invoke.
type Outcome = validate.Outcome

// Result is the outcome of Run.
type Result struct {
	// Final is the outcome returned to the AI agent.
	Final Outcome
	// Route that produced Final (nil when nothing was attempted).
	Route *decide.Route
	// Attempts, in start order, for the receipt.
	Attempts []*mcpreadyv1.Attempt
	// Actions, for the receipt, each naming the entry it concerns (see
	// readiness: retry, hedge, fallback, circuit-open, retry-budget-exhausted,
	// retry-after-exceeds-deadline, ambiguous-no-retry and
	// retry-condition-not-allowed, whose Detail names the excluded
	// condition, e.g. "http-502"). None when the first route answered on its
	// first attempt.
	Actions []*mcpreadyv1.Action
	// Domains are the failure domains of the routes attempted, in order,
	// without repeats.
	Domains []string
}

// Options are the agent-wide execution settings. Zero values are usable.
type Options struct {
	// Circuits gates and records every attempt; nil disables breakers.
	Circuits *circuit.Set
	// Budget limits retries and hedges across the agent; nil means only
	// MaxAttempts limits them.
	Budget *Budget
	// Now is the clock of the attempts' records and the breakers; nil
	// means time.Now. The call's deadline becomes a context deadline, so
	// it is kept and checked on the system clock whatever Now reads.
	Now func() time.Time
	// Sleep waits d or until ctx is done; nil means a timer.
	Sleep func(ctx context.Context, d time.Duration) error
	// Jitter returns a uniform value in [0, n); nil means math/rand/v2.
	Jitter func(n int64) int64
	// Approve is asked before the first attempt of every route that
	// requires approval, the first route and fallbacks alike. Nil approves
	// nothing: such a route ends the call APPROVAL_DENIED.
	Approve Approve
}

// ErrNoApprover is the Final.Err of a route that requires approval when
// Options.Approve is nil.
var ErrNoApprover = errors.New("invoke: approval required and no approver")

// ErrNoRoute is the Final.Err when every route was skipped (circuit open).
var ErrNoRoute = errors.New("invoke: every route's circuit is open")

type runner struct {
	opts  Options
	do    Attempt
	res   Result
	mu    sync.Mutex // guards res.Attempts and count while hedges run
	count int
	// routes is the number of routes of the decision; policy its backoff.
	routes int
	policy decide.Backoff
	// limit bounds the attempts of the call over all routes (see
	// Decision.MaxAttempts); current is the index of the route running.
	limit, current int
	// failed are the failure domains of routes that failed in a way that
	// says something about their health (transport, timeout, ambiguous).
	failed []string
	// parent is Run's context; deadline is the call's end-to-end deadline
	// (zero until the first attempted route, see started), no later than
	// parent's. ctx, the call's context (parent bounded by deadline), is
	// made only when something needs it (see callCtx): a call's single
	// attempt runs under one context of its own (see alone).
	parent   context.Context
	deadline time.Time
	ctx      context.Context
	cancel   context.CancelFunc
	// first is the record of the call's first attempt, allocated with the
	// runner: most calls make no other.
	first record
}

// Run executes d. It returns a REFUSED outcome for a refused decision.
// The end-to-end deadline starts after the first route's approval (the
// human's time is not the upstream's), and covers every later one.
func Run(parent context.Context, d decide.Decision, do Attempt, opts Options) Result {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Sleep == nil {
		opts.Sleep = sleep
	}
	if opts.Jitter == nil {
		opts.Jitter = func(n int64) int64 { return rand.Int64N(n) }
	}
	rn := &runner{opts: opts, do: do, routes: len(d.Routes), policy: d.Backoff, limit: callLimit(&d), parent: parent}
	if d.Refusal != nil {
		rn.res.Final = Outcome{Class: mcpreadyv1.OutcomeClass_OUTCOME_CLASS_REFUSED,
			Layer: mcpreadyv1.ReadinessLayer_READINESS_LAYER_REGISTRY, Err: d.Refusal}
		return rn.res
	}
	deadline := d.Deadline
	if deadline <= 0 {
		deadline = 30 * time.Second
	}
	defer rn.stop()
	if opts.Budget != nil {
		opts.Budget.Deposit()
	}
	final := Outcome{Class: mcpreadyv1.OutcomeClass_OUTCOME_CLASS_CIRCUIT_OPEN,
		Layer: mcpreadyv1.ReadinessLayer_READINESS_LAYER_INVOCATION, Err: ErrNoRoute}
	for i := range d.Routes {
		r := &d.Routes[i]
		rn.current = i
		if i > 0 {
			rn.action(readiness.ActionFallback, r.Entry, "")
		}
		var now time.Time // the breakers' time: one reading unless a human is asked
		if opts.Circuits != nil {
			now = opts.Now()
			if opts.Circuits.State(r.CircuitKey, now) == circuit.Open {
				rn.action(readiness.ActionCircuitOpen, r.Entry, "")
				continue
			}
		}
		if d := rn.sharedFailedDomain(r); d != "" {
			rn.action(readiness.ActionSameDomain, r.Entry, d)
			continue
		}
		if r.ApprovalRequired {
			actx := parent
			if !rn.deadline.IsZero() {
				actx = rn.callCtx()
			}
			out, ok := rn.approve(actx, r)
			if !ok {
				final, rn.res.Route = out, r
				break
			}
			if opts.Circuits != nil {
				now = opts.Now()
			}
		}
		if opts.Circuits != nil && !opts.Circuits.Allow(r.CircuitKey, now) {
			kind := readiness.ActionCircuitOpen
			if opts.Circuits.Ramping(r.CircuitKey, now) {
				kind = readiness.ActionSlowStart
			}
			rn.action(kind, r.Entry, "")
			continue
		}
		rn.started(deadline)
		for dom := range decide.SplitDomains(r.Domains) {
			if !slices.Contains(rn.res.Domains, dom) {
				rn.res.Domains = append(rn.res.Domains, dom)
			}
		}
		final = rn.route(r)
		rn.res.Route = r
		if healthFailure(final) {
			rn.failed = slices.AppendSeq(rn.failed, decide.SplitDomains(r.Domains))
		}
		if final.Class == mcpreadyv1.OutcomeClass_OUTCOME_CLASS_SUCCESS || !FallbackSafe(final, r) || rn.over() {
			break
		}
	}
	rn.res.Final = final
	return rn.res
}

// started starts the call's deadline, d from now, at its first attempted
// route (the first call only). Like context.WithTimeout it reads the
// system clock, and a parent deadline that comes first bounds it.
func (rn *runner) started(d time.Duration) {
	if !rn.deadline.IsZero() {
		return
	}
	rn.deadline = time.Now().Add(d)
	if dl, ok := rn.parent.Deadline(); ok && dl.Before(rn.deadline) {
		rn.deadline = dl
	}
}

// callCtx is the call's context, made at the first need: parent bounded
// by the call's deadline, cancelled when Run returns.
func (rn *runner) callCtx() context.Context {
	if rn.ctx == nil {
		rn.ctx, rn.cancel = context.WithDeadline(rn.parent, rn.deadline)
	}
	return rn.ctx
}

func (rn *runner) stop() {
	if rn.cancel != nil {
		rn.cancel()
	}
}

// over reports whether the call's context is done (cancelled, or past the
// call's deadline), whether or not it was made.
func (rn *runner) over() bool {
	if rn.ctx != nil {
		return rn.ctx.Err() != nil
	}
	return rn.parent.Err() != nil || !time.Now().Before(rn.deadline)
}

// sharedFailedDomain is a failure domain r shares with a route that failed
// earlier in the call ("" for none): such a fallback would likely fail
// the same way.
func (rn *runner) sharedFailedDomain(r *decide.Route) string {
	for d := range decide.SplitDomains(r.Domains) {
		if slices.Contains(rn.failed, d) {
			return d
		}
	}
	return ""
}

// healthFailure: the outcome says something about the route's health (the
// failures reported to its breaker).
func healthFailure(o Outcome) bool {
	switch o.Class {
	case mcpreadyv1.OutcomeClass_OUTCOME_CLASS_TRANSPORT_FAILURE, mcpreadyv1.OutcomeClass_OUTCOME_CLASS_TIMEOUT,
		mcpreadyv1.OutcomeClass_OUTCOME_CLASS_AMBIGUOUS:
		return true
	}
	return false
}

// callLimit is the most attempts one call may make over all its routes:
// the policy's maximum (else the largest route maximum) plus one for each
// fallback route.
func callLimit(d *decide.Decision) int {
	n := d.MaxAttempts
	if n <= 0 {
		for _, r := range d.Routes {
			n = max(n, r.MaxAttempts)
		}
	}
	return max(n, 1) + max(len(d.Routes)-1, 0)
}

// spare reports whether one more retry or hedge fits the call's limit
// while keeping one attempt for each route not yet tried.
func (rn *runner) spare() bool {
	rn.mu.Lock()
	defer rn.mu.Unlock()
	return rn.count+rn.routes-1-rn.current < rn.limit
}

// approve asks Options.Approve about r.
func (rn *runner) approve(ctx context.Context, r *decide.Route) (Outcome, bool) {
	if rn.opts.Approve == nil {
		return Outcome{Class: mcpreadyv1.OutcomeClass_OUTCOME_CLASS_APPROVAL_DENIED,
			Layer: mcpreadyv1.ReadinessLayer_READINESS_LAYER_INVOCATION, Err: ErrNoApprover}, false
	}
	return rn.opts.Approve(ctx, r)
}

func (rn *runner) action(kind readiness.ActionKind, entry, detail string) {
	rn.res.Actions = append(rn.res.Actions, &mcpreadyv1.Action{Kind: kind, Entry: entry, Detail: detail})
}

// route runs the attempts of one route: one, or up to MaxAttempts when the
// route is retryable and each failure is a condition the route allows.
func (rn *runner) route(r *decide.Route) Outcome {
	max := r.MaxAttempts
	if max < 1 || !r.Retryable {
		max = 1
	}
	for n := 1; ; n++ {
		out := rn.attempt(r)
		if out.Class == mcpreadyv1.OutcomeClass_OUTCOME_CLASS_SUCCESS || rn.over() {
			return out
		}
		if !r.Retryable {
			if out.Class == mcpreadyv1.OutcomeClass_OUTCOME_CLASS_AMBIGUOUS {
				rn.action(readiness.ActionAmbiguousNoRetry, r.Entry, "")
			}
			return out
		}
		if n >= max {
			return out
		}
		if c := Condition(out); !r.RetryOn.Has(c) {
			if c != 0 && r.RetryOn != 0 {
				rn.action(readiness.ActionRetryConditionNotAllowed, r.Entry, c.String())
			}
			return out
		}
		wait := rn.backoff(n, out.RetryAfter)
		if time.Now().Add(wait).After(rn.deadline) {
			rn.action(readiness.ActionRetryAfterExceedsDeadline, r.Entry, "")
			return out
		}
		if !rn.spare() {
			rn.action(readiness.ActionRetryBudgetExhausted, r.Entry, "call")
			return out
		}
		if rn.opts.Budget != nil && !rn.opts.Budget.Withdraw() {
			rn.action(readiness.ActionRetryBudgetExhausted, r.Entry, "")
			return out
		}
		rn.action(readiness.ActionRetry, r.Entry, "")
		if rn.opts.Sleep(rn.callCtx(), wait) != nil {
			return out
		}
	}
}

// backoff is the wait before retry n, with full jitter so that callers
// that failed together do not retry together: uniform in [0, exp], exp
// being exponential from the policy base and capped; after a Retry-After,
// uniform in [RA, 2×RA] (never before the upstream asked, spread over a
// window as long as the wait itself).
func (rn *runner) backoff(n int, retryAfter time.Duration) time.Duration {
	if retryAfter > 0 {
		if retryAfter >= math.MaxInt64/2 {
			return math.MaxInt64 // far in the future: past any deadline, and no jitter to overflow
		}
		return retryAfter + rn.upTo(retryAfter)
	}
	base, maxB := rn.policy.Base, rn.policy.Max
	if base <= 0 {
		base = 100 * time.Millisecond
	}
	if maxB < base {
		maxB = base
	}
	exp := base
	for i := 1; i < n && exp < maxB; i++ {
		exp = min(maxB, exp*2)
		if exp < 0 { // doubled past the largest duration
			exp = maxB
		}
	}
	return rn.upTo(exp)
}

// upTo is a uniform jitter in [0, d] (for the largest d, [0, d)).
func (rn *runner) upTo(d time.Duration) time.Duration {
	return time.Duration(rn.opts.Jitter(int64(min(d, math.MaxInt64-1)) + 1))
}

// attempt runs one attempt, hedged when the route is read-only and the
// policy enables hedging.
func (rn *runner) attempt(r *decide.Route) Outcome {
	per := r.PerAttempt
	now := rn.opts.Now()
	rem := time.Until(rn.deadline) // the deadline is on the system clock (started)
	bound := per                   // what ends the attempt first
	if per <= 0 || rem < per {
		per, bound = 0, rem // the call's deadline comes first: no deadline of the attempt's own
		if rem <= 0 {
			return rn.finish(r, rn.start(r, false, now), time.Time{}, Outcome{Class: mcpreadyv1.OutcomeClass_OUTCOME_CLASS_TIMEOUT,
				Layer: mcpreadyv1.ReadinessLayer_READINESS_LAYER_REACHABILITY, Err: context.DeadlineExceeded}, nil)
		}
	}
	if !r.ReadOnly || r.HedgeAfter <= 0 || r.HedgeAfter >= bound {
		return rn.alone(r, per, now)
	}
	return rn.hedged(rn.callCtx(), r, per)
}

// alone runs one unhedged attempt: under the call's context (with its own
// timeout per when per > 0) once that context exists, else under one
// context of its own whose deadline is the earlier of the call's and per
// from now, which is the deadline the two nested ones would have. With
// per 0 that context becomes the call's (the attempt may leave work that
// ends with the call, as before). The attempt starts at at, the
// Options.Now reading its deadline was checked against.
func (rn *runner) alone(r *decide.Route, per time.Duration, at time.Time) Outcome {
	if per <= 0 || rn.ctx != nil {
		return rn.single(rn.callCtx(), r, per, false, at)
	}
	actx, cancel := context.WithDeadline(rn.parent, minTime(rn.deadline, time.Now().Add(per)))
	defer cancel()
	return rn.run(actx, r, false, at)
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// single runs one attempt synchronously with its own per-attempt timeout
// per; with per 0 the attempt runs under ctx's own deadline, and ctx (the
// call's, cancelled when Run returns) needs no timer of its own for it: a
// synchronous attempt leaves nothing running when it returns.
func (rn *runner) single(ctx context.Context, r *decide.Route, per time.Duration, hedge bool, at time.Time) Outcome {
	actx := ctx
	if per > 0 {
		var cancel context.CancelFunc
		actx, cancel = context.WithTimeout(ctx, per)
		defer cancel()
	}
	return rn.run(actx, r, hedge, at)
}

// run runs the attempt, started at at (zero: now), under actx and
// finishes its record.
func (rn *runner) run(actx context.Context, r *decide.Route, hedge bool, at time.Time) Outcome {
	started := at
	if started.IsZero() {
		started = rn.opts.Now()
	}
	rec := rn.start(r, hedge, started)
	out := rn.do(actx, *r, int(rec.attempt.Number))
	return rn.finish(r, rec, started, out, actx)
}

// hedged starts a second attempt after HedgeAfter if the first has not
// answered; the first success wins and the other is cancelled. A hedge needs
// budget like a retry.
func (rn *runner) hedged(ctx context.Context, r *decide.Route, per time.Duration) Outcome {
	hctx, cancel := context.WithCancel(ctx)
	defer cancel()
	results := make(chan Outcome, 2)
	launch := func(hedge bool) {
		go func() { results <- rn.single(hctx, r, per, hedge, time.Time{}) }()
	}
	launch(false)
	timer := time.NewTimer(r.HedgeAfter)
	defer timer.Stop()
	inflight := 1
	var first Outcome
	have := false
	for inflight > 0 {
		select {
		case <-timer.C:
			if rn.spare() && (rn.opts.Budget == nil || rn.opts.Budget.Withdraw()) {
				rn.action(readiness.ActionHedge, r.Entry, "")
				launch(true)
				inflight++
			}
		case out := <-results:
			inflight--
			if out.Class == mcpreadyv1.OutcomeClass_OUTCOME_CLASS_SUCCESS {
				cancel()
				for ; inflight > 0; inflight-- {
					<-results
				}
				return out
			}
			if !have {
				first, have = out, true
			}
			if inflight == 0 {
				return first
			}
		}
	}
	return first
}

// record is one attempt's receipt record allocated together with its
// timestamps and, for a call's first attempt, the list holding it: an
// attempt costs one allocation instead of four, and the first one none
// (runner.first).
type record struct {
	attempt mcpreadyv1.Attempt
	started timestamppb.Timestamp
	latency durationpb.Duration
	list    [1]*mcpreadyv1.Attempt
}

// start records the start of an attempt at at.
func (rn *runner) start(r *decide.Route, hedge bool, at time.Time) *record {
	rn.mu.Lock()
	defer rn.mu.Unlock()
	rn.count++
	x := &rn.first
	if rn.count > 1 {
		x = &record{}
	}
	x.started.Seconds, x.started.Nanos = at.Unix(), int32(at.Nanosecond()) // timestamppb.New
	a := &x.attempt
	a.Entry, a.StartedAt, a.Hedged = r.Entry, &x.started, hedge
	a.Number = int32(rn.count)
	if rn.res.Attempts == nil {
		x.list[0] = a
		rn.res.Attempts = x.list[:]
	} else {
		rn.res.Attempts = append(rn.res.Attempts, a)
	}
	return x
}

// finish normalises an outcome (a timeout after send is AMBIGUOUS), fills
// the attempt record and reports to the circuit breaker.
func (rn *runner) finish(r *decide.Route, rec *record, started time.Time, out Outcome, actx context.Context) Outcome {
	// A deadline turns an unclassified or transport outcome into a timeout;
	// an answer that did arrive (a tool error, a 401) keeps its class.
	timedOut := out.Class == mcpreadyv1.OutcomeClass_OUTCOME_CLASS_TIMEOUT ||
		(actx != nil && errors.Is(actx.Err(), context.DeadlineExceeded) &&
			(out.Class == mcpreadyv1.OutcomeClass_OUTCOME_CLASS_UNSPECIFIED || out.Class == mcpreadyv1.OutcomeClass_OUTCOME_CLASS_TRANSPORT_FAILURE))
	switch {
	case timedOut && out.Sent:
		out.Class, out.Layer = mcpreadyv1.OutcomeClass_OUTCOME_CLASS_AMBIGUOUS, mcpreadyv1.ReadinessLayer_READINESS_LAYER_INVOCATION
	case timedOut:
		out.Class, out.Layer = mcpreadyv1.OutcomeClass_OUTCOME_CLASS_TIMEOUT, mcpreadyv1.ReadinessLayer_READINESS_LAYER_REACHABILITY
	case out.Class == mcpreadyv1.OutcomeClass_OUTCOME_CLASS_UNSPECIFIED && out.Err != nil:
		out.Class, out.Layer = mcpreadyv1.OutcomeClass_OUTCOME_CLASS_TRANSPORT_FAILURE, mcpreadyv1.ReadinessLayer_READINESS_LAYER_REACHABILITY
	case out.Class == mcpreadyv1.OutcomeClass_OUTCOME_CLASS_UNSPECIFIED:
		out.Class = mcpreadyv1.OutcomeClass_OUTCOME_CLASS_SUCCESS
	}
	if timedOut && out.Err == nil {
		out.Err = context.DeadlineExceeded
	}
	now := rn.opts.Now()
	rn.mu.Lock()
	a := &rec.attempt
	a.Outcome = out.Class
	a.JsonrpcCode = int32(out.JSONRPCCode)
	a.IsError = out.IsError
	a.TransportStatus = transportStatus(out)
	if !started.IsZero() {
		d := now.Sub(started) // durationpb.New
		rec.latency.Seconds, rec.latency.Nanos = int64(d/time.Second), int32(d%time.Second)
		a.Latency = &rec.latency
	}
	rn.mu.Unlock()
	// A hedge loser cancelled by the winner says nothing about health.
	if rn.opts.Circuits != nil && (actx == nil || !errors.Is(actx.Err(), context.Canceled)) {
		switch {
		case out.Class == mcpreadyv1.OutcomeClass_OUTCOME_CLASS_SUCCESS, out.Class == mcpreadyv1.OutcomeClass_OUTCOME_CLASS_TOOL_ERROR:
			rn.opts.Circuits.Report(r.CircuitKey, true, now)
		case healthFailure(out):
			rn.opts.Circuits.Report(r.CircuitKey, false, now)
			rn.opts.Circuits.MarkSuspect(slices.Collect(decide.SplitDomains(r.Domains)), now)
		}
	}
	return out
}

func transportStatus(o Outcome) string {
	sent := "not sent"
	if o.Sent {
		sent = "sent"
	}
	if o.HTTPStatus != 0 {
		return fmt.Sprintf("http %d", o.HTTPStatus)
	}
	return sent
}

// Condition is the retry condition of a failed outcome (see
// decide.RetryConditions), zero for an outcome no condition names (success,
// tool error, refusal, an invalid result, a deterministic JSON-RPC error).
// The default set contains exactly the Transient outcomes.
func Condition(o Outcome) decide.RetryConditions {
	switch o.Class {
	case mcpreadyv1.OutcomeClass_OUTCOME_CLASS_TIMEOUT, mcpreadyv1.OutcomeClass_OUTCOME_CLASS_AMBIGUOUS:
		return decide.RetryTimeout
	case mcpreadyv1.OutcomeClass_OUTCOME_CLASS_RATE_LIMITED:
		return decide.RetryHTTP429
	case mcpreadyv1.OutcomeClass_OUTCOME_CLASS_TRANSPORT_FAILURE:
		switch s := o.HTTPStatus; {
		case s == 500:
			return decide.RetryHTTP500
		case s == 502:
			return decide.RetryHTTP502
		case s == 503:
			return decide.RetryHTTP503
		case s == 504:
			return decide.RetryHTTP504
		case s >= 500 && s < 600:
			return decide.RetryHTTP5xxOther
		}
		return decide.RetryTransport
	case mcpreadyv1.OutcomeClass_OUTCOME_CLASS_PROTOCOL_ERROR:
		switch o.JSONRPCCode {
		case 0, jsonrpc.CodeParseError, jsonrpc.CodeInvalidRequest, jsonrpc.CodeMethodNotFound, jsonrpc.CodeInvalidParams:
			return 0
		}
		return decide.RetryJSONRPCError
	}
	return 0
}

// Transient reports whether a failure may succeed on a retry of the same
// (retryable) route: transport failures, timeouts, ambiguous outcomes and
// rate limiting (the default retry conditions).
func Transient(o Outcome) bool {
	switch o.Class {
	case mcpreadyv1.OutcomeClass_OUTCOME_CLASS_TRANSPORT_FAILURE, mcpreadyv1.OutcomeClass_OUTCOME_CLASS_TIMEOUT,
		mcpreadyv1.OutcomeClass_OUTCOME_CLASS_AMBIGUOUS, mcpreadyv1.OutcomeClass_OUTCOME_CLASS_RATE_LIMITED:
		return true
	}
	return false
}

// FallbackSafe reports whether, after failure o on route r, the next route
// of the class may be tried. Never after a human denied approval or a
// refusal. Always on a retryable route. On any other route only when the
// call cannot have had an effect: not sent; refused before execution (HTTP
// 401/402/403/429/503, JSON-RPC parse/invalid request/unknown method/invalid
// params). Never after an ambiguous outcome.
func FallbackSafe(o Outcome, r *decide.Route) bool {
	switch o.Class {
	case mcpreadyv1.OutcomeClass_OUTCOME_CLASS_SUCCESS, mcpreadyv1.OutcomeClass_OUTCOME_CLASS_APPROVAL_DENIED,
		mcpreadyv1.OutcomeClass_OUTCOME_CLASS_REFUSED:
		return false
	}
	if r.Retryable || !o.Sent {
		return true
	}
	switch o.Class {
	case mcpreadyv1.OutcomeClass_OUTCOME_CLASS_ACCESS_NOT_READY, mcpreadyv1.OutcomeClass_OUTCOME_CLASS_BILLING,
		mcpreadyv1.OutcomeClass_OUTCOME_CLASS_RATE_LIMITED:
		return true
	case mcpreadyv1.OutcomeClass_OUTCOME_CLASS_TRANSPORT_FAILURE:
		return o.HTTPStatus == 503
	case mcpreadyv1.OutcomeClass_OUTCOME_CLASS_PROTOCOL_ERROR:
		switch o.JSONRPCCode {
		case jsonrpc.CodeParseError, jsonrpc.CodeInvalidRequest, jsonrpc.CodeMethodNotFound, jsonrpc.CodeInvalidParams:
			return true
		}
	}
	return false
}

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
