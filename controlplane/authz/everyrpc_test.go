package authz_test

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/mcpready/mcpready/controlplane/authz"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/internal/rpcmatrix"
)

// TestEveryRPCEveryWrongRole calls every method of every mcpready service
// (from the proto registry, with the roles internal/rpcmatrix expects of
// it) as each identity: each wrong role, an agent
// naming another node, a certificate with no role, and no certificate.
// Every call a role does not hold is refused (PermissionDenied, or
// Unauthenticated without a certificate); every call it holds passes the
// authorizer.
func TestEveryRPCEveryWrongRole(t *testing.T) {
	p := newPKI(t)
	a, err := authz.New(authz.Options{Rules: []authz.Rule{
		{Match: "spiffe://example.org/agent/*", Role: authz.RoleAgent},
		{Match: "ops-admin", Role: authz.RoleAdmin},
		{Match: "audit-*", Role: authz.RoleReader},
	}})
	if err != nil {
		t.Fatal(err)
	}
	addr := serveReading(t, a, credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{p.serve}, ClientCAs: p.pool,
		ClientAuth: tls.VerifyClientCertIfGiven, MinVersion: tls.VersionTLS12}))
	agentCert := p.issue(t, "x", "spiffe://example.org/agent/host-1", x509.ExtKeyUsageClientAuth)
	adminCert := p.issue(t, "ops-admin", "", x509.ExtKeyUsageClientAuth)
	readerCert := p.issue(t, "audit-team", "", x509.ExtKeyUsageClientAuth)
	strangerCert := p.issue(t, "someone", "", x509.ExtKeyUsageClientAuth)
	callers := []struct {
		name string
		cert *tls.Certificate
		role authz.Role // "" holds none
		node string
	}{
		{"agent", &agentCert, authz.RoleAgent, "host-1"},
		{"agent as another node", &agentCert, "", "host-2"},
		{"admin", &adminCert, authz.RoleAdmin, "host-1"},
		{"reader", &readerCert, authz.RoleReader, "host-1"},
		{"no role", &strangerCert, "", "host-1"},
		{"no certificate", nil, "", "host-1"},
	}
	methods := rpcmatrix.Methods(t)
	for _, c := range callers {
		cc := dial(t, addr, clientCreds(p, c.cert))
		for _, m := range methods {
			holds := rpcmatrix.Holds(m, c.role)
			code := rpcmatrix.Invoke(t, cc, m, c.node)
			refused := rpcmatrix.Refused(code)
			switch {
			case holds && refused:
				t.Errorf("%s calling %s: refused (%v)", c.name, rpcmatrix.Name(m), code)
			case !holds && !refused:
				t.Errorf("%s calling %s: %v, want refused", c.name, rpcmatrix.Name(m), code)
			case !holds && c.cert == nil && code != codes.Unauthenticated:
				t.Errorf("%s calling %s: %v, want Unauthenticated", c.name, rpcmatrix.Name(m), code)
			}
		}
	}
}

// readingDiscovery and readingReceipts read the first request of every
// client stream before answering Unimplemented, as real handlers read
// before they act (the authorizer checks a stream's node id on its
// first request).
type readingDiscovery struct{ discovery }

func (readingDiscovery) StreamResources(s grpc.BidiStreamingServer[mcpreadyv1.StreamResourcesRequest, mcpreadyv1.StreamResourcesResponse]) error {
	if _, err := s.Recv(); err != nil {
		return err
	}
	return status.Error(codes.Unimplemented, "test stub")
}

type readingReceipts struct {
	mcpreadyv1.UnimplementedReceiptsServiceServer
}

func (readingReceipts) UploadBatches(s grpc.BidiStreamingServer[mcpreadyv1.UploadBatchesRequest, mcpreadyv1.UploadBatchesResponse]) error {
	if _, err := s.Recv(); err != nil {
		return err
	}
	return status.Error(codes.Unimplemented, "test stub")
}

// serveReading is serve with the reading stubs.
func serveReading(t *testing.T, a *authz.Authorizer, creds credentials.TransportCredentials) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer(grpc.UnaryInterceptor(a.UnaryInterceptor()), grpc.StreamInterceptor(a.StreamInterceptor()), grpc.Creds(creds))
	mcpreadyv1.RegisterAdminServiceServer(gs, mcpreadyv1.UnimplementedAdminServiceServer{})
	mcpreadyv1.RegisterReceiptsServiceServer(gs, readingReceipts{})
	mcpreadyv1.RegisterDiscoveryServiceServer(gs, readingDiscovery{})
	go gs.Serve(lis)
	t.Cleanup(gs.Stop)
	return lis.Addr().String()
}
