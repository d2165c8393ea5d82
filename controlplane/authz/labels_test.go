package authz_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/mcpready/mcpready/controlplane/authz"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
)

// TestNodeLabelsBound is the attack of an agent that claims another
// region (or a tenant class) to receive what is scoped there: with label
// rules, a node-bound request claiming a value the caller's identity is
// not granted is refused (wrong-labels); the granted values pass.
func TestNodeLabelsBound(t *testing.T) {
	p := newPKI(t)
	lr, err := authz.ParseLabelRule("spiffe://example.org/agent/*=region:eu-west|eu-north;host:host-1")
	if err != nil {
		t.Fatal(err)
	}
	a, err := authz.New(authz.Options{Rules: []authz.Rule{{Match: "spiffe://example.org/agent/*", Role: authz.RoleAgent}}, NodeLabels: []authz.LabelRule{lr}})
	if err != nil {
		t.Fatal(err)
	}
	addr := serveReading(t, a, credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{p.serve}, ClientCAs: p.pool,
		ClientAuth: tls.VerifyClientCertIfGiven, MinVersion: tls.VersionTLS12}))
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

func splitLabels(s string) [][2]string {
	var out [][2]string
	for _, kv := range strings.Split(s, ",") {
		k, v, _ := strings.Cut(kv, "=")
		out = append(out, [2]string{k, v})
	}
	return out
}
