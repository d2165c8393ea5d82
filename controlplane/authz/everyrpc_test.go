package authz_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/mcpready/mcpready/controlplane/authz"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
)

// allowedRoles is the expected role of every mcpready RPC, written out
// independently of the method table: who may call it ("" for the agent
// role means: for its own node only).
var allowedRoles = map[string][]authz.Role{
	"AdminService/Apply":               {authz.RoleAdmin},
	"AdminService/Delete":              {authz.RoleAdmin},
	"AdminService/Get":                 {authz.RoleAdmin, authz.RoleReader},
	"AdminService/History":             {authz.RoleAdmin, authz.RoleReader},
	"AdminService/RegistryStatus":      {authz.RoleAdmin, authz.RoleReader},
	"AdminService/ReportDrift":         {authz.RoleAgent},
	"DiscoveryService/StreamResources": {authz.RoleAgent},
	"DiscoveryService/DeltaResources":  {authz.RoleAgent},
	"ReceiptsService/UploadBatches":    {authz.RoleAgent},
	"ReceiptsService/QueryReceipts":    {authz.RoleAdmin, authz.RoleReader},
	"ReceiptsService/TailReceipts":     {authz.RoleAdmin, authz.RoleReader},
	"ReceiptsService/ExportBatches":    {authz.RoleAdmin, authz.RoleReader},
}

// TestEveryRPCEveryWrongRole calls every method of every mcpready service
// (from the proto registry) as each identity: each wrong role, an agent
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
	var methods []protoreflect.MethodDescriptor
	protoregistry.GlobalFiles.RangeFilesByPackage("mcpready.v1", func(fd protoreflect.FileDescriptor) bool {
		for i := 0; i < fd.Services().Len(); i++ {
			for j := 0; j < fd.Services().Get(i).Methods().Len(); j++ {
				methods = append(methods, fd.Services().Get(i).Methods().Get(j))
			}
		}
		return true
	})
	if len(methods) != len(allowedRoles) {
		t.Fatalf("%d methods in the proto registry, %d expected here: update allowedRoles", len(methods), len(allowedRoles))
	}
	for _, c := range callers {
		cc := dial(t, addr, clientCreds(p, c.cert))
		for _, m := range methods {
			short := string(m.Parent().Name()) + "/" + string(m.Name())
			allowed, ok := allowedRoles[short]
			if !ok {
				t.Fatalf("no expectation for %s", short)
			}
			holds := false
			for _, r := range allowed {
				holds = holds || r == c.role
			}
			code := invoke(t, cc, m, c.node)
			refused := code == codes.PermissionDenied || code == codes.Unauthenticated
			switch {
			case holds && refused:
				t.Errorf("%s calling %s: refused (%v)", c.name, short, code)
			case !holds && !refused:
				t.Errorf("%s calling %s: %v, want refused", c.name, short, code)
			case !holds && c.cert == nil && code != codes.Unauthenticated:
				t.Errorf("%s calling %s: %v, want Unauthenticated", c.name, short, code)
			}
		}
	}
}

// invoke calls m with an empty request naming node (when the request has
// a node) and returns the status code.
func invoke(t *testing.T, cc *grpc.ClientConn, m protoreflect.MethodDescriptor, node string) codes.Code {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	in := newMessage(t, m.Input().FullName())
	if f := in.ProtoReflect().Descriptor().Fields().ByName("node"); f != nil {
		in.ProtoReflect().Set(f, protoreflect.ValueOfMessage((&mcpreadyv1.Node{Id: node}).ProtoReflect()))
	}
	full := "/" + string(m.Parent().FullName()) + "/" + string(m.Name())
	if !m.IsStreamingClient() && !m.IsStreamingServer() {
		return status.Code(cc.Invoke(ctx, full, in, newMessage(t, m.Output().FullName())))
	}
	st, err := cc.NewStream(ctx, &grpc.StreamDesc{ServerStreams: m.IsStreamingServer(), ClientStreams: m.IsStreamingClient()}, full)
	if err != nil {
		return status.Code(err)
	}
	if err := st.SendMsg(in); err != nil && !strings.Contains(err.Error(), "EOF") {
		return status.Code(err)
	}
	if !m.IsStreamingClient() {
		_ = st.CloseSend()
	}
	err = st.RecvMsg(newMessage(t, m.Output().FullName()))
	return status.Code(err)
}

func newMessage(t *testing.T, name protoreflect.FullName) proto.Message {
	t.Helper()
	mt, err := protoregistry.GlobalTypes.FindMessageByName(name)
	if err != nil {
		t.Fatal(err)
	}
	return mt.New().Interface()
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
