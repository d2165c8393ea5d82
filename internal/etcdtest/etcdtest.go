// Package etcdtest starts real embedded etcd for tests, one member per test
// on loopback ports with its data in the test's temporary directory. It is
// for tests only: shipped code must not import it (the control plane's own
// embedded etcd is controlplane/etcdembed).
package etcdtest

import (
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/mcpready/mcpready/controlplane/etcdembed"
	"github.com/mcpready/mcpready/internal/testpki"
)

// Etcd starts a single-node embedded etcd on a free loopback port in a
// temporary directory and returns a client; both stop when t ends.
func Etcd(t testing.TB) (*clientv3.Client, *etcdembed.Member) {
	t.Helper()
	m, err := etcdembed.StartSingle(etcdembed.Options{Dir: t.TempDir(), ProgressNotifyInterval: 500 * time.Millisecond, LogLevel: "fatal"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return Client(t, m.ClientURL), m
}

// Client returns an etcd client for endpoints, closed when t ends.
func Client(t testing.TB, endpoints ...string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// EtcdTLS starts a single-node embedded etcd that serves clients only over
// TLS and requires a client certificate signed by the returned files' CA
// (ClientCert and ClientKey are one); its ClientURL is https://. It stops
// when t ends.
func EtcdTLS(t testing.TB) (*etcdembed.Member, testpki.TLSFiles) {
	t.Helper()
	f := testpki.TLS(t, t.TempDir())
	m, err := etcdembed.StartSingle(etcdembed.Options{Dir: t.TempDir(), ProgressNotifyInterval: 500 * time.Millisecond, LogLevel: "fatal",
		ClientTLS: etcdembed.ClientTLS{CertFile: f.ServerCert, KeyFile: f.ServerKey, TrustedCAFile: f.CA}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	return m, f
}
