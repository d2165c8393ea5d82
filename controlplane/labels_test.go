package controlplane_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/mcpready/mcpready/artifact"
	"github.com/mcpready/mcpready/controlplane"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/internal/safebuf"
	"github.com/mcpready/mcpready/internal/testpki"
	"github.com/mcpready/mcpready/nodelabel"
)

// TestAgentCannotClaimAnotherTenantsLabels is the attack of an agent with
// a valid certificate for node A that claims region eu-west and tenant
// class gold to receive another tenant's Policy, on an mTLS control plane
// given no --node-labels rules. Before labels were bound to identities the
// stream answered with the gold Policy. Now the stream is refused
// (PermissionDenied, wrong-labels); a certificate that carries those
// labels (nodelabel.CertURI) receives it, and claiming nothing is allowed.
func TestAgentCannotClaimAnotherTenantsLabels(t *testing.T) {
	p := testpki.New(t)
	f := testpki.TLS(t, t.TempDir())
	s := start(t, controlplane.Options{DataDir: t.TempDir(), Root: p.Root.Public(), Roles: testpki.Roles(), TLS: f.ServerMTLS(t)})
	conn := func(certFile, keyFile string) *grpc.ClientConn {
		return dialTLS(t, s.Addr(), f.ClientTLS(t, certFile, keyFile))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	adm := mcpreadyv1.NewAdminServiceClient(conn(f.Client(t, "admin-ops")))
	gold := testpki.Policy("tenant-b/gold", "1", map[string]string{string(nodelabel.ScopeRegion): "eu-west", string(nodelabel.ScopeTenantClass): "gold"})
	for _, b := range [][]byte{p.TrustPolicy, testpki.Sign(t, gold, p.Org)} {
		if _, err := adm.Apply(ctx, &mcpreadyv1.ApplyRequest{Bundle: b}); err != nil {
			t.Fatal(err)
		}
	}
	claim := map[string]string{string(nodelabel.Region): "eu-west", string(nodelabel.TenantClass): "gold"}
	// subscribe returns the Policy names of the first response holding
	// at least want of them (the store may not have pushed the Policy yet;
	// ACKing each response), or the stream's status.
	subscribe := func(c *grpc.ClientConn, node string, labels map[string]string, want int) ([]string, codes.Code) {
		st, err := mcpreadyv1.NewDiscoveryServiceClient(c).StreamResources(ctx)
		if err != nil {
			return nil, status.Code(err)
		}
		defer st.CloseSend()
		_ = st.Send(&mcpreadyv1.StreamResourcesRequest{Node: &mcpreadyv1.Node{Id: node, Labels: labels}, TypeUrl: artifact.KindPolicy.TypeURL()})
		for {
			r, err := st.Recv()
			if err != nil {
				return nil, status.Code(err)
			}
			var names []string
			for _, res := range r.Resources {
				names = append(names, res.Name)
			}
			if len(names) >= want {
				return names, codes.OK
			}
			_ = st.Send(&mcpreadyv1.StreamResourcesRequest{TypeUrl: r.TypeUrl, VersionInfo: r.VersionInfo, ResponseNonce: r.Nonce})
		}
	}
	bound := conn(f.ClientLabelled(t, "node-b", map[nodelabel.Key][]string{nodelabel.Region: {"eu-west"}, nodelabel.TenantClass: {"gold", "silver"}}))
	if names, code := subscribe(bound, "node-b", claim, 1); code != codes.OK || len(names) != 1 {
		t.Fatalf("node-b with eu-west/gold in its certificate: %v %v, want the gold Policy", names, code)
	}
	if names, code := subscribe(conn(f.Client(t, "node-a")), "node-a", claim, 0); code != codes.PermissionDenied {
		t.Fatalf("node-a claiming eu-west/gold: %v %v, want PermissionDenied", names, code)
	}
	if names, code := subscribe(conn(f.Client(t, "node-a")), "node-a", nil, 0); code != codes.OK || len(names) != 0 {
		t.Fatalf("node-a claiming nothing: %v %v, want an empty set", names, code)
	}
	if _, code := subscribe(bound, "node-b", map[string]string{string(nodelabel.Region): "us-east"}, 0); code != codes.PermissionDenied {
		t.Fatalf("node-b claiming a region its certificate lacks: %v, want PermissionDenied", code)
	}
}

// TestQuickstartSaysLabelsAreSelfAsserted: without client certificates
// (the loopback quickstart) the control plane says at start that callers
// hold every role and node labels are self-asserted; under mTLS it does
// not.
func TestQuickstartSaysLabelsAreSelfAsserted(t *testing.T) {
	p := testpki.New(t)
	f := testpki.TLS(t, t.TempDir())
	for _, mtls := range []bool{false, true} {
		var log safebuf.Buffer
		o := controlplane.Options{Listen: "127.0.0.1:0", MetricsListen: "off", DataDir: t.TempDir(), Root: p.Root.Public(), Logger: slog.New(slog.NewTextHandler(&log, nil))}
		if mtls {
			o.TLS, o.Roles = f.ServerMTLS(t), testpki.Roles()
		}
		if _, err := controlplane.New(o); err != nil {
			t.Fatal(err)
		}
		if said := strings.Contains(log.String(), "node labels (region, tenant classes, host) are self-asserted"); said == mtls {
			t.Errorf("mTLS %v: start log %q", mtls, log.String())
		}
	}
}
