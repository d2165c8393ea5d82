package probe_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpready/mcpready/probe"
)

// endpoints serves n distinct MCP endpoints (/mcp/0 ... /mcp/n-1), each a
// real go-sdk server with one read-only tool, on one loopback listener.
func endpoints(tb testing.TB, n int) []string {
	tb.Helper()
	mux := http.NewServeMux()
	urls := make([]string, n)
	ts := httptest.NewServer(mux)
	tb.Cleanup(ts.Close)
	for i := range n {
		s := mcp.NewServer(&mcp.Implementation{Name: fmt.Sprintf("com.example/s%d", i), Version: "1"}, nil)
		mcp.AddTool(s, &mcp.Tool{Name: "lookup"}, func(context.Context, *mcp.CallToolRequest, lookupIn) (*mcp.CallToolResult, lookupOut, error) {
			return nil, lookupOut{Answer: "ok"}, nil
		})
		path := fmt.Sprintf("/mcp/%d", i)
		mux.Handle(path, mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: true}))
		urls[i] = ts.URL + path
	}
	return urls
}

// BenchmarkFunnel is the cost of one full funnel (both eras, listing, a
// canary call, result check, 3 warm listings) against a loopback endpoint.
func BenchmarkFunnel(b *testing.B) {
	u := endpoints(b, 1)[0]
	b.ResetTimer()
	for b.Loop() {
		r, err := probe.Run(context.Background(), u, probe.Options{ReadOnly: []string{"lookup"}})
		if err != nil || !r.Ready() {
			b.Fatalf("%v %+v", err, r)
		}
	}
}

// BenchmarkProbe1000 probes 1,000 loopback endpoints end to end with 64
// funnels in flight; endpoints/s is the throughput (DESIGN: 1,000 in under
// 60 s).
func BenchmarkProbe1000(b *testing.B) {
	urls := endpoints(b, 1000)
	targets := make([]probe.Target, len(urls))
	for i, u := range urls {
		targets[i] = probe.Target{URL: u, Options: probe.Options{ReadOnly: []string{"lookup"}, StepTimeout: 20 * time.Second}}
	}
	b.ResetTimer()
	var total time.Duration
	for b.Loop() {
		start := time.Now()
		reports, errs := probe.RunAll(context.Background(), targets, 64)
		total += time.Since(start)
		for i, r := range reports {
			if errs[i] != nil || !r.Ready() {
				b.Fatalf("%s: %v %+v", urls[i], errs[i], r.Layers)
			}
		}
	}
	b.ReportMetric(float64(len(urls)*b.N)/total.Seconds(), "endpoints/s")
	b.ReportMetric(total.Seconds()/float64(b.N), "s/1000-endpoints")
}

func TestRunAll(t *testing.T) {
	urls := endpoints(t, 5)
	targets := []probe.Target{{URL: urls[0]}, {URL: "ftp://x/"}, {URL: urls[1], Options: probe.Options{ReadOnly: []string{"lookup"}}}}
	reports, errs := probe.RunAll(context.Background(), targets, 2)
	if errs[0] != nil || reports[0] == nil || !reports[0].Ready() || errs[1] == nil || reports[1] != nil ||
		reports[2].ProbedTool != "lookup" || !strings.HasSuffix(reports[2].URL, "/mcp/1") {
		t.Fatalf("%v %v", reports, errs)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, errs = probe.RunAll(ctx, targets, 1)
	for i, err := range errs {
		if err == nil {
			t.Errorf("target %d probed after cancellation", i)
		}
	}
}
