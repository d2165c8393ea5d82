package agent

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
)

// copyProxy is the cheapest proxy BenchmarkProxyOverhead can put where
// the agent is: it forwards each request to one upstream over a kept-alive
// connection, written and read on the handler's goroutine (as the agent's
// upstream transport does), and copies the answer back as it arrives. It
// decides, validates and records nothing.
type copyProxy struct {
	target *url.URL
	mu     sync.Mutex
	idle   []*copyConn
}

type copyConn struct {
	conn net.Conn
	br   *bufio.Reader
	bw   *bufio.Writer
}

// newCopyProxy serves a copyProxy to upstreamURL and returns its URL.
func newCopyProxy(tb testing.TB, upstreamURL string) string {
	tb.Helper()
	target, err := url.Parse(upstreamURL)
	if err != nil {
		tb.Fatal(err)
	}
	p := &copyProxy{target: target}
	srv := httptest.NewServer(p)
	tb.Cleanup(func() {
		srv.Close()
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, c := range p.idle {
			c.conn.Close()
		}
	})
	return srv.URL
}

func (p *copyProxy) conn() (*copyConn, error) {
	p.mu.Lock()
	if n := len(p.idle); n > 0 {
		c := p.idle[n-1]
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		return c, nil
	}
	p.mu.Unlock()
	conn, err := net.Dial("tcp", p.target.Host)
	if err != nil {
		return nil, err
	}
	return &copyConn{conn: conn, br: bufio.NewReader(conn), bw: bufio.NewWriter(conn)}, nil
}

func (p *copyProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, "reading request", http.StatusBadRequest)
		return
	}
	out, err := http.NewRequestWithContext(r.Context(), r.Method, p.target.String(), bytes.NewReader(body))
	if err != nil {
		http.Error(w, "building request", http.StatusInternalServerError)
		return
	}
	for k, v := range r.Header {
		out.Header[k] = v
	}
	c, err := p.conn()
	if err != nil {
		http.Error(w, "dialling upstream", http.StatusBadGateway)
		return
	}
	resp, err := p.exchange(c, out)
	if err != nil {
		c.conn.Close()
		http.Error(w, "upstream exchange", http.StatusBadGateway)
		return
	}
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	rc := http.NewResponseController(w)
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			_, _ = w.Write(buf[:n])
			_ = rc.Flush()
		}
		if err != nil {
			break
		}
	}
	if resp.Close || resp.Body.Close() != nil {
		c.conn.Close()
		return
	}
	p.mu.Lock()
	p.idle = append(p.idle, c)
	p.mu.Unlock()
}

func (p *copyProxy) exchange(c *copyConn, req *http.Request) (*http.Response, error) {
	if err := req.Write(c.bw); err != nil {
		return nil, err
	}
	if err := c.bw.Flush(); err != nil {
		return nil, err
	}
	return http.ReadResponse(c.br, req)
}
