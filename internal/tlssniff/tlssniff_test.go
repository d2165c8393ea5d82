package tlssniff_test

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/mcpready/mcpready/internal/testpki"
	"github.com/mcpready/mcpready/internal/tlssniff"
)

func listen(t *testing.T, timeout time.Duration) (*tlssniff.Listener, *x509.CertPool) {
	t.Helper()
	f := testpki.TLS(t, t.TempDir())
	cert, err := tls.LoadX509KeyPair(f.ServerCert, f.ServerKey)
	if err != nil {
		t.Fatal(err)
	}
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := tlssniff.New(inner, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, timeout)
	t.Cleanup(func() { l.Close() })
	pool := x509.NewCertPool()
	ca, _ := os.ReadFile(f.CA)
	pool.AppendCertsFromPEM(ca)
	return l, pool
}

// One port answers plaintext HTTP and HTTPS, and net/http sees which.
func TestPlainAndTLSOnOnePort(t *testing.T) {
	l, pool := listen(t, 0)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS != nil {
			io.WriteString(w, "tls")
			return
		}
		io.WriteString(w, "plain")
	}), ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(l)
	defer srv.Close()
	for url, want := range map[string]string{"http://" + l.Addr().String(): "plain", "https://" + l.Addr().String(): "tls"} {
		c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}, Timeout: 5 * time.Second}
		resp, err := c.Get(url)
		if err != nil {
			t.Fatalf("%s: %v", url, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != want {
			t.Errorf("%s: %q, want %q", url, b, want)
		}
	}
}

// A client that connects and says nothing neither holds up other
// connections nor stays open past the sniff timeout.
func TestSilentClientDoesNotBlockAccept(t *testing.T) {
	l, _ := listen(t, 300*time.Millisecond)
	silent, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	talker, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer talker.Close()
	talker.Write([]byte("hello"))
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := l.Accept()
		if err == nil {
			accepted <- c
		}
	}()
	select {
	case c := <-accepted:
		b := make([]byte, 5)
		if _, err := io.ReadFull(c, b); err != nil || string(b) != "hello" {
			t.Fatalf("read %q %v", b, err)
		}
		c.Close()
	case <-time.After(200 * time.Millisecond):
		t.Fatal("the talking client waited behind the silent one")
	}
	silent.SetReadDeadline(time.Now().Add(3 * time.Second))
	if _, err := silent.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("silent connection not closed after the sniff timeout: %v", err)
	}
}

func TestCloseUnblocksAccept(t *testing.T) {
	l, _ := listen(t, 0)
	errc := make(chan error, 1)
	go func() { _, err := l.Accept(); errc <- err }()
	time.Sleep(20 * time.Millisecond)
	l.Close()
	select {
	case err := <-errc:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("accept after close: %v", err)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("Accept still blocked after Close")
	}
}

// FuzzSniff: whatever a client sends first, a plaintext connection reads
// exactly those bytes, and a TLS-looking one is handed out as TLS; no
// input panics or is lost.
func FuzzSniff(f *testing.F) {
	for _, s := range [][]byte{[]byte("GET / HTTP/1.1\r\n\r\n"), {0x16, 3, 1, 0, 5}, {0}, {0x15}, {0x17, 0x16}} {
		f.Add(s)
	}
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		f.Fatal(err)
	}
	l := tlssniff.New(inner, &tls.Config{}, time.Second)
	defer l.Close()
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		c, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.Write(data)
		s, err := l.Accept()
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		_, isTLS := s.(*tls.Conn)
		if isTLS != (data[0] == 0x16) {
			t.Fatalf("first byte %#x: TLS %v", data[0], isTLS)
		}
		if isTLS {
			return
		}
		got := make([]byte, len(data))
		s.SetReadDeadline(time.Now().Add(2 * time.Second))
		if _, err := io.ReadFull(s, got); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("read %q %v, want %q", got, err, data)
		}
	})
}
