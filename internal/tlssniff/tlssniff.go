// Package tlssniff serves TLS and plaintext on one listener: a connection
// whose first byte opens a TLS handshake record is served as TLS, any
// other as plaintext. The control plane's HTTP listener uses it so that
// kubelet probes and Prometheus keep their plaintext /healthz and /metrics
// while the console is reached over TLS with a client certificate.
//
// It must not decide what a connection may do: it only tells the two
// protocols apart. TLS connections are returned as *tls.Conn, so
// net/http fills Request.TLS (with the verified client chain once the
// handshake has run).
package tlssniff

import (
	"bufio"
	"crypto/tls"
	"errors"
	"net"
	"sync"
	"time"
)

// recordTypeHandshake is the first byte of every TLS ClientHello.
const recordTypeHandshake = 0x16

// DefaultSniffTimeout bounds how long a new connection may stay silent
// before it is closed.
const DefaultSniffTimeout = 5 * time.Second

// Listener accepts from an inner listener and hands out TLS or plaintext
// connections. Sniffing runs per connection, so a silent client never
// holds up Accept.
type Listener struct {
	inner   net.Listener
	cfg     *tls.Config
	timeout time.Duration
	conns   chan net.Conn
	done    chan struct{}
	once    sync.Once
	err     error // the inner Accept error, set (once) just before done closes
}

// New returns a Listener over inner serving TLS with cfg; timeout 0 means
// DefaultSniffTimeout.
func New(inner net.Listener, cfg *tls.Config, timeout time.Duration) *Listener {
	if timeout <= 0 {
		timeout = DefaultSniffTimeout
	}
	l := &Listener{inner: inner, cfg: cfg, timeout: timeout, conns: make(chan net.Conn), done: make(chan struct{})}
	go l.acceptLoop()
	return l
}

func (l *Listener) acceptLoop() {
	for {
		c, err := l.inner.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			l.once.Do(func() { l.err = err; close(l.done) })
			return
		}
		go l.sniff(c)
	}
}

func (l *Listener) sniff(c net.Conn) {
	c.SetReadDeadline(time.Now().Add(l.timeout))
	br := bufio.NewReader(c)
	first, err := br.Peek(1)
	c.SetReadDeadline(time.Time{})
	if err != nil {
		c.Close()
		return
	}
	var out net.Conn = &peekedConn{Conn: c, r: br}
	if first[0] == recordTypeHandshake {
		out = tls.Server(out, l.cfg)
	}
	select {
	case l.conns <- out:
	case <-l.done:
		c.Close()
	}
}

// Accept returns the next sniffed connection.
func (l *Listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		if l.err != nil {
			return nil, l.err
		}
		return nil, net.ErrClosed
	}
}

// Close closes the inner listener; pending and later Accepts fail.
func (l *Listener) Close() error {
	err := l.inner.Close()
	l.once.Do(func() { close(l.done) })
	return err
}

// Addr is the inner listener's address.
func (l *Listener) Addr() net.Addr { return l.inner.Addr() }

// peekedConn reads first what sniffing buffered.
type peekedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *peekedConn) Read(p []byte) (int, error) { return c.r.Read(p) }
