// Package otelcoltest runs the OpenTelemetry Collector's own OTLP receiver
// (go.opentelemetry.io/collector/receiver/otlpreceiver, gRPC and HTTP) in
// the test process and keeps what it receives, so that tests assert on
// spans and metrics exactly as a collector decoded them from the wire.
//
// It is for tests only: it must not be imported by anything but _test
// files, and it exports nothing it received.
package otelcoltest

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/receiver/otlpreceiver"
	"go.opentelemetry.io/collector/receiver/receivertest"
)

// Span is one received span, flattened.
type Span struct {
	Name, Kind              string
	TraceID, SpanID, Parent string
	Attrs                   map[string]any
	Events                  []Event
	Status                  string
	Service                 string
}

// Event is one span event.
type Event struct {
	Name  string
	Attrs map[string]any
}

// Collector is a running OTLP receiver.
type Collector struct {
	// GRPC and HTTP are the receiver's endpoint URLs
	// (http://127.0.0.1:PORT), for the OTLP gRPC and HTTP exporters.
	GRPC, HTTP string

	mu      sync.Mutex
	spans   []Span
	metrics map[string]int // metric name -> data points received
}

// Start runs a receiver on two free loopback ports until the test ends.
func Start(t testing.TB) *Collector {
	t.Helper()
	c := &Collector{metrics: map[string]int{}}
	f := otlpreceiver.NewFactory()
	cfg := f.CreateDefaultConfig().(*otlpreceiver.Config)
	grpcAddr, httpAddr := freePort(t), freePort(t)
	cfg.Protocols.GRPC.GetOrInsertDefault().NetAddr.Endpoint = grpcAddr
	cfg.Protocols.HTTP.GetOrInsertDefault().ServerConfig.NetAddr.Endpoint = httpAddr
	c.GRPC, c.HTTP = "http://"+grpcAddr, "http://"+httpAddr
	traces, err := consumer.NewTraces(func(_ context.Context, td ptrace.Traces) error { c.addTraces(td); return nil })
	if err != nil {
		t.Fatal(err)
	}
	metrics, err := consumer.NewMetrics(func(_ context.Context, md pmetric.Metrics) error { c.addMetrics(md); return nil })
	if err != nil {
		t.Fatal(err)
	}
	set := receivertest.NewNopSettings(f.Type())
	tr, err := f.CreateTraces(context.Background(), set, cfg, traces)
	if err != nil {
		t.Fatal(err)
	}
	mr, err := f.CreateMetrics(context.Background(), set, cfg, metrics)
	if err != nil {
		t.Fatal(err)
	}
	host := componenttest.NewNopHost()
	// The factory shares one receiver between signals: starting both is
	// starting it once.
	for _, r := range []component.Component{tr, mr} {
		if err := r.Start(context.Background(), host); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		_ = tr.Shutdown(context.Background())
		_ = mr.Shutdown(context.Background())
	})
	return c
}

func freePort(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func attrs(m pcommon.Map) map[string]any {
	out := make(map[string]any, m.Len())
	m.Range(func(k string, v pcommon.Value) bool {
		out[k] = v.AsRaw()
		return true
	})
	return out
}

func (c *Collector) addTraces(td ptrace.Traces) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range td.ResourceSpans().Len() {
		rs := td.ResourceSpans().At(i)
		service, _ := rs.Resource().Attributes().Get("service.name")
		for j := range rs.ScopeSpans().Len() {
			ss := rs.ScopeSpans().At(j).Spans()
			for k := range ss.Len() {
				s := ss.At(k)
				sp := Span{Name: s.Name(), Kind: s.Kind().String(), TraceID: s.TraceID().String(), SpanID: s.SpanID().String(),
					Parent: s.ParentSpanID().String(), Attrs: attrs(s.Attributes()), Status: s.Status().Code().String(), Service: service.AsString()}
				for e := range s.Events().Len() {
					ev := s.Events().At(e)
					sp.Events = append(sp.Events, Event{Name: ev.Name(), Attrs: attrs(ev.Attributes())})
				}
				c.spans = append(c.spans, sp)
			}
		}
	}
}

func (c *Collector) addMetrics(md pmetric.Metrics) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range md.ResourceMetrics().Len() {
		sms := md.ResourceMetrics().At(i).ScopeMetrics()
		for j := range sms.Len() {
			ms := sms.At(j).Metrics()
			for k := range ms.Len() {
				m := ms.At(k)
				n := 0
				if m.Type() == pmetric.MetricTypeHistogram {
					n = m.Histogram().DataPoints().Len()
				}
				c.metrics[m.Name()+" "+m.Unit()] += n
			}
		}
	}
}

// Spans returns the spans received so far.
func (c *Collector) Spans() []Span {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Span(nil), c.spans...)
}

// WaitSpans waits until at least n spans arrived (or fails the test).
func (c *Collector) WaitSpans(t testing.TB, n int) []Span {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if s := c.Spans(); len(s) >= n {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("collector received %d spans, want %d", len(c.Spans()), n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// HistogramPoints returns how many histogram data points of the metric
// "name unit" arrived.
func (c *Collector) HistogramPoints(nameUnit string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.metrics[nameUnit]
}
