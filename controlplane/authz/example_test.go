package authz_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"net"
	"net/url"
	"path"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/mcpready/mcpready/controlplane/authz"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/nodelabel"
)

// The --authz and --node-labels flags take one rule each: which
// certificate identities hold a role, and which node-label values they
// may claim. A rule that does not parse stops the control plane at start.
func ExampleParseRule() {
	r, err := authz.ParseRule("spiffe://example.org/agent/*=agent")
	fmt.Println(r.Match, r.Role, err)
	l, err := authz.ParseLabelRule("spiffe://example.org/agent/eu-*=region:eu-west-1|eu-central-1;tenant-class:internal")
	fmt.Println(l.Match, l.Labels["region"], l.Labels["tenant-class"], err)
	_, err = authz.ParseRule("spiffe://example.org/agent/*=superuser")
	fmt.Println(err)
	// Output:
	// spiffe://example.org/agent/* agent <nil>
	// spiffe://example.org/agent/eu-* [eu-west-1 eu-central-1] [internal] <nil>
	// authz: bad configuration: unknown role "superuser" (want admin, agent or reader)
}

// leaf stands for the client certificate a TLS handshake verified: authz
// reads only its names (URI SANs, DNS SANs, common name).
func leaf(cn string, uris ...string) *x509.Certificate {
	c := &x509.Certificate{Subject: pkix.Name{CommonName: cn}}
	for _, s := range uris {
		u, err := url.Parse(s)
		if err != nil {
			panic(err)
		}
		c.URIs = append(c.URIs, u)
	}
	return c
}

func verified(c *x509.Certificate) *tls.ConnectionState {
	return &tls.ConnectionState{VerifiedChains: [][]*x509.Certificate{{c}}}
}

// Rules map a verified client certificate's identity to roles by
// pattern; the identity's node id is the last segment of its name, and
// the node labels its certificate binds come with it. The console calls
// IdentifyConn with an HTTP request's TLS state; gRPC calls go through
// the interceptors, which call Identify.
func ExampleAuthorizer_IdentifyConn() {
	a, err := authz.New(authz.Options{Rules: []authz.Rule{
		{Match: "spiffe://example.org/agent/*", Role: authz.RoleAgent},
		{Match: "reader-*", Role: authz.RoleReader},
		{Match: "admin-*", Role: authz.RoleAdmin},
	}})
	if err != nil {
		panic(err)
	}
	remote := &net.TCPAddr{IP: net.IPv4(10, 0, 0, 7), Port: 50123}

	// The first URI SAN that is not a node label names the caller, not the CN.
	agent := leaf("host-1.example.org", "spiffe://example.org/agent/host-1", nodelabel.CertURI(nodelabel.Region, "eu-west-1"))
	id, err := a.IdentifyConn(verified(agent), remote)
	fmt.Println(id.Name, id.NodeID, id.Roles, id.Labels[nodelabel.Region], err)

	id, err = a.IdentifyConn(verified(leaf("reader-dashboards")), remote)
	fmt.Println(id.Name, id.Roles, id.MayRead(), id.Has(authz.RoleAdmin), err)

	// A certificate no rule matches is authenticated but holds no role.
	id, err = a.IdentifyConn(verified(leaf("ci-bot")), remote)
	fmt.Println(id.Name, len(id.Roles), id.MayRead(), err)

	// No certificate: refused, since Options.LocalPlaintext is off.
	_, err = a.IdentifyConn(nil, remote)
	fmt.Println(errors.Is(err, authz.ErrUnauthenticated), err)
	// Output:
	// spiffe://example.org/agent/host-1 host-1 [agent] [eu-west-1] <nil>
	// reader-dashboards [reader] true false <nil>
	// ci-bot 0 false <nil>
	// true no verified client identity: caller 10.0.0.7:50123 presented no verified client certificate
}

// The control plane installs UnaryInterceptor (and StreamInterceptor) on
// its gRPC server. An agent may report drift for its own node only, and
// may not apply artifacts; a refusal is a gRPC status and is counted by
// method and reason.
func ExampleAuthorizer_UnaryInterceptor() {
	a, err := authz.New(authz.Options{Rules: []authz.Rule{
		{Match: "spiffe://example.org/agent/*", Role: authz.RoleAgent},
		{Match: "spiffe://example.org/admin/*", Role: authz.RoleAdmin},
	}})
	if err != nil {
		panic(err)
	}
	// What grpc.NewServer(grpc.UnaryInterceptor(...)) does for each call.
	intercept := a.UnaryInterceptor()
	call := func(cert *x509.Certificate, method string, req any) {
		ctx := peer.NewContext(context.Background(), &peer.Peer{
			Addr:     &net.TCPAddr{IP: net.IPv4(10, 0, 0, 7), Port: 50123},
			AuthInfo: credentials.TLSInfo{State: *verified(cert)},
		})
		handler := func(context.Context, any) (any, error) { return "handled", nil }
		resp, err := intercept(ctx, req, &grpc.UnaryServerInfo{FullMethod: method}, handler)
		fmt.Printf("%s %s: %v %v\n", cert.URIs[0], path.Base(method), resp, status.Code(err))
		if err != nil {
			fmt.Println("=>", status.Convert(err).Message())
		}
	}
	agent := leaf("", "spiffe://example.org/agent/host-1", nodelabel.CertURI(nodelabel.Region, "eu-west-1"))
	admin := leaf("", "spiffe://example.org/admin/alice")

	drift := func(node, region string) *mcpreadyv1.ReportDriftRequest {
		return &mcpreadyv1.ReportDriftRequest{Node: &mcpreadyv1.Node{Id: node,
			Labels: map[string]string{string(nodelabel.Region): region}}}
	}
	call(agent, "/mcpready.v1.AdminService/ReportDrift", drift("host-1", "eu-west-1"))
	call(agent, "/mcpready.v1.AdminService/ReportDrift", drift("host-2", "eu-west-1"))
	call(agent, "/mcpready.v1.AdminService/ReportDrift", drift("host-1", "us-east-1"))
	call(agent, "/mcpready.v1.AdminService/Apply", &mcpreadyv1.ApplyRequest{})
	call(admin, "/mcpready.v1.AdminService/Apply", &mcpreadyv1.ApplyRequest{})

	refused := a.RefusedCounter()
	for _, reason := range []string{"wrong-node", "wrong-labels"} {
		fmt.Println("refused ReportDrift", reason, testutil.ToFloat64(refused.WithLabelValues("/mcpready.v1.AdminService/ReportDrift", reason)))
	}
	fmt.Println("refused Apply forbidden", testutil.ToFloat64(refused.WithLabelValues("/mcpready.v1.AdminService/Apply", "forbidden")))
	// Output:
	// spiffe://example.org/agent/host-1 ReportDrift: handled OK
	// spiffe://example.org/agent/host-1 ReportDrift: <nil> PermissionDenied
	// => node id is not the caller's: request names node "host-2", certificate is "host-1"
	// spiffe://example.org/agent/host-1 ReportDrift: <nil> PermissionDenied
	// => node labels are not the caller's: region=us-east-1 is bound to "spiffe://example.org/agent/host-1" neither by its certificate (node-label URI SANs) nor by a node-label rule
	// spiffe://example.org/agent/host-1 Apply: <nil> PermissionDenied
	// => role does not allow this method: /mcpready.v1.AdminService/Apply needs admin; "spiffe://example.org/agent/host-1" holds [agent]
	// spiffe://example.org/admin/alice Apply: handled OK
	// refused ReportDrift wrong-node 1
	// refused ReportDrift wrong-labels 1
	// refused Apply forbidden 1
}
