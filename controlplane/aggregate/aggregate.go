// Package aggregate folds stored receipts into passive Evidence, per
// readiness subject (server name and version, tool, endpoint, schema
// digests, protocol version, principal and tenant class, region) and time
// window: per-layer rates each with its own denominator and exclusions,
// latency percentiles, an error taxonomy by layer, ambiguous outcomes,
// sample sizes, observedAt/expiresAt, blind spots and the digest of the
// receipts used. Each window's Evidence is signed with the control plane's
// observer key (method PASSIVE) and handed to an EvidenceSink: on the
// control plane the one verified write path (a *writer.Writer), which
// stores it as an artifact that agents receive.
//
// Workflow receipts are folded apart, per principal class, tenant class,
// region and window, into workflow Evidence (workflow.go).
// Only subjects the registry holds get evidence (Options.Subjects), and
// one agent contributes to at most so many subjects and receipts per
// window, and to so many workflow populations and workflow receipts
// (subjects.go). Cold and warm calls keep separate latency
// distributions; the semantic-valid rate and the access refusals by kind
// (401, 402, 403, 429, token failures) are reported with their
// denominators, per subject, whose key includes the principal and auth
// classes, so no rate is averaged across principals.
//
// Aggregation is incremental: Observe only updates counters, so ingest
// stays fast. Receipts arriving after their window was emitted are counted
// as late and not folded in (the window's evidence is never rewritten with
// a partial sample). The package must not read or write the receipt store,
// and must not store evidence other than through its EvidenceSink.
package aggregate

import (
	"context"
	"crypto"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/mcpready/mcpready/artifact"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/ledger"
	"github.com/mcpready/mcpready/readiness"
	"github.com/mcpready/mcpready/sign"
)

// EvidenceSink stores a signed Evidence bundle. On the control plane it is
// the verified write path, *writer.Writer, which refuses evidence that does
// not verify against the active TrustPolicy.
type EvidenceSink interface {
	ApplyEvidence(ctx context.Context, bundle []byte) error
}

// SinkFunc adapts a function to EvidenceSink.
type SinkFunc func(ctx context.Context, bundle []byte) error

// ApplyEvidence calls f.
func (f SinkFunc) ApplyEvidence(ctx context.Context, bundle []byte) error { return f(ctx, bundle) }

// Options configures an Aggregator. Zero values take the defaults.
type Options struct {
	// Signer is the observer key; required. The TrustPolicy must grant it
	// kind Evidence for names under NamePrefix.
	Signer crypto.Signer
	// Sink receives signed evidence; required.
	Sink EvidenceSink
	// ObserverID names the observer in evidence; default "mcpready-controlplane".
	ObserverID string
	// NamePrefix prefixes evidence names; default "passive".
	NamePrefix string
	// Window is the aggregation window; default 5m.
	Window time.Duration
	// Grace is how long after a window ends late receipts are still folded
	// in before it is emitted; default 30s.
	Grace time.Duration
	// MaxClockSkew is how far after the aggregator's clock a receipt's time
	// may lie: a receipt stamped later is not folded (counted as refused,
	// reason "future"), so that an agent cannot open windows without
	// bound, nor have evidence signed as observed in the future. Default
	// 1m.
	MaxClockSkew time.Duration
	// TTL is how long evidence stays valid after its window ends;
	// default 3 × Window. Expired evidence makes routing treat the subject
	// as UNKNOWN.
	TTL time.Duration
	// FlushEvery is Run's emission period; default 10s.
	FlushEvery time.Duration
	// MaxLatencySamples bounds the latency sample per subject and window
	// (reservoir sampling beyond it); default 4096.
	MaxLatencySamples int
	// Subjects is the registry's view: a receipt whose selected identity
	// it does not hold is not folded (counted as refused). Required.
	Subjects SubjectIndex
	// Drift is the registry's record of drift: the evidence of a window
	// that ended after its subject's drift was recorded lists that
	// drift's labels in driftObserved, so that it counts for no call.
	// Nil: passive evidence lists no drift.
	Drift DriftIndex
	// MaxSubjectsPerAgent bounds how many subjects one agent contributes
	// to per window, MaxReceiptsPerAgent how many receipts; receipts past
	// either are not folded (counted as refused). Defaults 256 and 100000.
	MaxSubjectsPerAgent int
	MaxReceiptsPerAgent int
	// MaxWorkflowKeysPerAgent bounds how many workflow populations
	// (principal class, tenant class, region: what the agent asserts) one
	// agent contributes to per window, MaxWorkflowReceiptsPerAgent how
	// many workflow receipts; receipts past either are not folded (counted
	// as refused, workflow-agent-bound). Defaults 64 and 100000.
	MaxWorkflowKeysPerAgent     int
	MaxWorkflowReceiptsPerAgent int
	// Registry receives metrics; nil registers none.
	Registry prometheus.Registerer
	// Logger; nil discards.
	Logger *slog.Logger
	// Now; nil means time.Now.
	Now func() time.Time
}

// ErrOptions reports unusable Options.
var ErrOptions = errors.New("aggregate: invalid options")

// subject is the readiness subject of a receipt.
type subject struct {
	server, version, tool, endpoint, inSchema, outSchema, protocol, principal, tenant, region, auth, input string
}

type windowKey struct {
	subject
	start int64 // window start, unix nanos
}

type errKey struct {
	layer   mcpreadyv1.ReadinessLayer
	outcome mcpreadyv1.OutcomeClass
	code    string
}

// layers are the passive per-layer rates, in order.
var layers = []struct {
	layer      mcpreadyv1.ReadinessLayer
	definition string
}{
	{mcpreadyv1.ReadinessLayer_READINESS_LAYER_REACHABILITY, "request delivered to the endpoint (no transport failure or timeout before sending)"},
	{mcpreadyv1.ReadinessLayer_READINESS_LAYER_PROTOCOL, "a well-formed MCP/JSON-RPC response, no JSON-RPC error"},
	{mcpreadyv1.ReadinessLayer_READINESS_LAYER_ACCESS, "not refused for authentication, authorisation, billing or quota (401/402/403/429)"},
	{mcpreadyv1.ReadinessLayer_READINESS_LAYER_INVOCATION, "the tool ran: result without isError"},
	{mcpreadyv1.ReadinessLayer_READINESS_LAYER_RESULT_VALIDITY, "the result passed output-schema, size and tripwire checks"},
}

type acc struct {
	attempted, excluded, ambiguous int64
	reasons                        map[string]int64
	reached, succeeded             [5]int64
	latency, cold, warm            reservoir
	semantic                       semanticCount
	access                         accessCount
	errors                         map[errKey]int64
	write                          bool
	agents                         map[string]struct{}
	digests                        []string
	last                           time.Time
}

// Aggregator folds receipts into evidence. It is safe for concurrent use.
type Aggregator struct {
	opts Options
	log  *slog.Logger

	mu           sync.Mutex
	windows      map[windowKey]*acc
	emittedUntil int64 // windows starting before this were emitted

	workflows map[workflowKey]*workflowAcc  // windows of workflow receipts (workflow.go)
	contrib   map[agentWindow]*contribution // subjects.go

	late, emitted, failed prometheus.Counter
	refused               *prometheus.CounterVec
	lateN                 int64
}

// New returns an aggregator.
func New(opts Options) (*Aggregator, error) {
	if opts.Signer == nil || opts.Sink == nil || opts.Subjects == nil {
		return nil, fmt.Errorf("%w: Signer, Sink and Subjects are required", ErrOptions)
	}
	if opts.MaxSubjectsPerAgent <= 0 {
		opts.MaxSubjectsPerAgent = 256
	}
	if opts.MaxReceiptsPerAgent <= 0 {
		opts.MaxReceiptsPerAgent = 100_000
	}
	if opts.MaxWorkflowKeysPerAgent <= 0 {
		opts.MaxWorkflowKeysPerAgent = 64
	}
	if opts.MaxWorkflowReceiptsPerAgent <= 0 {
		opts.MaxWorkflowReceiptsPerAgent = 100_000
	}
	if opts.ObserverID == "" {
		opts.ObserverID = "mcpready-controlplane"
	}
	if opts.NamePrefix == "" {
		opts.NamePrefix = "passive"
	}
	if opts.Window <= 0 {
		opts.Window = 5 * time.Minute
	}
	if opts.Grace <= 0 {
		opts.Grace = 30 * time.Second
	}
	if opts.MaxClockSkew <= 0 {
		opts.MaxClockSkew = time.Minute
	}
	if opts.TTL <= 0 {
		opts.TTL = 3 * opts.Window
	}
	if opts.FlushEvery <= 0 {
		opts.FlushEvery = 10 * time.Second
	}
	if opts.MaxLatencySamples <= 0 {
		opts.MaxLatencySamples = 4096
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	c := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Namespace: "mcpready", Subsystem: "aggregate", Name: name, Help: help})
	}
	a := &Aggregator{opts: opts, log: opts.Logger.With("component", "aggregate"), windows: map[windowKey]*acc{}, contrib: map[agentWindow]*contribution{},
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "mcpready", Subsystem: "aggregate", Name: "refused_receipts_total",
			Help: "Receipts not folded into evidence, by reason: unregistered-subject, unknown-auth-class, agent-bound, workflow-agent-bound."}, []string{"reason"}),
		late:    c("late_receipts_total", "Receipts that arrived after their window's evidence was emitted."),
		emitted: c("evidence_emitted_total", "Signed passive evidence handed to the sink."),
		failed:  c("evidence_failed_total", "Evidence that could not be signed or applied.")}
	if opts.Registry != nil {
		opts.Registry.MustRegister(a.late, a.emitted, a.failed, a.refused)
	}
	return a, nil
}

func subjectOf(r *mcpreadyv1.Receipt) (subject, bool) {
	s := r.GetSelected()
	if s.GetToolName() == "" {
		// Refused before any candidate was selected, or not a tool call
		// (a resource or prompt request, a request an upstream sent
		// towards a client): no tool, so no subject.
		return subject{}, false
	}
	return subject{s.GetServerName(), s.GetServerVersion(), s.GetToolName(), s.GetEndpoint(), s.GetInputSchemaDigest(), s.GetOutputSchemaDigest(),
		s.GetProtocolVersion(), r.GetPrincipalClass(), r.GetTenantClass(), r.GetRegion(), r.GetAuthClass(), r.GetInputClass()}, true
}

func receiptTime(r *mcpreadyv1.Receipt) time.Time {
	for _, t := range []*timestamppb.Timestamp{r.GetEndedAt(), r.GetEmittedAt(), r.GetStartedAt()} {
		if t != nil {
			return t.AsTime()
		}
	}
	return time.Time{}
}

// failedLayer maps a receipt to the layer it failed at (index into
// layers), len(layers) for none, or -1 for an ambiguous outcome.
func failedLayer(r *mcpreadyv1.Receipt) int {
	if l := r.GetFailedLayer(); l != mcpreadyv1.ReadinessLayer_READINESS_LAYER_UNSPECIFIED {
		for i, x := range layers {
			if x.layer == l {
				return i
			}
		}
		return len(layers) // failed above the passive layers (semantic, workflow, ...)
	}
	switch r.GetOutcome() {
	case mcpreadyv1.OutcomeClass_OUTCOME_CLASS_AMBIGUOUS:
		return -1
	case mcpreadyv1.OutcomeClass_OUTCOME_CLASS_TRANSPORT_FAILURE, mcpreadyv1.OutcomeClass_OUTCOME_CLASS_TIMEOUT:
		return 0
	case mcpreadyv1.OutcomeClass_OUTCOME_CLASS_PROTOCOL_ERROR:
		return 1
	case mcpreadyv1.OutcomeClass_OUTCOME_CLASS_ACCESS_NOT_READY, mcpreadyv1.OutcomeClass_OUTCOME_CLASS_BILLING, mcpreadyv1.OutcomeClass_OUTCOME_CLASS_RATE_LIMITED:
		return 2
	case mcpreadyv1.OutcomeClass_OUTCOME_CLASS_TOOL_ERROR:
		return 3
	case mcpreadyv1.OutcomeClass_OUTCOME_CLASS_INVALID_RESULT:
		return 4
	}
	return len(layers)
}

// refusedBeforeSend reports receipts whose call never reached an upstream.
func refusedBeforeSend(r *mcpreadyv1.Receipt) bool {
	if r.GetAttemptCount() > 0 || len(r.GetAttempts()) > 0 {
		return false
	}
	switch r.GetOutcome() {
	case mcpreadyv1.OutcomeClass_OUTCOME_CLASS_REFUSED, mcpreadyv1.OutcomeClass_OUTCOME_CLASS_APPROVAL_DENIED,
		mcpreadyv1.OutcomeClass_OUTCOME_CLASS_CIRCUIT_OPEN, mcpreadyv1.OutcomeClass_OUTCOME_CLASS_DRIFT_BLOCKED:
		return true
	}
	return false
}

// Observe folds one stored batch's receipts in. It implements
// ingest.Observer.
func (a *Aggregator) Observe(agentID string, receipts []*mcpreadyv1.Receipt, digests []string) {
	win := int64(a.opts.Window)
	latest := a.opts.Now().Add(a.opts.MaxClockSkew)
	a.mu.Lock()
	defer a.mu.Unlock()
	for i, r := range receipts {
		var digest string
		if i < len(digests) {
			digest = digests[i]
		}
		at := receiptTime(r)
		if at.After(latest) {
			a.refused.WithLabelValues(reasonFuture).Inc()
			continue
		}
		if a.observeWorkflow(agentID, r, digest) {
			continue
		}
		sub, ok := subjectOf(r)
		if !ok {
			continue
		}
		start := at.UnixNano() - at.UnixNano()%win
		if start < a.emittedUntil {
			a.lateN++
			a.late.Inc()
			continue
		}
		if !a.opts.Subjects.Registered(r.GetSelected()) {
			a.refused.WithLabelValues(reasonUnregistered).Inc()
			continue
		}
		if auth := r.GetAuthClass(); auth != "" && !readiness.IsAuthClass(auth) {
			a.refused.WithLabelValues(reasonAuthClass).Inc()
			continue
		}
		if ic := r.GetInputClass(); ic != "" && !artifact.ValidInputClass(ic) {
			a.refused.WithLabelValues(reasonInputClass).Inc()
			continue
		}
		if !a.admit(agentID, sub, start) {
			a.refused.WithLabelValues(reasonAgentBound).Inc()
			continue
		}
		k := windowKey{sub, start}
		w := a.windows[k]
		if w == nil {
			w = &acc{reasons: map[string]int64{}, errors: map[errKey]int64{}, agents: map[string]struct{}{}}
			a.windows[k] = w
		}
		a.fold(w, r)
		w.agents[agentID] = struct{}{}
		if digest != "" {
			w.digests = append(w.digests, digest)
		}
		if at.After(w.last) {
			w.last = at
		}
	}
}

func (a *Aggregator) fold(w *acc, r *mcpreadyv1.Receipt) {
	w.attempted++
	if c := r.GetConsumerSideEffect(); c != mcpreadyv1.SideEffectClass_SIDE_EFFECT_CLASS_READ_ONLY && c != mcpreadyv1.SideEffectClass_SIDE_EFFECT_CLASS_UNSPECIFIED {
		w.write = true
	}
	if refusedBeforeSend(r) {
		w.excluded++
		w.reasons["refused-before-send"]++
		return
	}
	fl := failedLayer(r)
	if fl < 0 {
		// Sent, outcome unknown: reached, but no higher layer can be scored.
		w.ambiguous++
		w.reached[0]++
		w.succeeded[0]++
		return
	}
	for i := range layers {
		if i > fl {
			break
		}
		w.reached[i]++
		if i < fl {
			w.succeeded[i]++
		}
	}
	if fl < len(layers) {
		code := r.GetTransportStatus()
		if r.GetJsonrpcCode() != 0 {
			code = fmt.Sprintf("jsonrpc:%d", r.GetJsonrpcCode())
		}
		w.errors[errKey{layers[fl].layer, r.GetOutcome(), code}]++
	}
	if fl >= accessLayer {
		w.access.add(r, fl == accessLayer)
	}
	if fl == len(layers) {
		w.semantic.add(r)
	}
	if lat := r.GetLatency(); lat != nil {
		ms := float64(lat.AsDuration()) / float64(time.Millisecond)
		max := a.opts.MaxLatencySamples
		w.latency.add(ms, max)
		switch r.GetWarmth() {
		case mcpreadyv1.CallWarmth_CALL_WARMTH_WARM:
			w.warm.add(ms, max)
		case mcpreadyv1.CallWarmth_CALL_WARMTH_COLD_NEW_SESSION, mcpreadyv1.CallWarmth_CALL_WARMTH_COLD_IDLE:
			w.cold.add(ms, max)
		}
	}
}

// Flush signs and emits the evidence of every window that ended at least
// Grace ago (all windows when all is true, e.g. at shutdown), and returns
// how many were emitted. Evidence that fails to sign or apply is logged
// and counted; it is not retried (receipts stay in the store).
func (a *Aggregator) Flush(ctx context.Context, all bool) (int, error) {
	now := a.opts.Now()
	win := int64(a.opts.Window)
	cutoff := now.Add(-a.opts.Grace).UnixNano() - win // windows starting before this have ended Grace ago
	a.mu.Lock()
	var keys []windowKey
	for k := range a.windows {
		if all || k.start <= cutoff {
			keys = append(keys, k)
		}
	}
	ready := make(map[windowKey]*acc, len(keys))
	for _, k := range keys {
		ready[k] = a.windows[k]
		delete(a.windows, k)
		if k.start+win > a.emittedUntil {
			a.emittedUntil = k.start + win
		}
	}
	wready := a.takeWorkflows(all, cutoff)
	a.forgetContributions(a.emittedUntil)
	a.mu.Unlock()
	sort.Slice(keys, func(i, j int) bool { return keys[i].start < keys[j].start })
	objs := make([]*artifact.Object, 0, len(keys)+len(wready))
	for _, k := range keys {
		objs = append(objs, a.evidence(k, ready[k], now))
	}
	objs = append(objs, a.workflowObjects(wready, now)...)
	var errs []error
	n := 0
	for _, obj := range objs {
		bundle, _, err := sign.Sign(obj, a.opts.Signer)
		if err == nil {
			err = a.opts.Sink.ApplyEvidence(ctx, bundle)
		}
		if err != nil {
			a.failed.Inc()
			a.log.Error("passive evidence not applied", "name", obj.Metadata.Name, "err", err)
			errs = append(errs, fmt.Errorf("%s: %w", obj.Metadata.Name, err))
			continue
		}
		a.emitted.Inc()
		n++
	}
	return n, errors.Join(errs...)
}

// Run flushes every FlushEvery until ctx ends, then flushes everything.
func (a *Aggregator) Run(ctx context.Context) error {
	t := time.NewTicker(a.opts.FlushEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			_, err := a.Flush(fctx, true)
			return err
		case <-t.C:
			a.Flush(ctx, false)
		}
	}
}

// Resume starts a term of an aggregator fed from a store shared by
// replicas, on the replica elected to aggregate: it drops every window
// not yet emitted (a previous term's partial sample) and treats each
// window that ended at or before resume as emitted (a previous leader
// did, or it is past: its receipts re-read from the store are counted
// late, never emitted twice). Windows still open when the term ends are
// left to the next term, which re-reads their receipts.
//
// Call Resume before feeding the term's receipts, then RunTerm.
func (a *Aggregator) Resume(resume time.Time) {
	win := resume.UnixNano() - resume.UnixNano()%int64(a.opts.Window)
	a.mu.Lock()
	a.windows, a.workflows = map[windowKey]*acc{}, nil
	a.contrib = map[agentWindow]*contribution{}
	a.emittedUntil = max(a.emittedUntil, win)
	a.mu.Unlock()
}

// RunTerm flushes ended windows every FlushEvery until ctx ends, leaving
// windows still open to the next term (see Resume).
func (a *Aggregator) RunTerm(ctx context.Context) {
	t := time.NewTicker(a.opts.FlushEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			a.Flush(ctx, false)
		}
	}
}

// TermStart says where a term starting at now resumes (windows ended
// Grace ago were emitted by the previous leader) and from which receive
// time it must re-read the store so every window still open is complete
// (a receipt is received after it is emitted, so one Window back).
func (a *Aggregator) TermStart(now time.Time) (resume, readFrom time.Time) {
	resume = now.Add(-a.opts.Grace)
	return resume, resume.Add(-a.opts.Window)
}

// Late returns how many receipts arrived after their window was emitted.
func (a *Aggregator) Late() int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.lateN
}

// EvidenceName is the artifact name of the passive evidence for a subject:
// "<prefix>/<server>/<tool>/<12 hex of the full subject digest>". Each
// window's evidence for a subject supersedes the previous one.
func EvidenceName(prefix string, server, tool string, subjectDigest string) string {
	h := strings.TrimPrefix(subjectDigest, "sha256:")
	if len(h) > 12 {
		h = h[:12]
	}
	name := artifact.CleanName(prefix) + "/" + artifact.CleanName(server) + "/" + artifact.CleanName(tool)
	if len(name) > 253-13 {
		name = name[:253-13]
	}
	return strings.TrimRight(name, "/") + "/" + h
}

func (s subject) digest() string {
	parts := []string{s.server, s.version, s.tool, s.endpoint, s.inSchema, s.outSchema, s.protocol, s.principal, s.tenant, s.region}
	if s.auth != "" { // receipts without an auth or input class keep their subjects' digests
		parts = append(parts, s.auth)
	}
	if s.input != "" { // prefixed: no auth class begins with "input:"
		parts = append(parts, "input:"+s.input)
	}
	return artifact.Digest([]byte(strings.Join(parts, "\x00")))
}

// evidenceVersion is the signed version of a window's evidence: the
// window start, then the time of folding, so a later fold of the same
// window supersedes an earlier one and an earlier window never follows a
// later one (the write path refuses it as a rollback).
func evidenceVersion(start, now time.Time) string {
	return fmt.Sprintf("%d.%d", start.Unix(), now.UnixNano())
}

// evidence builds the Evidence object of one window.
func (a *Aggregator) evidence(k windowKey, w *acc, now time.Time) *artifact.Object {
	start := time.Unix(0, k.start).UTC()
	end := start.Add(a.opts.Window)
	sd := k.subject.digest()
	ev := &mcpreadyv1.Evidence{
		Provenance: &mcpreadyv1.Provenance{Issuer: a.opts.ObserverID, VerificationMethod: "sigstore-bundle-key", Version: evidenceVersion(start, now),
			IssuedAt: timestamppb.New(now), ExpiresAt: timestamppb.New(end.Add(a.opts.TTL))},
		Subject: &mcpreadyv1.Subject{SubjectId: sd, ServerName: k.server, Endpoint: k.endpoint, ServerVersion: k.version, ToolName: k.tool,
			InputSchemaDigest: k.inSchema, OutputSchemaDigest: k.outSchema, PrincipalClass: k.principal, TenantClass: k.tenant, Region: k.region, InputClass: k.input},
		Observer:        &mcpreadyv1.Observer{Id: a.opts.ObserverID, Software: "mcpready/aggregate", Independence: "consumer-passive"},
		Method:          mcpreadyv1.EvidenceMethod_EVIDENCE_METHOD_PASSIVE,
		AuthClass:       k.auth,
		TenantClass:     k.tenant,
		PrincipalClass:  k.principal,
		Region:          k.region,
		ProtocolVersion: k.protocol,
		Path:            "host-agent",
		WindowStart:     timestamppb.New(start),
		WindowEnd:       timestamppb.New(end),
		ObservedAt:      timestamppb.New(w.last),
		ExpiresAt:       timestamppb.New(end.Add(a.opts.TTL)),
		Sample: &mcpreadyv1.Sample{Attempted: w.attempted, Eligible: w.attempted - w.excluded, Excluded: w.excluded,
			ExclusionReasons: w.reasons},
		AmbiguousOutcomes: w.ambiguous,
		ConfidenceMethod:  "none: raw counts with denominators",
		ReceiptsDigest:    ledger.DigestOfDigests(w.digests),
		ReceiptCount:      int64(len(w.digests)),
		Coverage:          fmt.Sprintf("%d receipts from %d agent(s) in a %s window", w.attempted, len(w.agents), a.opts.Window),
	}
	if k.protocol != "" {
		ev.Subject.ProtocolVersions = []string{k.protocol}
	}
	if a.opts.Drift != nil {
		ev.DriftObserved = a.opts.Drift.Drifted(&mcpreadyv1.Selection{ServerName: k.server, ServerVersion: k.version, ToolName: k.tool, Endpoint: k.endpoint,
			InputSchemaDigest: k.inSchema, OutputSchemaDigest: k.outSchema}, end)
	}
	eligible := w.attempted - w.excluded
	for i, l := range layers {
		lr := &mcpreadyv1.LayerRate{Layer: l.layer, Successes: w.succeeded[i], Denominator: w.reached[i], Excluded: eligible - w.reached[i], SuccessDefinition: l.definition}
		if lr.Denominator > 0 {
			lr.Rate = float64(lr.Successes) / float64(lr.Denominator)
		}
		ev.Rates = append(ev.Rates, lr)
	}
	ev.Latency, ev.ColdLatency, ev.WarmLatency = w.latency.summary(), w.cold.summary(), w.warm.summary()
	ev.SemanticValid = w.semantic.rate()
	ev.AccessRates = w.access.rates()
	for ek, n := range w.errors {
		ev.Errors = append(ev.Errors, &mcpreadyv1.ErrorCount{Layer: ek.layer, Outcome: ek.outcome, Code: ek.code, Count: n})
	}
	sort.Slice(ev.Errors, func(i, j int) bool {
		x, y := ev.Errors[i], ev.Errors[j]
		if x.Layer != y.Layer {
			return x.Layer < y.Layer
		}
		if x.Outcome != y.Outcome {
			return x.Outcome < y.Outcome
		}
		return x.Code < y.Code
	})
	ev.BlindSpots = []string{"passive only: no synthetic probes", "workflow contribution not measured"}
	if ev.SemanticValid.GetDenominator() == 0 {
		ev.BlindSpots = append(ev.BlindSpots, "no semantic validator applied")
	}
	if !w.write {
		ev.BlindSpots = append(ev.BlindSpots, "no write tools observed")
	}
	if w.ambiguous > 0 {
		ev.BlindSpots = append(ev.BlindSpots, "ambiguous outcomes scored only for reachability")
	}
	if eligible < 30 {
		ev.BlindSpots = append(ev.BlindSpots, fmt.Sprintf("small sample: %d eligible calls", eligible))
	}
	return artifact.New(artifact.KindEvidence, EvidenceName(a.opts.NamePrefix, k.server, k.tool, sd), ev)
}
