package upstream

import (
	"context"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpready/mcpready/agent/config"
	"github.com/mcpready/mcpready/agent/internal/mcptest"
)

// BenchmarkCallToolTransport compares the fast-path tools/call over the
// default directTransport with the same call over net/http's Transport,
// alternating so both see the same machine state.
func BenchmarkCallToolTransport(b *testing.B) {
	up := mcptest.New(b, mcptest.Options{})
	resolve := func(Target) (config.Upstream, bool) { return config.Upstream{Name: "test", URL: up.URL}, true }
	session := func(p *Pool) *Session {
		b.Cleanup(p.Close)
		s, err := p.Shared(context.Background(), Target{Server: "test"})
		if err != nil {
			b.Fatal(err)
		}
		return s
	}
	std := session(NewPool(Options{Resolve: resolve, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}))
	direct := session(NewPool(Options{Resolve: resolve}))
	call := func(s *Session) time.Duration {
		t0 := time.Now()
		res, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "benchmark"}})
		if err != nil || res.IsError {
			b.Fatalf("call: %v %+v", err, res)
		}
		return time.Since(t0)
	}
	var sl, dl []time.Duration
	b.ResetTimer()
	for i := range b.N {
		if i%2 == 0 {
			sl, dl = append(sl, call(std)), append(dl, call(direct))
		} else {
			dl, sl = append(dl, call(direct)), append(sl, call(std))
		}
	}
	b.StopTimer()
	slices.Sort(sl)
	slices.Sort(dl)
	b.ReportMetric(float64(sl[len(sl)/2].Microseconds()), "nethttp-p50-µs")
	b.ReportMetric(float64(dl[len(dl)/2].Microseconds()), "direct-p50-µs")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkDecodeCallResult decodes the result of the default echo tool
// (typed output: its JSON as text content and as structuredContent).
func BenchmarkDecodeCallResult(b *testing.B) {
	raw := []byte(`{"content":[{"type":"text","text":"{\"text\":\"benchmark\"}"}],"structuredContent":{"text":"benchmark"}}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, _, _, err := decodeCallResult(raw); err != nil {
			b.Fatal(err)
		}
	}
}
