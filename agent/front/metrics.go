package front

import (
	"slices"

	"github.com/prometheus/client_golang/prometheus"

	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/readiness"
)

// metrics are the front's Prometheus metrics.
type metrics struct {
	calls   *prometheus.CounterVec
	latency prometheus.Histogram
	// partialLists counts tools/list listings cut at maxListPages, by server.
	partialLists *prometheus.CounterVec
	// sessionsRefused counts initializes refused at a dedicated upstream
	// session cap, by scope ("principal" or "total").
	sessionsRefused *prometheus.CounterVec
	// sessionsOpen is the number of dedicated upstream sessions held.
	sessionsOpen prometheus.Gauge
	// frontSessionsRefused counts initializes refused at a front session
	// cap, by scope ("principal" or "total"); frontSessionsOpen is the
	// number of stateful front sessions held.
	frontSessionsRefused *prometheus.CounterVec
	frontSessionsOpen    prometheus.Gauge
	// frontSessionsEvicted counts idle front sessions closed to make room
	// for a new one of the same principal at a cap.
	frontSessionsEvicted prometheus.Counter
	// callsRefused counts tool calls and methods refused at a cap on
	// calls in progress, by scope; callsInProgress is how many run.
	callsRefused    *prometheus.CounterVec
	callsInProgress prometheus.Gauge
	// heldRefused and roundsRefused count calls refused at the caps on
	// upstream calls held open across input rounds and on pending input
	// rounds, by scope ("principal" or "total").
	heldRefused, roundsRefused *prometheus.CounterVec
	// sessionsForeign counts requests refused for presenting a session
	// another principal opened.
	sessionsForeign prometheus.Counter
	// foreignOrigin counts requests refused as sent from another web
	// origin, by reason (origin, host).
	foreignOrigin *prometheus.CounterVec
	// instructionsWithheld counts upstream instructions withheld from
	// clients by the injection tripwire, by server.
	instructionsWithheld *prometheus.CounterVec
	// inputRefused counts upstream requests for client input (sampling,
	// elicitation) refused by the injection tripwire, by server.
	inputRefused *prometheus.CounterVec
	// clientRequestsRefused counts upstream requests towards the client
	// that Policy.clientRequests does not grant, by server and method.
	clientRequestsRefused *prometheus.CounterVec
	// slowBodies counts requests refused because their body did not arrive in time.
	slowBodies prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpready_agent_tool_calls_total", Help: "Tool calls decided by this agent, by outcome class.",
		}, []string{"outcome"}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "mcpready_agent_tool_call_seconds", Help: "End-to-end latency of tool calls through this agent.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2.5, 14),
		}),
		partialLists: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpready_agent_tools_list_partial_total", Help: "Tool listings cut at the page bound (later tools neither listed nor pinned), by server.",
		}, []string{"server"}),
		sessionsRefused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpready_agent_upstream_sessions_refused_total", Help: "Transparent-view sessions refused at a dedicated upstream session cap, by scope (principal, total); owners: calls refused at the bound on shared sessions opened with principals' own tokens.",
		}, []string{"scope"}),
		sessionsOpen: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "mcpready_agent_upstream_sessions_open", Help: "Dedicated upstream sessions (stdio: child processes) held for transparent-view sessions.",
		}),
		frontSessionsRefused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpready_agent_sessions_refused_total", Help: "Requests that would open a stateful front session refused at a front session cap, by scope (principal, total).",
		}, []string{"scope"}),
		frontSessionsOpen: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "mcpready_agent_sessions_open", Help: "Stateful front sessions (clients' MCP sessions with this agent) held.",
		}),
		frontSessionsEvicted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "mcpready_agent_sessions_evicted_total", Help: "Idle front sessions closed to make room for a new session of the same principal at a front session cap.",
		}),
		callsRefused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpready_agent_calls_refused_total", Help: "Tool calls and other upstream requests refused at a cap on calls in progress, by scope (principal, total).",
		}, []string{"scope"}),
		callsInProgress: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "mcpready_agent_calls_in_progress", Help: "Tool calls and other upstream requests of clients the agent is running.",
		}),
		heldRefused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpready_agent_held_calls_refused_total", Help: "Stateless calls refused at the cap on upstream calls held open across input rounds, by scope (principal, total).",
		}, []string{"scope"}),
		roundsRefused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpready_agent_pending_rounds_refused_total", Help: "Input rounds refused at the cap on rounds waiting for a stateless client's answer, by scope (principal, total).",
		}, []string{"scope"}),
		foreignOrigin: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpready_agent_foreign_origin_refused_total", Help: "Requests refused as sent by a web page of another origin (origin: Origin or Sec-Fetch-Site) or through DNS rebinding (host: a non-loopback Host on a loopback listener).",
		}, []string{"reason"}),
		instructionsWithheld: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpready_agent_instructions_withheld_total", Help: "Upstream initialize instructions withheld from clients because they tripped the injection tripwire, by server.",
		}, []string{"server"}),
		inputRefused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpready_agent_input_requests_refused_total", Help: "Upstream requests for client input (sampling, elicitation) refused because their text tripped the injection tripwire, by server.",
		}, []string{"server"}),
		clientRequestsRefused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpready_agent_client_requests_refused_total", Help: "Upstream requests towards the client (sampling, elicitation, roots) refused because the policy's clientRequests do not grant them, by server and method.",
		}, []string{"server", "method"}),
		sessionsForeign: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "mcpready_agent_foreign_session_refused_total", Help: "Requests refused because they presented a session another principal opened.",
		}),
		slowBodies: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "mcpready_agent_slow_request_bodies_total", Help: "Requests answered HTTP 408 because their body did not arrive within the body timeout.",
		}),
	}
	if reg != nil {
		reg.MustRegister(m.calls, m.latency, m.partialLists, m.sessionsRefused, m.sessionsOpen, m.frontSessionsRefused, m.frontSessionsOpen, m.frontSessionsEvicted, m.callsRefused, m.callsInProgress, m.heldRefused, m.roundsRefused, m.sessionsForeign, m.foreignOrigin, m.instructionsWithheld, m.inputRefused, m.clientRequestsRefused, m.slowBodies)
	}
	return m
}

// observe records one finished receipt.
func (f *Front) observe(rec *mcpreadyv1.Receipt) {
	f.metrics.calls.WithLabelValues(readiness.OutcomeName(rec.GetOutcome())).Inc()
	if l := rec.GetLatency(); l != nil {
		f.metrics.latency.Observe(l.AsDuration().Seconds())
	}
}

// notifyToolsChanged tells every front session that may show server's tools
// to re-list them.
func (f *Front) notifyToolsChanged(server string) {
	for _, s := range f.liveSessions(server, "") {
		s.notifyToolsChanged()
	}
}

// liveSessions are the live stateful front sessions of the named views
// ("" is the aggregate view), of every view when none is named.
func (f *Front) liveSessions(views ...string) []*session {
	f.mu.Lock()
	defer f.mu.Unlock()
	var sessions []*session
	for name, v := range f.views {
		if len(views) > 0 && !slices.Contains(views, name) {
			continue
		}
		v.mu.Lock()
		for s := range v.sessions {
			sessions = append(sessions, s)
		}
		v.mu.Unlock()
	}
	return sessions
}
