// Package front is the host agent's MCP front: the Streamable HTTP endpoints
// AI agents on this host talk to.
//
//   - /mcp/servers/<name> is a transparent view of one upstream under its
//     original tool names: tools go through the decision core; initialize,
//     logging/setLevel, resources, prompts, completion and subscriptions go
//     through the pipeline too (admitted per principal, validated,
//     receipted: methods.go); log messages, progress and cancellation are
//     relayed; each session of an admitted principal holds a dedicated
//     upstream session, capped per principal and overall, closed when the
//     session idles out (sessions.go); a session belongs to the principal
//     that opened it;
//     server-to-client requests (sampling, elicitation, roots) are relayed back
//     to a session client over a dedicated upstream session, and to a
//     stateless (2026-07-28) client as input requests of an input-required
//     result under a single-use requestState of the agent's own (mrtr.go).
//     A stateless caller gets what a 2026-07-28 server owes it (era.go,
//     paramheaders.go): its own capabilities declared upstream, the
//     upstream's missing-capability refusal, progress, checked
//     Mcp-Param-* headers.
//   - /mcp is the aggregate view: each equivalence class of the Policy as one
//     capability tool, and every other permitted tool as <server>__<tool>;
//     with workflow tracking, also mcpready.workflow.report for principals
//     that may report workflows (workflow.go, which also serves
//     WorkflowReports, the same report over HTTP).
//
// Both eras are served: requests carrying MCP-Protocol-Version 2026-07-28 or
// later go to a stateless handler (server/discover), others to a session
// handler (2025-11-25 initialize); the session handler's sessions are
// capped per principal and overall (sessions.go). Lists show exactly what the principal may
// call (the pipeline's admission). The front only speaks MCP: it
// authenticates, names and pins a tools/call, then hands it to package
// pipeline, which decides, approves per route, executes on the route's own
// endpoint, validates and records it in one receipt (one per round when a
// call waits for input); the front turns input and approval requests into
// input rounds. Failures reach the AI agent as structured, recoverable
// tool errors naming the failed layer.
//
// The package must not decide, execute or validate a call itself, never
// logs tokens, arguments or results, and never verifies signatures: the
// State it is given is already verified.
package front

import (
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcpready/mcpready/agent/access"
	"github.com/mcpready/mcpready/agent/circuit"
	"github.com/mcpready/mcpready/agent/config"
	"github.com/mcpready/mcpready/agent/decide"
	"github.com/mcpready/mcpready/agent/idempotency"
	"github.com/mcpready/mcpready/agent/invoke"
	"github.com/mcpready/mcpready/agent/pin"
	"github.com/mcpready/mcpready/agent/pipeline"
	"github.com/mcpready/mcpready/agent/receipt"
	"github.com/mcpready/mcpready/agent/telemetry"
	"github.com/mcpready/mcpready/agent/upstream"
	"github.com/mcpready/mcpready/agent/validate"
	"github.com/mcpready/mcpready/agent/workflow"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/internal/loopback"
)

// Header and _meta keys a client uses to name its workflow (its
// idempotency key travels in idempotency.MetaKey).
const (
	HeaderWorkflow    = "Mcpready-Workflow"
	MetaWorkflow      = "mcpready.dev/workflow"
	protocolHeader    = "Mcp-Protocol-Version"
	statelessProtocol = "2026-07-28"
)

// State is one verified configuration, as the decision core sees it.
type State struct {
	// Decide is the decision table; nil refuses every call.
	Decide *decide.Snapshot
	// Entries are the verified RegistryEntries by metadata.name.
	Entries map[string]*mcpreadyv1.RegistryEntry
	// Checker validates results under the policy's result rules; nil uses defaults.
	Checker *validate.Checker
	// Circuits and Budget are the agent-wide breakers and retry budget; nil disables.
	Circuits *circuit.Set
	Budget   *invoke.Budget
	// Refusal, when set, refuses every call with it (see pipeline.State).
	Refusal *decide.RefusalError

	// Declarations are the verified provider Declarations (any key; each
	// applies to its server_name, else to the server its key names): the
	// pins compare the permissions, data access and endpoint they state.
	Declarations map[string]*mcpreadyv1.Declaration

	decls     map[string]*mcpreadyv1.Declaration // server -> its Declaration
	byTool    map[string]map[string][]string     // server -> tool -> entry names
	endpoints map[string][]string                // server -> its entries' endpoints, sorted, distinct
	aggNames  map[string][]toolPair              // aggregate view name -> the pairs that spell it
}

// toolPair is one server and tool.
type toolPair struct{ server, tool string }

// Options configures a Front. Zero values are documented per field.
type Options struct {
	// Config maps bearer tokens to principals and names upstreams. Nil is the
	// empty configuration (every request refused).
	Config *config.Config
	// Region of this host (decision residency input); "" is no region, which
	// a same-region-only policy never matches.
	Region string
	// NodeID identifies this agent in drift reports ("" sends them unnamed).
	NodeID string
	// Receipts receives one receipt per decision. It must not block for long. Nil drops them.
	Receipts func(*mcpreadyv1.Receipt)
	// Ledger records receipts (durably before the answer of a
	// state-changing call) and refuses calls whose receipt it cannot
	// record (pipeline.Ledger). Nil records none beyond Receipts.
	Ledger pipeline.Ledger
	// AnswerBeforeReceipt lets the tools/call fast path send the answer of
	// a call whose receipt need not be durable first (pipeline.Durable:
	// read-only) before completing that receipt: digesting the result,
	// Receipts, and handing it to Ledger, which appends such receipts in
	// the background anyway. The zero value completes every receipt before
	// its answer is sent.
	AnswerBeforeReceipt bool
	// Builder stamps receipts; its zero value names no emitter and applies
	// the default redaction (every argument digested only).
	Builder receipt.Builder
	// Keys binds idempotency keys durably (pipeline.Options.Keys); nil
	// binds and allocates none.
	Keys *idempotency.Store
	// ReportDrift reports observed drift to the control plane. May be nil.
	ReportDrift func(ctx context.Context, req *mcpreadyv1.ReportDriftRequest) error
	// Logger; nil discards.
	Logger *slog.Logger
	// Transport is the upstream HTTP transport; nil uses a pooled one.
	Transport http.RoundTripper
	// Now; nil is time.Now.
	Now func() time.Time
	// Registerer receives the front's metrics; nil registers none.
	Registerer prometheus.Registerer
	// MaxUpstreamSessions caps the dedicated upstream sessions (for stdio,
	// child processes) the transparent views hold open at once, over all
	// principals: an initialize past it is refused. Zero means
	// DefaultMaxUpstreamSessions; negative means no cap.
	MaxUpstreamSessions int
	// MaxUpstreamSessionsPerPrincipal is the same cap per principal (the
	// tokenless default principal included). Zero means
	// DefaultMaxUpstreamSessionsPerPrincipal; negative means no cap.
	MaxUpstreamSessionsPerPrincipal int
	// MaxSessions caps the stateful front sessions (clients' MCP sessions
	// with the agent, each kept until closed or idle for
	// SessionIdleTimeout) over all principals: a request that would open
	// one past it is refused (HTTP 503). Zero means DefaultMaxSessions;
	// negative means no cap.
	MaxSessions int
	// MaxSessionsPerPrincipal is the same cap per principal (the tokenless
	// default principal included). Zero means
	// DefaultMaxSessionsPerPrincipal; negative means no cap.
	MaxSessionsPerPrincipal int
	// MaxCallsInProgress caps the tool calls and other upstream requests
	// (resources, prompts, completion) the agent runs for clients at once,
	// over all principals: one past it is refused before any upstream
	// (agent_capacity). Zero means DefaultMaxCallsInProgress; negative
	// means no cap.
	MaxCallsInProgress int
	// MaxCallsInProgressPerPrincipal is the same cap per principal. Zero
	// means DefaultMaxCallsInProgressPerPrincipal; negative means no cap.
	MaxCallsInProgressPerPrincipal int
	// MaxOwnerSessions bounds the shared upstream sessions opened with
	// principals' own tokens (token exchange, authorization code) on the
	// aggregate view: upstream.Options.MaxOwnerSessions; zero means its
	// default (1,024).
	MaxOwnerSessions int
	// Telemetry traces requests and upstream attempts (package
	// telemetry); nil is off.
	Telemetry *telemetry.Telemetry
	// MaxHeldCalls and MaxHeldCallsPerPrincipal cap the upstream calls held
	// open across input rounds for stateless clients (each holds a leased
	// upstream session), overall and per principal: a call past them is
	// refused. Zero means DefaultMaxHeldCalls and
	// DefaultMaxHeldCallsPerPrincipal; negative means no cap.
	MaxHeldCalls, MaxHeldCallsPerPrincipal int
	// MaxPendingRounds and MaxPendingRoundsPerPrincipal cap the input rounds
	// waiting for a stateless client's answer, overall and per principal: a
	// round past them ends the call with a refusal. Zero means
	// DefaultMaxPendingRounds and DefaultMaxPendingRoundsPerPrincipal;
	// negative means no cap.
	MaxPendingRounds, MaxPendingRoundsPerPrincipal int
	// SessionIdleTimeout closes a stateful front session (and with it its
	// dedicated upstream sessions) that received no request for this long.
	// Zero means DefaultSessionIdleTimeout.
	SessionIdleTimeout time.Duration
	// RelistInterval is how often the tools of every upstream are listed
	// again and checked against their pins, for upstreams that change
	// without notifying. Zero means DefaultRelistInterval; negative never.
	RelistInterval time.Duration
	// Workflows, when set, tracks the workflows of calls and takes
	// workflow reports (workflow.go): the tool mcpready.workflow.report on
	// /mcp and WorkflowReports. Its Builder, Region, Ledger, Emit and Now
	// are the front's. Nil tracks no workflow.
	Workflows *workflow.Options
	// ReadHeaderTimeout, IdleTimeout and BodyTimeout bound a client
	// connection of the HTTP server HTTPServer returns: reading a request's
	// headers, waiting between keep-alive requests, and reading a request
	// body. Zero means DefaultReadHeaderTimeout, DefaultIdleTimeout and
	// DefaultBodyTimeout.
	ReadHeaderTimeout, IdleTimeout, BodyTimeout time.Duration
	// ColdAfter is the pipeline's cold threshold (pipeline.Options.ColdAfter:
	// a call on an upstream session idle longer is recorded cold); zero is
	// pipeline.DefaultColdAfter.
	ColdAfter time.Duration
}

// Defaults of the Options timeouts.
const (
	DefaultSessionIdleTimeout = 30 * time.Minute
	DefaultRelistInterval     = 5 * time.Minute
	DefaultReadHeaderTimeout  = 10 * time.Second
	DefaultIdleTimeout        = 2 * time.Minute
	DefaultBodyTimeout        = 30 * time.Second
)

// Front serves the MCP endpoints. Create with New.
type Front struct {
	opts    Options
	pool    *upstream.Pool
	state   atomic.Pointer[State]
	pins    *pins
	metrics *metrics
	pending *roundStore // calls waiting for a stateless client's input
	pipe    *pipeline.Pipeline
	caps    *limiter // dedicated upstream sessions held, per principal and overall
	// frontSessions: stateful front sessions held, per principal and
	// overall; at a cap a principal's session idle for evictIdleAfter
	// (DefaultEvictIdleAfter) gives way to its new one.
	frontSessions  *limiter
	evictIdleAfter time.Duration
	// calls: tool calls and methods in progress, per principal and overall.
	calls   *limiter
	stop    chan struct{} // closed by Close: ends the periodic re-listing
	closing sync.Once
	idp     *access.IdentityVerifier // nil: no identity provider configured
	origins *http.CrossOriginProtection

	workflows *workflow.Tracker // nil: workflows not tracked

	mu    sync.Mutex
	views map[string]*view // "" is the aggregate view
	probe *mcp.Server      // answers the SDK's per-request protocol-version probe
}

// New returns a Front with no configuration (every call refused until SetState).
func New(opts Options) *Front {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Config == nil {
		opts.Config, _ = config.New(config.File{})
	}
	origins, _ := config.OriginProtection(opts.Config.TrustedOrigins()) // validated by config.New
	for _, d := range []struct {
		v   *time.Duration
		def time.Duration
	}{{&opts.SessionIdleTimeout, DefaultSessionIdleTimeout}, {&opts.RelistInterval, DefaultRelistInterval}, {&opts.ReadHeaderTimeout, DefaultReadHeaderTimeout},
		{&opts.IdleTimeout, DefaultIdleTimeout}, {&opts.BodyTimeout, DefaultBodyTimeout}} {
		if *d.v == 0 {
			*d.v = d.def
		}
	}
	m := newMetrics(opts.Registerer)
	f := &Front{opts: opts, views: map[string]*view{}, metrics: m, origins: origins, pending: newRoundStore(
		newLimiter("calls waiting for input", errTooManyRounds, opts.MaxPendingRounds, opts.MaxPendingRoundsPerPrincipal,
			DefaultMaxPendingRounds, DefaultMaxPendingRoundsPerPrincipal, m.roundsRefused, nil),
		newLimiter("calls held open for input", errTooManyHeld, opts.MaxHeldCalls, opts.MaxHeldCallsPerPrincipal,
			DefaultMaxHeldCalls, DefaultMaxHeldCallsPerPrincipal, m.heldRefused, nil))}
	f.pins = newPins(f)
	f.caps = newLimiter("dedicated upstream sessions", errTooManySessions, opts.MaxUpstreamSessions, opts.MaxUpstreamSessionsPerPrincipal,
		DefaultMaxUpstreamSessions, DefaultMaxUpstreamSessionsPerPrincipal, m.sessionsRefused, m.sessionsOpen)
	f.frontSessions = newLimiter("front sessions", errTooManyFrontSessions, opts.MaxSessions, opts.MaxSessionsPerPrincipal,
		DefaultMaxSessions, DefaultMaxSessionsPerPrincipal, m.frontSessionsRefused, m.frontSessionsOpen)
	f.evictIdleAfter = DefaultEvictIdleAfter
	f.calls = newLimiter("tool calls in progress", errTooManyCalls, opts.MaxCallsInProgress, opts.MaxCallsInProgressPerPrincipal,
		DefaultMaxCallsInProgress, DefaultMaxCallsInProgressPerPrincipal, m.callsRefused, m.callsInProgress)
	f.idp = identityProvider(opts.Config)
	acc, accUp := upstreamAccess(opts.Config, opts.Logger)
	emit := func(rec *mcpreadyv1.Receipt) {
		f.observe(rec)
		if opts.Receipts != nil {
			opts.Receipts(rec)
		}
	}
	if wo := opts.Workflows; wo != nil {
		o := *wo
		o.Builder, o.Region, o.Emit, o.Now = opts.Builder, opts.Region, emit, opts.Now
		if opts.Ledger != nil {
			o.Ledger = opts.Ledger
		}
		f.workflows = workflow.New(o)
	}
	f.pipe = pipeline.New(pipeline.Options{Builder: opts.Builder, Region: opts.Region, Now: opts.Now, Telemetry: opts.Telemetry, Keys: opts.Keys, Emit: emit,
		Ledger: opts.Ledger, ReportDrift: opts.ReportDrift, Logger: opts.Logger, Access: acc, AccessUpstream: accUp, AuthClass: f.authClass, Workflows: f.workflows,
		ColdAfter: opts.ColdAfter})
	f.pool = upstream.NewPool(upstream.Options{
		Resolve:        f.resolve,
		Logger:         opts.Logger,
		Transport:      opts.Transport,
		Telemetry:      opts.Telemetry,
		OnToolsChanged: f.pins.toolsChanged,
		ClientInfo:     &mcp.Implementation{Name: "mcpready-agent", Version: opts.Builder.EmitterVersion},
		Access:         acc,

		MaxOwnerSessions: opts.MaxOwnerSessions,
	})
	f.probe = mcp.NewServer(&mcp.Implementation{Name: "mcpready-agent"}, nil)
	f.state.Store(indexState(&State{}))
	f.stop = make(chan struct{})
	if opts.RelistInterval > 0 {
		go f.pins.relistEvery(opts.RelistInterval, f.stop)
	}
	return f
}

// HTTPServer returns the HTTP server to serve h (normally the front) with:
// Options.ReadHeaderTimeout and IdleTimeout bound slow and idle client
// connections (no overall read or write timeout: response streams are
// long-lived).
func (f *Front) HTTPServer(h http.Handler) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: f.opts.ReadHeaderTimeout, IdleTimeout: f.opts.IdleTimeout, MaxHeaderBytes: 64 << 10}
}

// Close closes upstream sessions, the dedicated ones of live front
// sessions included, and ends the calls waiting for input. The pool is
// closed first, so that no dedicated session (stdio child) is opened
// after the live ones are closed.
func (f *Front) Close() {
	f.closing.Do(func() { close(f.stop) })
	f.pending.close()
	f.pool.Close()
	for _, s := range f.liveSessions() {
		s.mu.Lock()
		for t, up := range s.ups {
			_ = up.Close()
			s.slots[t]()
		}
		s.mu.Unlock()
	}
}

// Blocklist is the set of entries blocked on this host because of drift.
func (f *Front) Blocklist() *pin.Blocklist { return f.pins.block }

// SetState installs a new verified configuration. Calls in flight finish
// under the state they started with.
func (f *Front) SetState(st *State) {
	st = indexState(st)
	for name, pairs := range st.aggNames {
		if len(pairs) > 1 {
			f.opts.Logger.Warn("aggregate view name refused: it names more than one tool", "name", name, "tools", pairList(pairs))
		}
	}
	f.state.Store(st)
	f.pins.reset(st)
}

// pstate is st as the pipeline decides under it, with this host's drift
// blocks.
func (f *Front) pstate(st *State) pipeline.State {
	return pipeline.State{Decide: st.Decide, Checker: st.Checker, Circuits: st.Circuits, Budget: st.Budget, Drift: f.pins, Refusal: st.Refusal}
}

func indexState(st *State) *State {
	s := *st
	if s.Checker == nil {
		s.Checker = validate.NewChecker(validate.Rules{})
	}
	s.byTool = map[string]map[string][]string{}
	s.endpoints = map[string][]string{}
	for name, e := range s.Entries {
		id := e.GetIdentity()
		if id.GetServerName() == "" || id.GetToolName() == "" {
			continue
		}
		m := s.byTool[id.GetServerName()]
		if m == nil {
			m = map[string][]string{}
			s.byTool[id.GetServerName()] = m
		}
		m[id.GetToolName()] = append(m[id.GetToolName()], name)
		if eps := s.endpoints[id.GetServerName()]; id.GetEndpoint() != "" && !slices.Contains(eps, id.GetEndpoint()) {
			s.endpoints[id.GetServerName()] = append(eps, id.GetEndpoint())
		}
	}
	for _, eps := range s.endpoints {
		slices.Sort(eps)
	}
	s.aggNames = map[string][]toolPair{}
	for server, tools := range s.byTool {
		for tool := range tools {
			n := aggName(server, tool)
			s.aggNames[n] = append(s.aggNames[n], toolPair{server, tool})
		}
	}
	s.decls = make(map[string]*mcpreadyv1.Declaration, len(s.Declarations))
	for key, d := range s.Declarations {
		if name := d.GetServerName(); name != "" {
			key = name
		}
		s.decls[key] = d
	}
	return &s
}

// target is the upstream to dial for endpoint of server: the server's own
// (configured) upstream when endpoint is "" or that upstream's endpoint,
// else exactly endpoint. A route's call is sent to its entry's endpoint
// and nowhere else.
func (f *Front) target(server, endpoint string) upstream.Target {
	if endpoint == "" || endpoint == f.pool.Endpoint(upstream.Target{Server: server}) {
		return upstream.Target{Server: server}
	}
	return upstream.Target{Server: server, Endpoint: endpoint}
}

// targets are the upstreams of every verified entry of server.
func (f *Front) targets(st *State, server string) []upstream.Target {
	eps := st.endpoints[server]
	if len(eps) == 0 {
		return []upstream.Target{{Server: server}}
	}
	out := make([]upstream.Target, 0, len(eps))
	for _, ep := range eps {
		if t := f.target(server, ep); !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out
}

// resolve says how to reach t. With an endpoint (a route's): the agent
// config's upstream of that server when it reaches exactly that endpoint
// (its credentials go with it), else the endpoint itself when it is
// http(s), without credentials. Without one: the agent config first, else
// the first http(s) endpoint of a verified entry of the server.
func (f *Front) resolve(t upstream.Target) (config.Upstream, bool) {
	u, configured := f.opts.Config.Upstream(t.Server)
	httpURL := func(ep string) bool { return strings.HasPrefix(ep, "http://") || strings.HasPrefix(ep, "https://") }
	if t.Endpoint != "" {
		switch {
		case configured && (u.URL == t.Endpoint || len(u.Command) > 0 && "stdio:"+u.Command[0] == t.Endpoint):
			return u, true
		case httpURL(t.Endpoint):
			return config.Upstream{Name: t.Server, URL: t.Endpoint}, true
		}
		return config.Upstream{}, false
	}
	if configured {
		return u, true
	}
	for _, ep := range f.state.Load().endpoints[t.Server] {
		if httpURL(ep) {
			return config.Upstream{Name: t.Server, URL: ep}, true
		}
	}
	return config.Upstream{}, false
}

// authClass is how the agent authenticates to server's upstream at
// endpoint (config.Upstream.AuthClass); "" when it would not call it.
func (f *Front) authClass(server, endpoint string) string {
	u, ok := f.resolve(upstream.Target{Server: server, Endpoint: endpoint})
	if !ok {
		return ""
	}
	return u.AuthClass()
}

// ServeHTTP routes /mcp and /mcp/servers/<name>.
func (f *Front) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var server string
	switch {
	case r.URL.Path == "/mcp" || r.URL.Path == "/mcp/":
	case strings.HasPrefix(r.URL.Path, "/mcp/servers/"):
		server = strings.Trim(strings.TrimPrefix(r.URL.Path, "/mcp/servers/"), "/")
		if server == "" {
			http.NotFound(w, r)
			return
		}
	default:
		http.NotFound(w, r)
		return
	}
	if f.fromElsewhere(w, r) {
		return
	}
	id, ok := f.authenticated(w, r)
	if !ok {
		return
	}
	env, body, ok := precheck(w, r, f.opts.BodyTimeout, f.metrics.slowBodies.Inc)
	if !ok {
		return
	}
	if server != "" && !f.pool.Known(upstream.Target{Server: server}) {
		http.Error(w, "unknown upstream server "+server, http.StatusNotFound)
		return
	}
	v := f.view(server)
	if f.opts.Telemetry != nil {
		r = withRequestID(f.opts.Telemetry, r, env)
	}
	s, ok := v.ownSession(w, r, id.Name)
	if !ok {
		return
	}
	if s != nil {
		s.last.Store(f.opts.Now().UnixNano())
		s.busy.Add(1)
		defer s.busy.Add(-1)
	}
	if pv := r.Header.Get(protocolHeader); pv >= statelessProtocol {
		if env != nil && !v.paramHeadersMatch(w, r, env) {
			return
		}
		restoreBody(r, body)
		v.stateless.ServeHTTP(w, r)
		return
	}
	if env != nil && v.serveFastCall(w, r, env, id) {
		return
	}
	restoreBody(r, body)
	if r.Method == http.MethodPost && r.Header.Get("Mcp-Session-Id") == "" { // the go-sdk opens a session
		release, err := f.frontSessions.take(id.Name, false)
		if err != nil && f.evictIdle(id.Name) {
			release, err = f.frontSessions.take(id.Name, false)
		}
		if err != nil {
			release, err = f.frontSessions.acquire(id.Name) // counted
		}
		if err != nil {
			var rid json.RawMessage
			if env != nil {
				rid = env.ID
			}
			writeRPCError(w, http.StatusServiceUnavailable, rid, codeRefused, err.Error())
			return
		}
		slot := &sessionSlot{release: release}
		defer slot.unclaimed()
		r = r.WithContext(context.WithValue(r.Context(), sessionSlotKey{}, slot))
	}
	v.stateful.ServeHTTP(w, r)
}

// ownSession refuses (HTTP 403, counted) a request presenting a session
// that another principal opened: a session, with its dedicated upstream
// session and its client's elicitation channel, belongs to its opener.
// It reports whether r may go on, and the session r presents (nil for
// none, or one unknown to the front: the go-sdk answers 404).
func (v *view) ownSession(w http.ResponseWriter, r *http.Request, principal string) (*session, bool) {
	sid := r.Header.Get("Mcp-Session-Id")
	if sid == "" {
		return nil, true
	}
	v.mu.Lock()
	s := v.bySID[sid]
	v.mu.Unlock()
	if s == nil {
		return nil, true
	}
	s.mu.Lock()
	owner := s.opener.Name
	s.mu.Unlock()
	if owner == principal {
		return s, true
	}
	v.f.metrics.sessionsForeign.Inc()
	writeRPCError(w, http.StatusForbidden, nil, codeRefused, "this session belongs to another principal; initialize a session of your own")
	return nil, false
}

// evictIdle closes principal's least recently used front session that
// holds a cap slot, has no request in progress and has been idle for
// evictIdleAfter, and frees its slot at once; it reports whether it did.
// Its client's next request gets 404, on which MCP clients initialize a
// new session. Sessions of other principals are never closed.
func (f *Front) evictIdle(principal string) bool {
	cutoff := f.opts.Now().Add(-f.evictIdleAfter).UnixNano()
	var lru *session
	for _, s := range f.liveSessions() {
		s.mu.Lock()
		mine := s.opener.Name == principal && s.ss != nil
		s.mu.Unlock()
		if !mine || s.slot == nil || !s.slot.claimed.Load() || s.busy.Load() > 0 || s.last.Load() > cutoff {
			continue
		}
		if lru == nil || s.last.Load() < lru.last.Load() {
			lru = s
		}
	}
	if lru == nil {
		return false
	}
	lru.mu.Lock()
	ss := lru.ss
	lru.mu.Unlock()
	_ = ss.Close()
	lru.slot.release()
	f.metrics.frontSessionsEvicted.Inc()
	return true
}

// fromElsewhere refuses (HTTP 403, counted) a request that a web page of
// another origin sent (its Origin or Sec-Fetch-Site says so; origins of
// config trustedOrigins excepted) or, on a loopback listener, one whose
// Host is not a loopback name (DNS rebinding), and reports whether it did.
// Clients outside a browser send neither header.
func (f *Front) fromElsewhere(w http.ResponseWriter, r *http.Request) bool {
	reason := ""
	if la, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok && loopback.Is(la.String()) && !loopbackHost(r.Host) {
		reason = "host"
	} else if f.origins.Check(r) != nil {
		reason = "origin"
	}
	if reason == "" {
		return false
	}
	f.metrics.foreignOrigin.WithLabelValues(reason).Inc()
	http.Error(w, "forbidden: a request from another web origin (or a non-loopback Host on the loopback listener); a browser-based client's origin must be in trustedOrigins", http.StatusForbidden)
	return true
}

// Guard is h behind the front's refusal of requests from elsewhere (see
// fromElsewhere), for the agent's other endpoints on the same listener
// (metrics, health): a page that rebinds its name to the loopback address
// must not read them either.
func (f *Front) Guard(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !f.fromElsewhere(w, r) {
			h.ServeHTTP(w, r)
		}
	})
}

// loopbackHost reports whether a Host header (with or without a port)
// names a loopback host.
func loopbackHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	return loopback.Host(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]"))
}

// authenticated is r's identity, or false after answering 401.
func (f *Front) authenticated(w http.ResponseWriter, r *http.Request) (config.Identity, bool) {
	id, err := f.authenticate(r.Header)
	if err != nil {
		w.Header().Set("WWW-Authenticate", `Bearer realm="mcpready-agent"`)
		http.Error(w, "unauthorized: "+err.Error(), http.StatusUnauthorized)
		return id, false
	}
	return id, true
}

// authenticate maps the request's bearer token to its identity: a
// configured token, else a JWT of the identity provider.
func (f *Front) authenticate(h http.Header) (config.Identity, error) {
	tok := bearerOf(h)
	id, err := f.opts.Config.Authenticate(tok)
	if err != nil && f.idp != nil && access.LooksLikeJWT(tok) {
		return f.authenticateJWT(tok)
	}
	return id, err
}

// bearerOf is the request's bearer token, "" when none.
func bearerOf(h http.Header) string {
	if a := h.Get("Authorization"); a != "" {
		scheme, rest, _ := strings.Cut(a, " ")
		if strings.EqualFold(scheme, "Bearer") {
			return strings.TrimSpace(rest)
		}
	}
	return ""
}

// view is one endpoint: a stateful and a stateless go-sdk handler.
type view struct {
	f         *Front
	server    string // "" for the aggregate view
	stateful  http.Handler
	stateless http.Handler
	shared    *mcp.Server // the stateless handler's server

	mu       sync.Mutex
	sessions map[*session]struct{} // live stateful sessions
	bySID    map[string]*session   // the same, by go-sdk session id (fast path)
}

func (f *Front) view(server string) *view {
	f.mu.Lock()
	defer f.mu.Unlock()
	if v := f.views[server]; v != nil {
		return v
	}
	v := &view{f: f, server: server, sessions: map[*session]struct{}{}, bySID: map[string]*session{}}
	v.shared = v.newServer(nil)
	v.stateless = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return v.shared },
		&mcp.StreamableHTTPOptions{Stateless: true, Logger: f.opts.Logger, PropagateRequestCancellation: true})
	v.stateful = mcp.NewStreamableHTTPHandler(func(r *http.Request) *mcp.Server {
		if r.Header.Get("Mcp-Session-Id") != "" {
			return f.probe // only consulted for its protocol versions
		}
		slot, _ := r.Context().Value(sessionSlotKey{}).(*sessionSlot)
		return v.newServer(&session{v: v, slot: slot})
	}, &mcp.StreamableHTTPOptions{Logger: f.opts.Logger, SessionTimeout: f.opts.SessionIdleTimeout})
	f.views[server] = v
	return v
}
