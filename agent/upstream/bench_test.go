package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
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

// echoConn is an in-memory upstream connection that answers every
// tools/call with the echo tool's result on an SSE stream, as the go-sdk
// server frames it (chunked, its id the request's), without allocating:
// benchmarks over it measure the fast path's own work, no sockets.
type echoConn struct {
	cannedConn
	buf []byte
}

func (c *echoConn) Write(p []byte) (int, error) {
	_, rest, _ := bytes.Cut(p, []byte(`"id":"`))
	id, _, _ := bytes.Cut(rest, []byte(`"`))
	event := append(c.buf[:0], "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":\""...)
	event = append(event, id...)
	event = append(event, `","result":{"content":[{"type":"text","text":"{\"text\":\"benchmark\"}"}],"structuredContent":{"text":"benchmark"}}}`+"\n\n"...)
	n := len(event)
	c.buf = append(event, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nMcp-Session-Id: s1\r\nDate: Wed, 02 Dec 2026 02:00:00 GMT\r\nTransfer-Encoding: chunked\r\n\r\n"...)
	c.buf = strconv.AppendInt(c.buf, int64(n), 16)
	c.buf = append(c.buf, "\r\n"...)
	c.buf = append(c.buf, event[:n]...)
	c.buf = append(c.buf, "\r\n0\r\n\r\n"...)
	c.resp = c.buf[n:]
	c.r.Reset(c.resp)
	return len(p), nil
}

// echoSession is a fast-path session over an echoConn.
func echoSession() *Session {
	c := &echoConn{}
	tr := newDirectTransport()
	tr.dial = func(context.Context, string, string) (net.Conn, error) { return c, nil }
	u, _ := url.Parse("http://127.0.0.1:8080/mcp")
	return &Session{http: &httpSession{url: u, sessionID: []string{"s1"}, version: []string{"2025-06-18"}, rt: &roundTripper{base: tr}}}
}

// BenchmarkCallFastCanned is one fast tools/call of the echo tool over an
// in-memory connection: the upstream package's whole share of a call
// (request, transport, response reading and decoding) without syscalls.
func BenchmarkCallFastCanned(b *testing.B) {
	s := echoSession()
	params := &mcp.CallToolParams{Name: "echo", Arguments: json.RawMessage(`{"text":"benchmark"}`)}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b.ReportAllocs()
	for b.Loop() {
		if res, err := s.callFast(ctx, params); err != nil || res.IsError {
			b.Fatal(err, res)
		}
	}
}
