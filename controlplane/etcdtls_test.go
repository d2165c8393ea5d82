package controlplane_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/mcpready/mcpready/controlplane"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/internal/etcdtest"
	"github.com/mcpready/mcpready/internal/testpki"
)

// TestEtcdClientCertTLS runs the control plane against an etcd that
// requires client certificates: with the CA and a client certificate it
// stores and serves; without a client certificate, or with another CA, it
// never reaches etcd; plaintext to an etcd off loopback is refused at
// start.
func TestEtcdClientCertTLS(t *testing.T) {
	m, f := etcdtest.EtcdTLS(t)
	p := testpki.New(t)
	tlsCfg, err := controlplane.EtcdClientTLS(f.CA, f.ClientCert, f.ClientKey)
	if err != nil {
		t.Fatal(err)
	}
	s := start(t, controlplane.Options{EtcdEndpoints: []string{m.ClientURL}, EtcdTLS: tlsCfg, Root: p.Root.Public()})
	adm := mcpreadyv1.NewAdminServiceClient(dial(t, s.Addr()))
	if _, err := adm.Apply(context.Background(), &mcpreadyv1.ApplyRequest{Bundle: p.TrustPolicy}); err != nil {
		t.Fatalf("apply through TLS etcd: %v", err)
	}

	other := testpki.TLS(t, t.TempDir())
	for label, files := range map[string][3]string{
		"no client certificate": {f.CA, "", ""},
		"another CA's client":   {f.CA, other.ClientCert, other.ClientKey},
	} {
		c, err := controlplane.EtcdClientTLS(files[0], files[1], files[2])
		if err != nil {
			t.Fatal(err)
		}
		s, err := controlplane.New(controlplane.Options{Listen: "127.0.0.1:0", MetricsListen: "off", EtcdEndpoints: []string{m.ClientURL}, EtcdTLS: c,
			Root: p.Root.Public(), EtcdWait: 1500 * time.Millisecond, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Run(context.Background()); !errors.Is(err, controlplane.ErrEtcdUnreachable) {
			t.Fatalf("%s: %v, want etcd unreachable", label, err)
		}
	}
	if _, err := controlplane.New(controlplane.Options{Listen: "127.0.0.1:0", EtcdEndpoints: []string{"http://10.0.0.7:2379"}, Root: p.Root.Public()}); !errors.Is(err, controlplane.ErrConfig) {
		t.Fatalf("plaintext etcd off loopback: %v", err)
	}
	if _, err := controlplane.EtcdClientTLS(f.CA, f.ClientCert, ""); !errors.Is(err, controlplane.ErrEtcdTLS) {
		t.Fatalf("certificate without key: %v", err)
	}
}

// TestEtcdUserPassword: with etcd's own authentication enabled, the
// control plane reaches etcd with its user and password, and not with a
// wrong password.
func TestEtcdUserPassword(t *testing.T) {
	cli, m := etcdtest.Etcd(t)
	ctx := context.Background()
	for _, step := range []func() error{
		func() error { _, err := cli.RoleAdd(ctx, "root"); return err },
		func() error { _, err := cli.UserAdd(ctx, "root", "root-password"); return err },
		func() error { _, err := cli.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := cli.AuthEnable(ctx); return err },
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	p := testpki.New(t)
	s := start(t, controlplane.Options{EtcdEndpoints: []string{m.ClientURL}, EtcdUsername: "root", EtcdPassword: "root-password", Root: p.Root.Public()})
	if _, err := mcpreadyv1.NewAdminServiceClient(dial(t, s.Addr())).Apply(ctx, &mcpreadyv1.ApplyRequest{Bundle: p.TrustPolicy}); err != nil {
		t.Fatalf("apply with etcd auth: %v", err)
	}
	bad, err := controlplane.New(controlplane.Options{Listen: "127.0.0.1:0", MetricsListen: "off", EtcdEndpoints: []string{m.ClientURL}, EtcdUsername: "root", EtcdPassword: "wrong",
		Root: p.Root.Public(), EtcdWait: 1500 * time.Millisecond, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if err := bad.Run(ctx); err == nil {
		t.Fatal("a wrong etcd password ran")
	}
}
