package upstream

// The default base HTTP transport of upstream sessions. net/http's
// Transport hands every request to a per-connection writer goroutine and
// every response to a per-connection reader goroutine, which costs two
// goroutine switches per call on the agent's hot path. directTransport
// keeps HTTP/1.1 keep-alive connections and lets the calling goroutine
// write the request and read the response itself. Framing is net/http's
// own (Request.Write, ReadResponse): chunked bodies, Content-Length,
// Connection: close and 1xx answers behave as with net/http.
//
// It does not do proxies, HTTP/2 or transparent gzip; upstream sessions
// use none of them.

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/net/http/httpguts"
)

// errUnsupportedScheme is a URL neither http nor https.
var errUnsupportedScheme = errors.New("unsupported URL scheme")

// ErrResponseHeaderTooLarge: the upstream's response header went on past
// maxResponseHeader bytes; the connection is closed.
var ErrResponseHeaderTooLarge = errors.New("upstream response header too large")

// maxResponseHeader bounds the bytes read for one response header (net/http's
// Transport allows 10 MB; an MCP answer's header is a few hundred bytes).
const maxResponseHeader = 1 << 20

// directTransport is an http.RoundTripper over pooled HTTP/1.1 connections.
// The zero value is not usable; use newDirectTransport.
type directTransport struct {
	dial        func(ctx context.Context, network, addr string) (net.Conn, error)
	tlsConfig   *tls.Config // nil: system roots; its ServerName and InsecureSkipVerify are ignored
	idleTimeout time.Duration
	maxIdle     int // per host

	mu   sync.Mutex
	idle map[connKey][]*directConn
}

// connKey is where a connection goes: its URL scheme and dial address (a
// struct, not one string, which would be built per request).
type connKey struct{ scheme, addr string }

func keyOf(req *http.Request) connKey { return connKey{req.URL.Scheme, hostPort(req)} }

func newDirectTransport() *directTransport {
	d := &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}
	return &directTransport{dial: d.DialContext, idleTimeout: 90 * time.Second, maxIdle: 512, idle: map[connKey][]*directConn{}}
}

// directConn is one connection and its buffers.
type directConn struct {
	key    connKey
	conn   net.Conn
	br     *bufio.Reader // over lim
	lim    *headerLimit
	bw     *bufio.Writer
	idleAt time.Time
	quiet  func() bool // peeks at the socket, for alive (nil until first asked)
	// unblock makes the connection's blocked I/O return at once: the watch
	// of each request's context, made once per connection, not per request.
	unblock func()
}

// past is a deadline that makes blocked I/O on a connection return at once.
var past = time.Unix(1, 0)

func (t *directTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	return t.roundTrip(req, nil)
}

// roundTrip is RoundTrip, recording in x (when not nil) that the request
// was possibly sent once its writing begins, as a client trace's
// WroteRequest would.
func (t *directTransport) roundTrip(req *http.Request, x *exchange) (*http.Response, error) {
	if req.URL == nil || (req.URL.Scheme != "http" && req.URL.Scheme != "https") {
		closeBody(req)
		return nil, fmt.Errorf("%w %q", errUnsupportedScheme, req.URL.Scheme)
	}
	ctx := req.Context()
	key := keyOf(req)
	dc, reused, err := t.conn(ctx, key, req)
	if err != nil {
		closeBody(req)
		return nil, err
	}
	if trace := httptrace.ContextClientTrace(ctx); trace != nil && trace.GotConn != nil {
		trace.GotConn(httptrace.GotConnInfo{Conn: dc.conn, Reused: reused})
	}
	// A cancelled or expired context unblocks whatever I/O is in progress,
	// including reads of the body after RoundTrip returned.
	stop := afterFunc(ctx, dc.unblock)
	fail := func(err error) (*http.Response, error) {
		stop()
		_ = dc.conn.Close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	// Request.Write reports WroteRequest to a client trace (before the
	// flush: a failed flush still counts as possibly sent).
	if x != nil {
		x.markSent()
	}
	written, err := writeRequest(dc.bw, req)
	if !written {
		err = req.Write(dc.bw)
	}
	if err == nil {
		err = dc.bw.Flush()
	}
	if err != nil {
		return fail(err)
	}
	var resp *http.Response
	dc.lim.left = maxResponseHeader // for the header (and any 1xx before it)
	for {
		resp, err = http.ReadResponse(dc.br, req)
		if err != nil {
			if dc.lim.left == 0 { // textproto may report the cut line as malformed
				err = ErrResponseHeaderTooLarge
			}
			return fail(err)
		}
		if resp.StatusCode >= 200 || resp.StatusCode == http.StatusSwitchingProtocols {
			break
		}
		_ = resp.Body.Close() // 1xx: the real answer follows
	}
	dc.lim.left = -1 // the body is bounded by its readers
	reusable := !resp.Close && !req.Close && resp.StatusCode != http.StatusSwitchingProtocols
	if resp.Body == http.NoBody {
		t.release(dc, stop, reusable)
		return resp, nil
	}
	resp.Body = &directBody{t: t, dc: dc, body: resp.Body, stop: stop, reusable: reusable}
	return resp, nil
}

// afterFunc is context.AfterFunc(ctx, f), asked of ctx itself when ctx has
// an AfterFunc of its own (a call's isolated context): the same watch,
// without the context package's extra context, closure and stop over it.
func afterFunc(ctx context.Context, f func()) (stop func() bool) {
	if a, ok := ctx.(interface{ AfterFunc(func()) func() bool }); ok {
		return a.AfterFunc(f)
	}
	return context.AfterFunc(ctx, f)
}

// conn returns an idle live connection for key, or dials one.
func (t *directTransport) conn(ctx context.Context, key connKey, req *http.Request) (*directConn, bool, error) {
	now := time.Now()
	for {
		t.mu.Lock()
		list := t.idle[key]
		if len(list) == 0 {
			t.mu.Unlock()
			break
		}
		dc := list[len(list)-1]
		list[len(list)-1] = nil
		t.idle[key] = list[:len(list)-1]
		t.mu.Unlock()
		if now.Sub(dc.idleAt) < t.idleTimeout && alive(dc) {
			return dc, true, nil
		}
		_ = dc.conn.Close()
	}
	c, err := t.dial(ctx, "tcp", key.addr)
	if err != nil {
		return nil, false, err
	}
	if req.URL.Scheme == "https" {
		cfg := &tls.Config{}
		if t.tlsConfig != nil {
			cfg = t.tlsConfig.Clone()
		}
		// The certificate must be valid for the pinned endpoint's host,
		// whatever the configuration says.
		cfg.ServerName, cfg.InsecureSkipVerify = req.URL.Hostname(), false
		tc := tls.Client(c, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			_ = c.Close()
			return nil, false, err
		}
		c = tc
	}
	return newDirectConn(key, c), false, nil
}

func newDirectConn(key connKey, c net.Conn) *directConn {
	lim := &headerLimit{r: c, left: -1}
	return &directConn{key: key, conn: c, br: bufio.NewReader(lim), lim: lim, bw: bufio.NewWriter(c), unblock: func() { _ = c.SetDeadline(past) }}
}

// headerLimit is the reader under a connection's bufio.Reader: while a
// response header is read it allows left more bytes, then fails with
// ErrResponseHeaderTooLarge; left < 0 is no limit.
type headerLimit struct {
	r    io.Reader
	left int64
}

func (l *headerLimit) Read(p []byte) (int, error) {
	if l.left < 0 {
		return l.r.Read(p)
	}
	if l.left == 0 {
		return 0, ErrResponseHeaderTooLarge
	}
	if int64(len(p)) > l.left {
		p = p[:l.left]
	}
	n, err := l.r.Read(p)
	l.left -= int64(n)
	return n, err
}

// alive reports whether an idle connection is still open and quiet: a
// server that closed it (or sent something unasked) makes it unusable.
func alive(dc *directConn) bool {
	if dc.br.Buffered() > 0 {
		return false
	}
	if dc.quiet == nil {
		c := dc.conn
		if tc, ok := c.(*tls.Conn); ok {
			c = tc.NetConn()
		}
		sc, ok := c.(syscall.Conn)
		if !ok {
			return true
		}
		rc, err := sc.SyscallConn()
		if err != nil {
			return false
		}
		dc.quiet = quiet(rc) // the socket's for good: made once per connection
	}
	return dc.quiet()
}

// release ends a round trip: the connection goes back to the idle list when
// reusable and the context watch had not fired, else it is closed.
func (t *directTransport) release(dc *directConn, stop func() bool, reusable bool) {
	if !stop() || !reusable || dc.conn.SetDeadline(time.Time{}) != nil {
		_ = dc.conn.Close()
		return
	}
	dc.idleAt = time.Now()
	t.mu.Lock()
	list := t.idle[dc.key]
	// The list is oldest first: connections idle too long leave from the front.
	n := 0
	for n < len(list) && dc.idleAt.Sub(list[n].idleAt) >= t.idleTimeout {
		n++
	}
	expired := slices.Clone(list[:n])
	list = list[n:]
	keep := len(list) < t.maxIdle
	if keep {
		list = append(list, dc)
	}
	t.idle[dc.key] = list
	t.mu.Unlock()
	for _, old := range expired {
		_ = old.Close()
	}
	if !keep {
		_ = dc.conn.Close()
	}
}

// CloseIdleConnections closes every idle connection.
func (t *directTransport) CloseIdleConnections() {
	t.mu.Lock()
	idle := t.idle
	t.idle = map[connKey][]*directConn{}
	t.mu.Unlock()
	closeAll(idle)
}

// closeAll closes everything in an idle map taken out of its owner.
func closeAll[K comparable, T interface{ Close() error }](idle map[K][]T) {
	for _, list := range idle {
		for _, c := range list {
			_ = c.Close()
		}
	}
}

// Close closes the connection.
func (dc *directConn) Close() error { return dc.conn.Close() }

// directBody returns its connection to the pool once read to the end, and
// closes it when closed early.
type directBody struct {
	t        *directTransport
	dc       *directConn
	body     io.ReadCloser
	stop     func() bool
	reusable bool
	mu       sync.Mutex
	done     bool
}

func (b *directBody) Read(p []byte) (int, error) {
	n, err := b.body.Read(p)
	if err == io.EOF {
		b.finish(true)
	}
	return n, err
}

// ended reports whether the body was read to its end or closed: its
// connection is released, and there is nothing left to drain or close.
func (b *directBody) ended() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.done
}

// bound limits the rest of the body's reads to wait from now, by a read
// deadline on its connection; false when it cannot (the body is read to
// its end or closed, and its connection may serve another request).
func (b *directBody) bound(wait time.Duration) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return !b.done && b.dc.conn.SetReadDeadline(time.Now().Add(wait)) == nil
}

// detach makes the rest of the body independent of its request's context,
// its reads bounded by a read deadline wait from now instead; false when
// it cannot (the body is done, or the context already ended, which
// unblocked its connection for good).
func (b *directBody) detach(wait time.Duration) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.done || !b.stop() {
		return false
	}
	b.stop = detached
	return b.dc.conn.SetReadDeadline(time.Now().Add(wait)) == nil
}

// detached is the stop of a detached body: there is no context watch left
// to stop, and nothing has fired.
func detached() bool { return true }

func (b *directBody) Close() error {
	b.finish(false)
	return nil
}

func (b *directBody) finish(eof bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.done {
		return
	}
	b.done = true
	if eof {
		b.t.release(b.dc, b.stop, b.reusable)
		return
	}
	b.stop()
	_ = b.dc.conn.Close()
}

// hostPort is the dial address of req: host with the scheme's default port.
// A host that names its port already, as JoinHostPort writes it (the usual
// endpoint), is the address itself: no string is built per request.
func hostPort(req *http.Request) string {
	host, port := req.URL.Hostname(), req.URL.Port()
	if port != "" && isJoined(req.URL.Host, host, port) {
		return req.URL.Host
	}
	if port == "" {
		port = "80"
		if req.URL.Scheme == "https" {
			port = "443"
		}
	}
	return net.JoinHostPort(host, port)
}

// isJoined reports whether s is net.JoinHostPort(host, port), without
// building that: host and port joined by a colon, host in brackets when it
// has a colon of its own.
func isJoined(s, host, port string) bool {
	open, sep := "", ":"
	if strings.Contains(host, ":") {
		open, sep = "[", "]:"
	}
	n := len(open) + len(host)
	return len(s) == n+len(sep)+len(port) && s[:len(open)] == open && s[len(open):n] == host &&
		s[n:n+len(sep)] == sep && s[n+len(sep):] == port
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
}

// reservedFields are the header fields Request.Write gives their own
// meaning.
var reservedFields = [...]string{"Host", "User-Agent", "Content-Length", "Transfer-Encoding", "Trailer", "Connection"}

// reservedField reports whether the valid field name k is one of
// reservedFields in any case: what http.CanonicalHeaderKey(k) would name,
// without canonicalizing k (for a token, canonical forms are equal exactly
// when the names are equal ignoring ASCII case).
func reservedField(k string) bool {
	for _, r := range reservedFields {
		if len(k) == len(r) && strings.EqualFold(k, r) {
			return true
		}
	}
	return false
}

// writeRequest writes req as Request.Write would, for the common request
// of the call path (a POST with a known length, a plain URL and valid
// header fields), without Request.Write's general machinery, which
// costs several microseconds a call; ok is false, and nothing is
// written, for any other request.
func writeRequest(w *bufio.Writer, req *http.Request) (ok bool, err error) {
	host := req.Host
	if host == "" {
		host = req.URL.Host
	}
	if req.Method != http.MethodPost || req.URL.Opaque != "" || req.ContentLength < 0 || req.ContentLength > 0 && req.Body == nil ||
		len(req.TransferEncoding) > 0 || req.Trailer != nil || req.Close || !httpguts.ValidHostHeader(host) || host == "" {
		return false, nil
	}
	trace := httptrace.ContextClientTrace(req.Context())
	if trace != nil && (trace.WroteHeaderField != nil || trace.Wait100Continue != nil) {
		return false, nil
	}
	uri := req.URL.RequestURI()
	for i := 0; i < len(uri); i++ {
		if uri[i] <= ' ' || uri[i] >= 0x7f {
			return false, nil // not a request line a server reads as sent
		}
	}
	var buf [16]string
	keys := buf[:0]
	for k, vs := range req.Header {
		if !httpguts.ValidHeaderFieldName(k) || reservedField(k) {
			return false, nil // reserved: Request.Write gives these their own meaning
		}
		for _, v := range vs {
			if !httpguts.ValidHeaderFieldValue(v) {
				return false, nil
			}
		}
		keys = append(keys, k)
	}
	slices.Sort(keys)
	w.WriteString(req.Method)
	w.WriteByte(' ')
	w.WriteString(uri)
	w.WriteString(" HTTP/1.1\r\nHost: ")
	w.WriteString(host)
	w.WriteString("\r\nUser-Agent: Go-http-client/1.1\r\nContent-Length: ")
	w.Write(strconv.AppendInt(w.AvailableBuffer(), req.ContentLength, 10)) // in w's own buffer: no array of its own escaping
	w.WriteString("\r\n")
	for _, k := range keys {
		for _, v := range req.Header[k] {
			w.WriteString(k)
			w.WriteString(": ")
			w.WriteString(textproto.TrimString(v))
			w.WriteString("\r\n")
		}
	}
	w.WriteString("\r\n")
	if trace != nil && trace.WroteHeaders != nil {
		trace.WroteHeaders()
	}
	if req.ContentLength > 0 {
		if n, cerr := io.CopyN(w, req.Body, req.ContentLength); cerr != nil {
			err = fmt.Errorf("http: ContentLength=%d with Body length %d: %w", req.ContentLength, n, cerr)
		}
	}
	closeBody(req)
	if trace != nil && trace.WroteRequest != nil {
		trace.WroteRequest(httptrace.WroteRequestInfo{Err: err})
	}
	return true, err
}
