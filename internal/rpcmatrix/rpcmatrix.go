// Package rpcmatrix is the authorization matrix of mcpready's gRPC API for
// tests: every RPC of the mcpready.v1 services (from the proto registry)
// with the roles that may call it, written out here independently of
// controlplane/authz's own method table, and a way to call any of them
// with an empty request. Tests check with it that a role that does not
// hold an RPC is refused, on a stub server (controlplane/authz) and on the
// real control plane (controlplane).
//
// It must not be imported by anything but tests: it grants nothing, and
// its table is an expectation, not a configuration.
package rpcmatrix

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/mcpready/mcpready/controlplane/authz"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
)

// Allowed is the expected role of every mcpready RPC, by "Service/Method":
// who may call it (the agent role only for its own node).
var Allowed = map[string][]authz.Role{
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

// Methods returns every method of every mcpready.v1 service; the test
// fails when one has no entry in Allowed, or Allowed names one that is
// gone.
func Methods(t testing.TB) []protoreflect.MethodDescriptor {
	t.Helper()
	var methods []protoreflect.MethodDescriptor
	protoregistry.GlobalFiles.RangeFilesByPackage("mcpready.v1", func(fd protoreflect.FileDescriptor) bool {
		for i := 0; i < fd.Services().Len(); i++ {
			for j := 0; j < fd.Services().Get(i).Methods().Len(); j++ {
				methods = append(methods, fd.Services().Get(i).Methods().Get(j))
			}
		}
		return true
	})
	for _, m := range methods {
		if _, ok := Allowed[Name(m)]; !ok {
			t.Fatalf("rpcmatrix: no expectation for %s: add it to Allowed", Name(m))
		}
	}
	if len(methods) != len(Allowed) {
		t.Fatalf("rpcmatrix: %d methods in the proto registry, %d in Allowed", len(methods), len(Allowed))
	}
	return methods
}

// Name is m as "Service/Method".
func Name(m protoreflect.MethodDescriptor) string {
	return string(m.Parent().Name()) + "/" + string(m.Name())
}

// Holds reports whether role may call m.
func Holds(m protoreflect.MethodDescriptor, role authz.Role) bool {
	for _, r := range Allowed[Name(m)] {
		if r == role {
			return true
		}
	}
	return false
}

// Refused reports whether code is an authorization refusal.
func Refused(code codes.Code) bool {
	return code == codes.PermissionDenied || code == codes.Unauthenticated
}

// Invoke calls m on cc with an empty request naming node (when the request
// has a node) and returns the status code: for a stream, that of its first
// response.
func Invoke(t testing.TB, cc *grpc.ClientConn, m protoreflect.MethodDescriptor, node string) codes.Code {
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
	return status.Code(st.RecvMsg(newMessage(t, m.Output().FullName())))
}

func newMessage(t testing.TB, name protoreflect.FullName) proto.Message {
	t.Helper()
	mt, err := protoregistry.GlobalTypes.FindMessageByName(name)
	if err != nil {
		t.Fatal(err)
	}
	return mt.New().Interface()
}
