package discovery

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the discovery service's Prometheus metrics. A nil *Metrics
// records nothing.
type Metrics struct {
	connectedStreams prometheus.Gauge
	connectedAgents  prometheus.Gauge
	pushes           *prometheus.CounterVec
	acks             *prometheus.CounterVec
	pushLatency      prometheus.Histogram
}

// NewMetrics registers the discovery metrics on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		connectedStreams: prometheus.NewGauge(prometheus.GaugeOpts{Name: "mcpready_discovery_connected_streams", Help: "Open agent discovery streams."}),
		connectedAgents:  prometheus.NewGauge(prometheus.GaugeOpts{Name: "mcpready_discovery_connected_agents", Help: "Distinct node ids with at least one open discovery stream."}),
		pushes:           prometheus.NewCounterVec(prometheus.CounterOpts{Name: "mcpready_discovery_pushes_total", Help: "Responses pushed to agents."}, []string{"type_url"}),
		acks:             prometheus.NewCounterVec(prometheus.CounterOpts{Name: "mcpready_discovery_acks_total", Help: "ACKs and NACKs received from agents."}, []string{"type_url", "result"}),
		pushLatency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "mcpready_discovery_push_latency_seconds", Help: "Time from snapshot build to a push being sent.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 14)}),
	}
	reg.MustRegister(m.connectedStreams, m.connectedAgents, m.pushes, m.acks, m.pushLatency)
	return m
}

func (m *Metrics) connected(d float64) {
	if m != nil {
		m.connectedStreams.Add(d)
	}
}

func (m *Metrics) agents(n int) {
	if m != nil {
		m.connectedAgents.Set(float64(n))
	}
}

func (m *Metrics) pushed(typeURL string, latency time.Duration) {
	if m != nil {
		m.pushes.WithLabelValues(typeURL).Inc()
		m.pushLatency.Observe(latency.Seconds())
	}
}

func (m *Metrics) acked(typeURL string, ok bool) {
	if m != nil {
		r := "ack"
		if !ok {
			r = "nack"
		}
		m.acks.WithLabelValues(typeURL, r).Inc()
	}
}
