package front

import (
	"github.com/prometheus/client_golang/prometheus"

	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/readiness"
)

// metrics are the front's Prometheus metrics.
type metrics struct {
	calls   *prometheus.CounterVec
	latency prometheus.Histogram
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
	}
	if reg != nil {
		reg.MustRegister(m.calls, m.latency)
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
	f.mu.Lock()
	var sessions []*session
	for _, name := range []string{server, ""} {
		if v := f.views[name]; v != nil {
			v.mu.Lock()
			for s := range v.sessions {
				sessions = append(sessions, s)
			}
			v.mu.Unlock()
		}
	}
	f.mu.Unlock()
	for _, s := range sessions {
		s.notifyToolsChanged()
	}
}
