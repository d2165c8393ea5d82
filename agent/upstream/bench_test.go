package upstream

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpready/mcpready/agent/config"
	"github.com/mcpready/mcpready/agent/internal/mcptest"
)

// BenchmarkPassThroughFloor is the floor under BenchmarkProxyOverhead
// (package agent): the same go-sdk client and upstream, directly and through
// a proxy that does nothing but copy each request and answer over
// directTransport. No proxy that decides, validates and records can have a
// lower p50-ratio on this machine.
func BenchmarkPassThroughFloor(b *testing.B) {
	up := mcptest.New(b, mcptest.Options{})
	hc := &http.Client{Transport: newDirectTransport()}
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		req, err := http.NewRequestWithContext(r.Context(), r.Method, up.URL, bytes.NewReader(body))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		req.Header = r.Header.Clone()
		resp, err := hc.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, resp.Body)
	}))
	b.Cleanup(proxy.Close)
	session := func(url string) *mcp.ClientSession {
		c := mcp.NewClient(&mcp.Implementation{Name: "bench"}, nil)
		cs, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: url, DisableStandaloneSSE: true, MaxRetries: -1},
			&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { cs.Close() })
		return cs
	}
	direct, via := session(up.URL), session(proxy.URL+"/mcp")
	call := func(cs *mcp.ClientSession) time.Duration {
		t0 := time.Now()
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "benchmark"}})
		if err != nil || res.IsError {
			b.Fatalf("call: %v %+v", err, res)
		}
		return time.Since(t0)
	}
	for range 50 {
		call(direct)
		call(via)
	}
	dl := make([]time.Duration, 0, b.N)
	pl := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N { // interleaved so both see the same machine state
		dl = append(dl, call(direct))
		pl = append(pl, call(via))
	}
	b.StopTimer()
	slices.Sort(dl)
	slices.Sort(pl)
	b.ReportMetric(float64(dl[len(dl)/2].Microseconds()), "direct-p50-µs")
	b.ReportMetric(float64(pl[len(pl)/2].Microseconds()), "proxy-p50-µs")
	b.ReportMetric(float64(pl[len(pl)/2])/float64(dl[len(dl)/2]), "p50-ratio")
	b.ReportMetric(0, "ns/op")
}

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
