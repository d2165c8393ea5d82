package agent

import (
	"context"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/mcpready/mcpready/agent/config"
	"github.com/mcpready/mcpready/agent/internal/mcptest"
	"github.com/mcpready/mcpready/agent/telemetry"
	"github.com/mcpready/mcpready/artifact"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/internal/enrolltest"
	"github.com/mcpready/mcpready/internal/otelcoltest"
	"github.com/mcpready/mcpready/sign"
)

// benchAgent runs a full agent (verified configuration, decision, invoke,
// validation, receipts into the fsync'd spool) in front of up, configured
// without a control plane by applying signed resources directly, until b
// ends.
func benchAgent(b testing.TB, up *mcptest.Upstream, tel *telemetry.Telemetry) *Agent {
	b.Helper()
	a := configuredAgent(b, up, tel)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = a.Run(ctx); close(done) }()
	b.Cleanup(func() { cancel(); <-done })
	waitInstalled(a)
	return a
}

// waitInstalled waits until a serves the configuration applied to it.
func waitInstalled(a *Agent) {
	for a.Installed() != a.Sync().Snapshot().Generation {
		time.Sleep(time.Millisecond)
	}
}

// configuredAgent is benchAgent's agent, configured but not running.
func configuredAgent(b testing.TB, up *mcptest.Upstream, tel *telemetry.Telemetry) *Agent {
	b.Helper()
	rootKey, err := sign.GenerateKey(sign.AlgorithmEd25519)
	if err != nil {
		b.Fatal(err)
	}
	a, err := New(Options{Root: rootKey.Public(), NodeID: "bench", Listen: "127.0.0.1:0", DataDir: b.TempDir(),
		Config: writeConfig(b, b.TempDir()), Telemetry: tel})
	if err != nil {
		b.Fatal(err)
	}
	signed := func(o *artifact.Object) *mcpreadyv1.Resource {
		bundle, _, err := sign.Sign(o, rootKey)
		if err != nil {
			b.Fatal(err)
		}
		return &mcpreadyv1.Resource{Name: o.Metadata.Name, Version: "1", Bundle: bundle}
	}
	apply := func(k artifact.Kind, rs ...*mcpreadyv1.Resource) {
		if err := a.Sync().Apply(k, rs, nil, false); err != nil {
			b.Fatal(err)
		}
	}
	apply(artifact.KindTrustPolicy, signed(artifact.New(artifact.KindTrustPolicy, "default", &mcpreadyv1.TrustPolicy{})))
	for _, o := range enrolltest.Qualified(b, config.Upstream{Name: "test", URL: up.URL}) {
		apply(artifact.KindRegistryEntry, signed(o))
	}
	apply(artifact.KindPolicy, signed(artifact.New(artifact.KindPolicy, "default", &mcpreadyv1.Policy{
		Inventory:   []string{"test/*"},
		Evidence:    &mcpreadyv1.EvidenceRules{OnUnknown: mcpreadyv1.UnknownEvidenceAction_UNKNOWN_EVIDENCE_ACTION_ALLOW},
		Principals:  []*mcpreadyv1.PrincipalRule{{PrincipalClass: "default", Allow: []string{"*"}}},
		SideEffects: []*mcpreadyv1.SideEffectRule{{Match: "test/echo", Assigned: mcpreadyv1.SideEffectClass_SIDE_EFFECT_CLASS_READ_ONLY}},
		Results:     &mcpreadyv1.ResultRules{InjectionTripwire: true},
	})))
	return a
}

var benchTransport = &http.Transport{MaxIdleConns: 512, MaxIdleConnsPerHost: 512, IdleConnTimeout: time.Minute}

func benchSession(b testing.TB, endpoint string) *mcp.ClientSession {
	b.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "bench"}, nil)
	cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: &http.Client{Transport: benchTransport},
		DisableStandaloneSSE: true, MaxRetries: -1}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cs.Close() })
	return cs
}

func echo(b testing.TB, cs *mcp.ClientSession) {
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "benchmark"}})
	if err != nil || res.IsError {
		b.Fatalf("call: %v %+v", err, res)
	}
}

func percentile(d []time.Duration, p float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[int(float64(len(s)-1)*p)]
}

// loadGen drives clients sessions, two calls in flight each.
type loadGen struct{ sessions []*mcp.ClientSession }

func newLoadGen(b *testing.B, endpoint string, clients int) *loadGen {
	g := &loadGen{sessions: make([]*mcp.ClientSession, clients)}
	for i := range g.sessions {
		g.sessions[i] = benchSession(b, endpoint)
		echo(b, g.sessions[i])
	}
	return g
}

// run saturates the endpoint for d and returns the calls completed.
func (g *loadGen) run(b *testing.B, d time.Duration) int64 {
	var n atomic.Int64
	var wg sync.WaitGroup
	stop := time.Now().Add(d)
	for _, cs := range g.sessions {
		for range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for time.Now().Before(stop) {
					echo(b, cs)
					n.Add(1)
				}
			}()
		}
	}
	wg.Wait()
	return n.Load()
}

// BenchmarkProxyOverhead measures tools/call on a loopback go-sdk upstream
// directly and through the full agent, side by side in one run, and reports
// agent ÷ direct ratios of p50 and p99 latency and of saturation throughput.
//
// tracing=off, the production default, also calls through copyProxy, which
// decides, checks and records nothing, in the same interleaved loop: its
// floor-p50-ratio and floor-p99-ratio are the cost of one more HTTP hop on
// this machine at that moment. The copy proxy relays the upstream's event
// stream as it is, while the agent answers a fast call with one JSON body,
// which its client reads more cheaply: the difference between the two
// ratios is the agent's own cost less that saving. tracing=on runs the agent with
// OpenTelemetry on (every call sampled, spans and histograms exported over
// OTLP gRPC to a real Collector OTLP receiver in this process, whose work
// is counted against the agent).
func BenchmarkProxyOverhead(b *testing.B) {
	b.Run("tracing=off", func(b *testing.B) {
		up := mcptest.New(b, mcptest.Options{})
		a := benchAgent(b, up, nil)
		proxyOverhead(b, up, "http://"+a.Addr()+"/mcp/servers/test", newCopyProxy(b, up.URL))
	})
	b.Run("tracing=on", func(b *testing.B) {
		col := otelcoltest.Start(b)
		tel, err := telemetry.New(context.Background(), telemetry.Options{Endpoint: col.GRPC, Protocol: telemetry.ProtocolGRPC, Sampler: sdktrace.AlwaysSample()})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
		up := mcptest.New(b, mcptest.Options{})
		a := benchAgent(b, up, tel)
		proxyOverhead(b, up, "http://"+a.Addr()+"/mcp/servers/test", "")
	})
}

// proxyOverhead compares calls to up directly with calls through the agent
// at agentURL and, unless floorURL is empty, through the copy proxy there.
func proxyOverhead(b *testing.B, up *mcptest.Upstream, agentURL, floorURL string) {
	direct, viaAgent := benchSession(b, up.URL), benchSession(b, agentURL)
	var viaFloor *mcp.ClientSession
	if floorURL != "" {
		viaFloor = benchSession(b, floorURL)
	}
	for range 50 {
		echo(b, direct)
		echo(b, viaAgent)
		if viaFloor != nil {
			echo(b, viaFloor)
		}
	}
	// The calls of an iteration run one after another, in a random order,
	// so that the work each path leaves behind it (receipts after an
	// answer, a stream's end) delays each of the others equally often: in
	// a fixed order the agent's receipt work after its answer fell on the
	// next direct call and flattered the ratio by about 0.08.
	order := rand.New(rand.NewPCG(1, 2))
	paths := []*mcp.ClientSession{direct, viaAgent}
	if viaFloor != nil {
		paths = append(paths, viaFloor)
	}
	lat := make([][]time.Duration, len(paths))
	for i := range lat {
		lat[i] = make([]time.Duration, 0, b.N)
	}
	b.ResetTimer()
	for range b.N {
		for _, i := range order.Perm(len(paths)) {
			t := time.Now()
			echo(b, paths[i])
			lat[i] = append(lat[i], time.Since(t))
		}
	}
	b.StopTimer()
	// Saturation throughput, in alternating windows so that both see the
	// same background load on a shared machine.
	const clients, window, rounds = 8, 250 * time.Millisecond, 6
	dg, ag := newLoadGen(b, up.URL, clients), newLoadGen(b, agentURL, clients)
	var dn, an int64
	for range rounds {
		dn += dg.run(b, window)
		an += ag.run(b, window)
	}
	dt := float64(dn) / (window * rounds).Seconds()
	at := float64(an) / (window * rounds).Seconds()
	dl, al := lat[0], lat[1]
	b.ReportMetric(float64(percentile(dl, 0.5).Microseconds()), "direct-p50-µs")
	b.ReportMetric(float64(percentile(al, 0.5).Microseconds()), "agent-p50-µs")
	b.ReportMetric(float64(percentile(dl, 0.99).Microseconds()), "direct-p99-µs")
	b.ReportMetric(float64(percentile(al, 0.99).Microseconds()), "agent-p99-µs")
	b.ReportMetric(float64(percentile(al, 0.5))/float64(percentile(dl, 0.5)), "p50-ratio")
	b.ReportMetric(float64(percentile(al, 0.99))/float64(percentile(dl, 0.99)), "p99-ratio")
	if viaFloor != nil {
		fl := lat[2]
		b.ReportMetric(float64(percentile(fl, 0.5))/float64(percentile(dl, 0.5)), "floor-p50-ratio")
		b.ReportMetric(float64(percentile(fl, 0.99))/float64(percentile(dl, 0.99)), "floor-p99-ratio")
	}
	b.ReportMetric(dt, "direct-calls/s")
	b.ReportMetric(at, "agent-calls/s")
	b.ReportMetric(at/dt, "throughput-ratio")
	b.ReportMetric(0, "ns/op")
}
