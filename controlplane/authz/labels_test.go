package authz_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/mcpready/mcpready/controlplane/authz"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/nodelabel"
)

// TestNodeLabelsBound is the attack of an agent that claims another
// region (or a tenant class) to receive what is scoped there: with label
// rules, a node-bound request claiming a value the caller's identity is
// not granted is refused (wrong-labels); the granted values pass.
func TestNodeLabelsBound(t *testing.T) {
	p := newPKI(t)
	_, addr := labelServer(t, p, "spiffe://example.org/agent/*=region:eu-west|eu-north;host:host-1")
	cert := p.issue(t, "x", "spiffe://example.org/agent/host-1", x509.ExtKeyUsageClientAuth)
	adm := mcpreadyv1.NewAdminServiceClient(dial(t, addr, clientCreds(p, &cert)))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for labels, want := range map[string]codes.Code{
		"region=eu-west":                   codes.Unimplemented, // passed the authorizer
		"region=eu-north,host=host-1":      codes.Unimplemented,
		"region=us-east":                   codes.PermissionDenied,
		"region=eu-west,tenant-class=gold": codes.PermissionDenied,
		"host=host-2":                      codes.PermissionDenied,
	} {
		node := &mcpreadyv1.Node{Id: "host-1", Labels: map[string]string{}}
		for _, kv := range splitLabels(labels) {
			node.Labels[kv[0]] = kv[1]
		}
		if _, err := adm.ReportDrift(ctx, &mcpreadyv1.ReportDriftRequest{Node: node}); status.Code(err) != want {
			t.Errorf("%s: %v, want %v", labels, err, want)
		}
	}
	for _, bad := range []string{"x", "p=planet:earth", "p=region:", "p=region"} {
		if _, err := authz.ParseLabelRule(bad); !errors.Is(err, authz.ErrConfig) {
			t.Errorf("ParseLabelRule(%q): %v", bad, err)
		}
	}
}

// labelServer serves the reading services over TLS (client certificates
// verified when given) behind an Authorizer whose agents are
// spiffe://example.org/agent/* with the node-label rule rule.
func labelServer(t *testing.T, p *pki, rule string) (*authz.Authorizer, string) {
	t.Helper()
	lr, err := authz.ParseLabelRule(rule)
	if err != nil {
		t.Fatal(err)
	}
	a, err := authz.New(authz.Options{Rules: []authz.Rule{{Match: "spiffe://example.org/agent/*", Role: authz.RoleAgent}}, NodeLabels: []authz.LabelRule{lr}})
	if err != nil {
		t.Fatal(err)
	}
	return a, serveReading(t, a, credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{p.serve}, ClientCAs: p.pool,
		ClientAuth: tls.VerifyClientCertIfGiven, MinVersion: tls.VersionTLS12}))
}

func splitLabels(s string) [][2]string {
	var out [][2]string
	for _, kv := range strings.Split(s, ",") {
		k, v, _ := strings.Cut(kv, "=")
		out = append(out, [2]string{k, v})
	}
	return out
}

// TestNodeLabelsFromCertificate is the same attack without any label
// rule: an agent may claim only the labels its certificate carries as
// node-label URI SANs (plus what a rule grants); anything else is refused
// and counted (wrong-labels). Before, without rules, every claim passed.
// Node-label URIs never name the identity, and a malformed one makes the
// certificate unauthenticated rather than binding nothing silently.
func TestNodeLabelsFromCertificate(t *testing.T) {
	p := newPKI(t)
	a, addr := labelServer(t, p, "spiffe://example.org/agent/host-2=host:host-2")
	// The label URI comes first: the identity is still the SPIFFE URI.
	cert := p.issueURIs(t, "x", x509.ExtKeyUsageClientAuth, nodelabel.CertURI(nodelabel.Region, "us-east"), "spiffe://example.org/agent/host-2",
		nodelabel.CertURI(nodelabel.TenantClass, "gold"))
	adm := mcpreadyv1.NewAdminServiceClient(dial(t, addr, clientCreds(p, &cert)))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	const method = "/mcpready.v1.AdminService/ReportDrift"
	before := testutil.ToFloat64(a.RefusedCounter().WithLabelValues(method, "wrong-labels"))
	type L = map[string]string
	for _, c := range []struct {
		labels L
		want   codes.Code
	}{
		{L{"region": "us-east"}, codes.Unimplemented},                                           // passed the authorizer
		{L{"region": "us-east", "tenant-class": "gold", "host": "host-2"}, codes.Unimplemented}, // certificate and rule together
		{L{"mcpready.dev/region": "us-east", "tenant-classes": "gold"}, codes.Unimplemented},
		{L{"region": "eu-west"}, codes.PermissionDenied},
		{L{"tenant-class": "gold,silver"}, codes.PermissionDenied},
		{L{"host": "host-3"}, codes.PermissionDenied},
		{L{"host": "host-2,host-3"}, codes.PermissionDenied},
		{L{"tenant-classes": "platinum"}, codes.PermissionDenied},
	} {
		if _, err := adm.ReportDrift(ctx, &mcpreadyv1.ReportDriftRequest{Node: &mcpreadyv1.Node{Id: "host-2", Labels: c.labels}}); status.Code(err) != c.want {
			t.Errorf("%v: %v, want %v", c.labels, err, c.want)
		}
	}
	if got := testutil.ToFloat64(a.RefusedCounter().WithLabelValues(method, "wrong-labels")) - before; got != 5 {
		t.Errorf("wrong-labels refusals counted %v, want 5", got)
	}
	// host equal to the certificate's own node id needs no grant.
	own := p.issueURIs(t, "z", x509.ExtKeyUsageClientAuth, "spiffe://example.org/agent/host-5")
	ownAdm := mcpreadyv1.NewAdminServiceClient(dial(t, addr, clientCreds(p, &own)))
	for host, want := range map[string]codes.Code{"host-5": codes.Unimplemented, "host-2": codes.PermissionDenied} {
		if _, err := ownAdm.ReportDrift(ctx, &mcpreadyv1.ReportDriftRequest{Node: &mcpreadyv1.Node{Id: "host-5", Labels: L{"host": host}}}); status.Code(err) != want {
			t.Errorf("host-5 claiming host=%s: %v, want %v", host, err, want)
		}
	}
	bad := p.issueURIs(t, "y", x509.ExtKeyUsageClientAuth, "spiffe://example.org/agent/host-4", nodelabel.CertURIPrefix+"planet:earth")
	badAdm := mcpreadyv1.NewAdminServiceClient(dial(t, addr, clientCreds(p, &bad)))
	if _, err := badAdm.ReportDrift(ctx, &mcpreadyv1.ReportDriftRequest{Node: &mcpreadyv1.Node{Id: "host-4"}}); status.Code(err) != codes.Unauthenticated {
		t.Errorf("malformed node-label URI: %v, want Unauthenticated", err)
	}
}
