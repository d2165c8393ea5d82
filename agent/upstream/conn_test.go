package upstream

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// countingTransport is a directTransport that counts its dials.
func countingTransport(dials *atomic.Int64) *directTransport {
	t := newDirectTransport()
	dial := t.dial
	t.dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		return dial(ctx, network, addr)
	}
	return t
}

func get(t *testing.T, rt http.RoundTripper, ctx context.Context, url string) (int, string, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(`{"x":1}`))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

func TestDirectTransport(t *testing.T) {
	echo := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if r.URL.Query().Get("sse") != "" { // chunked, like a Streamable HTTP response stream
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, "data: ")
			w.(http.Flusher).Flush()
			_, _ = w.Write(b)
			_, _ = io.WriteString(w, "\n\n")
			return
		}
		_, _ = w.Write(b)
	})

	t.Run("keep-alive reuse, plain and chunked", func(t *testing.T) {
		srv := httptest.NewServer(echo)
		defer srv.Close()
		var dials atomic.Int64
		rt := countingTransport(&dials)
		defer rt.CloseIdleConnections()
		for i := range 10 {
			url := srv.URL
			if i%2 == 1 {
				url += "?sse=1"
			}
			code, body, err := get(t, rt, context.Background(), url)
			if err != nil || code != 200 || !strings.Contains(body, `{"x":1}`) {
				t.Fatalf("call %d: %d %q %v", i, code, body, err)
			}
		}
		if n := dials.Load(); n != 1 {
			t.Fatalf("dials = %d, want 1 (connection reused)", n)
		}
	})

	t.Run("connection closed by the server while idle", func(t *testing.T) {
		srv := httptest.NewServer(echo)
		defer srv.Close()
		var dials atomic.Int64
		rt := countingTransport(&dials)
		defer rt.CloseIdleConnections()
		if _, _, err := get(t, rt, context.Background(), srv.URL); err != nil {
			t.Fatal(err)
		}
		srv.CloseClientConnections()
		time.Sleep(20 * time.Millisecond)
		if code, _, err := get(t, rt, context.Background(), srv.URL); err != nil || code != 200 {
			t.Fatalf("after server close: %d %v", code, err)
		}
		if n := dials.Load(); n != 2 {
			t.Fatalf("dials = %d, want 2 (stale idle connection replaced)", n)
		}
	})

	t.Run("Connection: close is honoured", func(t *testing.T) {
		srv := httptest.NewUnstartedServer(echo)
		srv.Config.SetKeepAlivesEnabled(false)
		srv.Start()
		defer srv.Close()
		var dials atomic.Int64
		rt := countingTransport(&dials)
		for range 3 {
			if code, _, err := get(t, rt, context.Background(), srv.URL); err != nil || code != 200 {
				t.Fatalf("%d %v", code, err)
			}
		}
		if n := dials.Load(); n != 3 {
			t.Fatalf("dials = %d, want 3", n)
		}
	})

	t.Run("deadline while waiting for the answer", func(t *testing.T) {
		release := make(chan struct{})
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}))
		defer srv.Close()
		defer close(release)
		rt := newDirectTransport()
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, _, err := get(t, rt, ctx, srv.URL)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v, want deadline exceeded", err)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("returned after %v", d)
		}
	})

	t.Run("cancel while reading the body", func(t *testing.T) {
		release := make(chan struct{})
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			w.(http.Flusher).Flush()
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}))
		defer srv.Close()
		defer close(release)
		var dials atomic.Int64
		rt := countingTransport(&dials)
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
		resp, err := rt.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		time.AfterFunc(50*time.Millisecond, cancel)
		if _, err := io.ReadAll(resp.Body); err == nil {
			t.Fatal("body read ended without error after cancel")
		}
		resp.Body.Close()
		rt.mu.Lock()
		idle := len(rt.idle[hostKey(srv.URL)])
		rt.mu.Unlock()
		if idle != 0 {
			t.Fatalf("%d idle connections after a cancelled read, want 0", idle)
		}
	})

	t.Run("body closed early is not reused", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.WriteString(w, strings.Repeat("x", 100000))
		}))
		defer srv.Close()
		var dials atomic.Int64
		rt := countingTransport(&dials)
		for range 2 {
			req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
			resp, err := rt.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = resp.Body.Read(make([]byte, 10))
			resp.Body.Close()
		}
		if n := dials.Load(); n != 2 {
			t.Fatalf("dials = %d, want 2", n)
		}
	})

	t.Run("connections idle too long are closed", func(t *testing.T) {
		var inflight sync.WaitGroup
		inflight.Add(3)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Query().Get("together") != "" {
				inflight.Done()
				inflight.Wait() // three calls at once: three connections
			}
		}))
		defer srv.Close()
		rt := newDirectTransport()
		rt.idleTimeout = 150 * time.Millisecond
		defer rt.CloseIdleConnections()
		var wg sync.WaitGroup
		for range 3 {
			wg.Go(func() {
				if code, _, err := get(t, rt, context.Background(), srv.URL+"?together=1"); err != nil || code != 200 {
					t.Errorf("%d %v", code, err)
				}
			})
		}
		wg.Wait()
		idle := func() int {
			rt.mu.Lock()
			defer rt.mu.Unlock()
			return len(rt.idle[hostKey(srv.URL)])
		}
		if n := idle(); n != 3 {
			t.Fatalf("%d idle connections, want 3", n)
		}
		// Only the newest is reused; the two older ones expire and are
		// closed when a connection is next put back.
		time.Sleep(100 * time.Millisecond)
		if _, _, err := get(t, rt, context.Background(), srv.URL); err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
		if _, _, err := get(t, rt, context.Background(), srv.URL); err != nil {
			t.Fatal(err)
		}
		if n := idle(); n != 1 {
			t.Fatalf("%d idle connections after the others expired, want 1", n)
		}
	})

	t.Run("https", func(t *testing.T) {
		srv := httptest.NewTLSServer(echo)
		defer srv.Close()
		rt := newDirectTransport()
		rt.tlsConfig = srv.Client().Transport.(*http.Transport).TLSClientConfig
		if code, body, err := get(t, rt, context.Background(), srv.URL); err != nil || code != 200 || body != `{"x":1}` {
			t.Fatalf("%d %q %v", code, body, err)
		}
		// Without the test CA the handshake fails.
		if _, _, err := get(t, newDirectTransport(), context.Background(), srv.URL); err == nil {
			t.Fatal("untrusted certificate accepted")
		}
	})

	t.Run("request written is traced; refused dial is not", func(t *testing.T) {
		srv := httptest.NewServer(echo)
		defer srv.Close()
		var wrote atomic.Int64
		ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
			WroteRequest: func(httptrace.WroteRequestInfo) { wrote.Add(1) },
		})
		if _, _, err := get(t, newDirectTransport(), ctx, srv.URL); err != nil {
			t.Fatal(err)
		}
		l, _ := net.Listen("tcp", "127.0.0.1:0")
		addr := l.Addr().String()
		l.Close()
		if _, _, err := get(t, newDirectTransport(), ctx, "http://"+addr); err == nil {
			t.Fatal("call to a closed port succeeded")
		}
		if n := wrote.Load(); n != 1 {
			t.Fatalf("WroteRequest called %d times, want 1", n)
		}
	})

	t.Run("unsupported scheme", func(t *testing.T) {
		if _, _, err := get(t, newDirectTransport(), context.Background(), "ftp://127.0.0.1/x"); !errors.Is(err, errUnsupportedScheme) {
			t.Fatalf("err = %v", err)
		}
	})
}

func hostKey(url string) connKey {
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	return keyOf(req)
}

// A request's connection key costs no more than its dial address.
func TestKeyOfAllocations(t *testing.T) {
	req, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1:8080/mcp", nil)
	addr := testing.AllocsPerRun(100, func() { hostPort(req) })
	if n := testing.AllocsPerRun(100, func() { keyOf(req) }); n > addr {
		t.Errorf("keyOf: %v allocations, hostPort: %v", n, addr)
	}
	if k := keyOf(req); k != (connKey{"http", "127.0.0.1:8080"}) {
		t.Errorf("key %+v", k)
	}
}

// A response stream the upstream keeps open after the response is closed
// by finish after drainWait (a read deadline on the connection), and its
// connection is not reused; a stream that ends is drained and its
// connection reused, with no deadline left on it.
func TestFinishBoundsAnOpenStream(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: {}\n\n")
		w.(http.Flusher).Flush()
		if r.URL.Query().Get("hold") != "" {
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}
	}))
	defer srv.Close()
	defer close(release)
	var dials atomic.Int64
	rt := countingTransport(&dials)
	defer rt.CloseIdleConnections()
	post := func(url string) *http.Response {
		req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := rt.roundTrip(req, nil)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}

	start := time.Now()
	finish(post(srv.URL + "?hold=1").Body)
	if took := time.Since(start); took < drainWait || took > drainWait+2*time.Second {
		t.Fatalf("finish of an open stream took %v, want about %v", took, drainWait)
	}
	resp := post(srv.URL)
	if n := dials.Load(); n != 2 {
		t.Fatalf("dials = %d, want 2 (the held connection closed)", n)
	}
	finish(resp.Body)
	time.Sleep(2 * drainWait) // a deadline left on the reused connection would fire now
	finish(post(srv.URL).Body)
	if n := dials.Load(); n != 2 {
		t.Fatalf("dials = %d, want 2 (a drained connection reused)", n)
	}
}

// A response already read to its end (as a fast call's often is: the end
// of the stream came in the same read as the answer) is finished without
// a timer or anything else allocated, and its connection is reused.
func TestFinishOfAReadBody(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		_, _ = io.WriteString(w, "data: {}\n\n")
	}))
	defer srv.Close()
	var dials atomic.Int64
	rt := countingTransport(&dials)
	defer rt.CloseIdleConnections()
	for range 2 {
		req, err := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := rt.roundTrip(req, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadAll(resp.Body); err != nil {
			t.Fatal(err)
		}
		if n := testing.AllocsPerRun(10, func() { finishLater(resp.Body) }); n != 0 {
			t.Errorf("finishing a body read to its end: %v allocations", n)
		}
	}
	if n := dials.Load(); n != 1 {
		t.Fatalf("dials = %d, want 1 (the connection reused)", n)
	}
}

// alive peeks at an idle connection without allocating, and sees what the
// server sent or that it closed the connection.
func TestAliveAllocations(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	dc := newDirectConn(connKey{}, c)
	if !alive(dc) {
		t.Fatal("a quiet open connection is not alive")
	}
	if n := testing.AllocsPerRun(100, func() { alive(dc) }); n != 0 {
		t.Errorf("alive: %v allocations", n)
	}
	_, _ = s.Write([]byte("x"))
	s.Close()
	deadline := time.Now().Add(5 * time.Second)
	for alive(dc) && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if alive(dc) {
		t.Fatal("a connection the server wrote to and closed is alive")
	}
}

// hostPort is net.JoinHostPort's address for every form of host, and a
// host that already names its port as JoinHostPort writes it costs no
// allocation.
func TestHostPortJoined(t *testing.T) {
	for _, raw := range []string{
		"http://127.0.0.1:8080/mcp", "http://127.0.0.1/mcp", "https://example.com/mcp", "https://Example.COM:8443/mcp",
		"http://[::1]:9000/mcp", "http://[::1]/mcp", "http://[fe80::1%25en0]:80/mcp", "http://example.com:/mcp",
		"http://localhost:80", "https://a.b:443",
	} {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		port := u.Port()
		if port == "" {
			port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
		}
		if got, want := hostPort(&http.Request{URL: u}), net.JoinHostPort(u.Hostname(), port); got != want {
			t.Errorf("%s: hostPort %q, JoinHostPort %q", raw, got, want)
		}
	}
	for _, tt := range []struct {
		s, host, port string
		want          bool
	}{
		{"a:1", "a", "1", true}, {"[::1]:1", "::1", "1", true}, {"[a]:1", "a", "1", false}, {"::1:1", "::1", "1", false},
		{"a:12", "a", "1", false}, {"ab:1", "a", "1", false}, {"a1", "a", "1", false}, {"", "", "", false},
	} {
		if got := isJoined(tt.s, tt.host, tt.port); got != tt.want {
			t.Errorf("isJoined(%q, %q, %q) = %v", tt.s, tt.host, tt.port, got)
		}
	}
	req, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1:8080/mcp", nil)
	if n := testing.AllocsPerRun(100, func() { hostPort(req) }); n != 0 {
		t.Errorf("hostPort: %v allocations", n)
	}
}

// cannedConn is a connection whose peer answers every request with resp at
// once, in memory: no socket or goroutine, so that allocation counts are
// the transport's own.
type cannedConn struct {
	net.Conn // not used
	resp     []byte
	r        bytes.Reader
}

func (c *cannedConn) Read(p []byte) (int, error)       { return c.r.Read(p) }
func (c *cannedConn) Write(p []byte) (int, error)      { c.r.Reset(c.resp); return len(p), nil }
func (c *cannedConn) Close() error                     { return nil }
func (c *cannedConn) SetDeadline(time.Time) error      { return nil }
func (c *cannedConn) SetReadDeadline(time.Time) error  { return nil }
func (c *cannedConn) SetWriteDeadline(time.Time) error { return nil }

// cannedSSE is an SSE answer as the go-sdk server frames it (chunked).
var cannedSSE = func() string {
	event := "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":\"mcpready-1\",\"result\":{\"content\":[]}}\n\n"
	return "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nMcp-Session-Id: s1\r\nDate: Wed, 02 Dec 2026 02:00:00 GMT\r\nTransfer-Encoding: chunked\r\n\r\n" +
		strconv.FormatInt(int64(len(event)), 16) + "\r\n" + event + "\r\n0\r\n\r\n"
}()

// A round trip on a reused connection allocates, beyond its request,
// net/http's reading of the response and the context watch, only the
// body that releases the connection and io.CopyN's reader of the request
// body: neither the dial address nor the watch's function is made per
// request.
func TestRoundTripAllocations(t *testing.T) {
	c := &cannedConn{resp: []byte(cannedSSE)}
	tr := newDirectTransport()
	tr.dial = func(context.Context, string, string) (net.Conn, error) { return c, nil }
	u, _ := url.Parse("http://127.0.0.1:8080/mcp")
	hs := &httpSession{url: u}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	body := []byte(`{"jsonrpc":"2.0","id":"mcpready-1","method":"tools/call","params":{"name":"echo","arguments":{}}}`)
	newReq := func() *http.Request {
		return hs.newRequest(ctx, http.MethodPost, http.Header{"Content-Type": postContentType}, body)
	}
	roundTrip := func() {
		resp, err := tr.roundTrip(newReq(), nil)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	resp, err := tr.roundTrip(newReq(), nil) // dials: the connection is reused from now on
	if err != nil {
		t.Fatal(err)
	}
	if b, err := io.ReadAll(resp.Body); err != nil || !bytes.Contains(b, []byte("mcpready-1")) {
		t.Fatalf("body %q %v", b, err)
	}
	total := testing.AllocsPerRun(100, roundTrip)
	req := newReq()
	reading := testing.AllocsPerRun(100, func() {
		resp, err := http.ReadResponse(bufio.NewReader(strings.NewReader(cannedSSE)), req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
	}) - testing.AllocsPerRun(100, func() { _, _ = io.Copy(io.Discard, bufio.NewReader(strings.NewReader(cannedSSE))) })
	request := testing.AllocsPerRun(100, func() { newReq() })
	watch := testing.AllocsPerRun(100, func() { afterFunc(ctx, func() {})() })
	if own := total - reading - request - watch; own > 2 {
		t.Errorf("round trip: %v allocations, %v of them its own (request %v, reading %v, watch %v)", total, own, request, reading, watch)
	}
}

// The adversary: a server that writes a whole unsolicited response on a
// kept-alive connection just after its answer, so that the next request
// on that connection reads it as its own answer (a desynchronised stream).
// The connection must not be reused for the next request, however soon it
// comes: that request gets the server's real answer on a new connection.
func TestUnsolicitedResponseNotTakenAsNextAnswer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var conns atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n := conns.Add(1)
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					_, _ = io.Copy(io.Discard, req.Body)
					answer := "answer on connection " + strconv.FormatInt(n, 10)
					_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: "+strconv.Itoa(len(answer))+"\r\n\r\n"+answer)
					time.Sleep(time.Millisecond)
					_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\ninjected")
				}
			}()
		}
	}()
	var dials atomic.Int64
	rt := countingTransport(&dials)
	defer rt.CloseIdleConnections()
	url := "http://" + ln.Addr().String() + "/mcp"
	if code, body, err := get(t, rt, context.Background(), url); err != nil || code != 200 || body != "answer on connection 1" {
		t.Fatalf("first call: %d %q %v", code, body, err)
	}
	time.Sleep(20 * time.Millisecond) // the unsolicited response has arrived
	code, body, err := get(t, rt, context.Background(), url)
	if err != nil || code != 200 || body != "answer on connection 2" {
		t.Fatalf("second call: %d %q %v; want the answer on a new connection, never the unsolicited one", code, body, err)
	}
	if n := dials.Load(); n != 2 {
		t.Fatalf("dials = %d, want 2 (the desynchronised connection replaced)", n)
	}
}

// An upstream that sends a response header without end (one endless line,
// or header lines without a blank line) is cut off after
// maxResponseHeader bytes, as net/http's Transport does after its
// MaxResponseHeaderBytes: the agent neither buffers it all nor waits for
// the call's deadline.
func TestEndlessResponseHeader(t *testing.T) {
	for name, start := range map[string]string{
		"one line":   "HTTP/1.1 200 OK\r\nX-Long: ",
		"many lines": "HTTP/1.1 200 OK\r\n",
	} {
		t.Run(name, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			var sent atomic.Int64
			go func() {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				defer c.Close()
				_, _ = http.ReadRequest(bufio.NewReader(c))
				_, _ = io.WriteString(c, start)
				chunk := []byte(strings.Repeat("a", 64<<10))
				if name == "many lines" {
					chunk = []byte(strings.Repeat("X-A: b\r\n", 8<<10))
				}
				for sent.Load() < 64<<20 {
					n, err := c.Write(chunk)
					sent.Add(int64(n))
					if err != nil {
						return
					}
				}
			}()
			rt := newDirectTransport()
			defer rt.CloseIdleConnections()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, _, err = get(t, rt, ctx, "http://"+ln.Addr().String()+"/mcp")
			if err == nil || ctx.Err() != nil {
				t.Fatalf("err = %v (context: %v), want the header refused before the deadline", err, ctx.Err())
			}
			// What the server got into the socket before the agent closed
			// it: the limit plus what the kernel buffers hold.
			if s := sent.Load(); s >= 64<<20 {
				t.Fatalf("the agent read all %d bytes of the header", s)
			}
			if !errors.Is(err, ErrResponseHeaderTooLarge) {
				t.Fatalf("err = %v, want ErrResponseHeaderTooLarge", err)
			}
		})
	}
}
