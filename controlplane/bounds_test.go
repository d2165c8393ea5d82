package controlplane_test

import (
	"context"
	"crypto/tls"
	"net"
	"testing"
	"time"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/mcpready/mcpready/controlplane"
	"github.com/mcpready/mcpready/internal/testpki"
)

// A connection that never completes its TLS handshake is closed after
// HandshakeTimeout. Failed before: gRPC's default let a peer that sends
// nothing hold the connection (a goroutine and a file descriptor) for two
// minutes, so a slow trickle of such peers exhausted the listener.
func TestSilentHandshakeClosed(t *testing.T) {
	p := testpki.New(t)
	f := testpki.TLS(t, t.TempDir())
	srvCert, err := tls.LoadX509KeyPair(f.ServerCert, f.ServerKey)
	if err != nil {
		t.Fatal(err)
	}
	s := start(t, controlplane.Options{DataDir: t.TempDir(), Root: p.Root.Public(), HandshakeTimeout: 300 * time.Millisecond,
		TLS: &tls.Config{Certificates: []tls.Certificate{srvCert}}})
	c, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	_ = c.SetReadDeadline(start.Add(10 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatal("the server wrote to a peer that sent nothing")
	} else if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("a silent connection was still open after %s", time.Since(start).Round(time.Millisecond))
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("closed after %s, want about the 300ms HandshakeTimeout", d)
	}
}

// One client connection holds at most StreamsPerConnection streams at a
// time: the next one waits until one ends. Failed before: unbounded, so
// one caller could open streams (each a goroutine and buffers on the
// server) without limit.
func TestStreamsPerConnectionBounded(t *testing.T) {
	p := testpki.New(t)
	const limit = 8
	s := start(t, controlplane.Options{DataDir: t.TempDir(), Root: p.Root.Public(), StreamsPerConnection: limit})
	hc := healthpb.NewHealthClient(dial(t, s.Addr()))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	watch := func(ctx context.Context) error {
		w, err := hc.Watch(ctx, &healthpb.HealthCheckRequest{})
		if err == nil {
			_, err = w.Recv()
		}
		return err
	}
	for i := range limit {
		if err := watch(ctx); err != nil {
			t.Fatalf("stream %d: %v", i+1, err)
		}
	}
	over, stop := context.WithTimeout(ctx, time.Second)
	defer stop()
	if err := watch(over); err == nil {
		t.Fatalf("stream %d of a connection limited to %d was served", limit+1, limit)
	}
	if controlplane.DefaultStreamsPerConnection < 16 || controlplane.DefaultStreamsPerConnection > 1024 {
		t.Errorf("DefaultStreamsPerConnection %d", controlplane.DefaultStreamsPerConnection)
	}
}
