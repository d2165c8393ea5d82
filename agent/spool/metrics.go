package spool

import "github.com/prometheus/client_golang/prometheus"

type metrics struct {
	emitted, spooled, acked, dropped, shed prometheus.Counter
}

func newMetrics(reg prometheus.Registerer, s *Spool) *metrics {
	c := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Namespace: "mcpready", Subsystem: "receipts", Name: name, Help: help})
	}
	m := &metrics{
		emitted: c("emitted_total", "Receipts handed to the spool."),
		spooled: c("spooled_total", "Receipts durably written to the spool."),
		acked:   c("acknowledged_total", "Receipts in batches the control plane acknowledged."),
		dropped: c("dropped_total", "Receipts refused because the spool was full."),
		shed:    c("shed_total", "Receipts of requests that reached no upstream, not spooled because the spool was past its bound for them."),
	}
	if reg == nil {
		return m
	}
	depth := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "mcpready", Subsystem: "receipts", Name: "spool_depth",
		Help: "Receipts in the spool not yet acknowledged."}, func() float64 { return float64(s.Stats().Depth) })
	age := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "mcpready", Subsystem: "receipts", Name: "spool_oldest_age_seconds",
		Help: "Age of the oldest unacknowledged receipt."}, func() float64 { return s.Stats().OldestAge.Seconds() })
	bytes := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "mcpready", Subsystem: "receipts", Name: "spool_bytes",
		Help: "Bytes of spool files on disk."}, func() float64 { return float64(s.Stats().Bytes) })
	for _, col := range []prometheus.Collector{m.emitted, m.spooled, m.acked, m.dropped, m.shed, depth, age, bytes} {
		if err := reg.Register(col); err != nil {
			s.log.Warn("metric not registered", "err", err)
		}
	}
	return m
}
