package ingest

import "github.com/prometheus/client_golang/prometheus"

type metrics struct {
	batches  *prometheus.CounterVec
	receipts prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		batches: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "mcpready", Subsystem: "ingest", Name: "batches_total",
			Help: "Receipt batches by result: accepted, duplicate or the rejection reason."}, []string{"result"}),
		receipts: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "mcpready", Subsystem: "ingest", Name: "receipts_stored_total",
			Help: "Receipts durably stored."}),
	}
	if reg != nil {
		reg.MustRegister(m.batches, m.receipts)
	}
	return m
}
