package authz_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"math/big"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/mcpready/mcpready/controlplane/authz"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
)

// pki is a throw-away CA that issues server and client certificates.
type pki struct {
	ca    *x509.Certificate
	key   *ecdsa.PrivateKey
	pool  *x509.CertPool
	serve tls.Certificate
}

func newPKI(t *testing.T) *pki {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(der)
	p := &pki{ca: ca, key: key, pool: x509.NewCertPool()}
	p.pool.AddCert(ca)
	p.serve = p.issue(t, "controlplane", "", x509.ExtKeyUsageServerAuth)
	return p
}

var serial int64 = 10

func (p *pki) issue(t *testing.T, cn, uri string, usage x509.ExtKeyUsage) tls.Certificate {
	t.Helper()
	if uri == "" {
		return p.issueURIs(t, cn, usage)
	}
	return p.issueURIs(t, cn, usage, uri)
}

// issueURIs is issue with any number of URI SANs, in order.
func (p *pki) issueURIs(t *testing.T, cn string, usage x509.ExtKeyUsage, uris ...string) tls.Certificate {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	serial++
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{usage}, KeyUsage: x509.KeyUsageDigitalSignature}
	if usage == x509.ExtKeyUsageServerAuth {
		tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
	}
	for _, uri := range uris {
		u, err := url.Parse(uri)
		if err != nil {
			t.Fatal(err)
		}
		tmpl.URIs = append(tmpl.URIs, u)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, key.Public(), p.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// discovery reads every request and answers each, so node checks on later
// messages are exercised.
type discovery struct {
	mcpreadyv1.UnimplementedDiscoveryServiceServer
}

func (discovery) DeltaResources(s grpc.BidiStreamingServer[mcpreadyv1.DeltaResourcesRequest, mcpreadyv1.DeltaResourcesResponse]) error {
	for {
		if _, err := s.Recv(); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if err := s.Send(&mcpreadyv1.DeltaResourcesResponse{Nonce: "n"}); err != nil {
			return err
		}
	}
}

// serve starts a real gRPC server with the Authorizer's interceptors. The
// services are the generated Unimplemented ones: a call that reaches its
// handler answers Unimplemented; a refused one never gets there.
func serve(t *testing.T, a *authz.Authorizer, creds credentials.TransportCredentials) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	opts := []grpc.ServerOption{grpc.UnaryInterceptor(a.UnaryInterceptor()), grpc.StreamInterceptor(a.StreamInterceptor())}
	if creds != nil {
		opts = append(opts, grpc.Creds(creds))
	}
	gs := grpc.NewServer(opts...)
	mcpreadyv1.RegisterAdminServiceServer(gs, mcpreadyv1.UnimplementedAdminServiceServer{})
	mcpreadyv1.RegisterReceiptsServiceServer(gs, mcpreadyv1.UnimplementedReceiptsServiceServer{})
	mcpreadyv1.RegisterDiscoveryServiceServer(gs, discovery{})
	go gs.Serve(lis)
	t.Cleanup(gs.Stop)
	return lis.Addr().String()
}

func dial(t *testing.T, addr string, creds credentials.TransportCredentials) *grpc.ClientConn {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

func clientCreds(p *pki, cert *tls.Certificate) credentials.TransportCredentials {
	cfg := &tls.Config{RootCAs: p.pool, MinVersion: tls.VersionTLS12}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{*cert}
	}
	return credentials.NewTLS(cfg)
}

// calls makes one call of each kind and returns its gRPC code.
func calls(ctx context.Context, cc *grpc.ClientConn, node string) map[string]codes.Code {
	admin := mcpreadyv1.NewAdminServiceClient(cc)
	rec := mcpreadyv1.NewReceiptsServiceClient(cc)
	out := map[string]codes.Code{}
	_, err := admin.Apply(ctx, &mcpreadyv1.ApplyRequest{})
	out["apply"] = status.Code(err)
	_, err = admin.Delete(ctx, &mcpreadyv1.DeleteRequest{})
	out["delete"] = status.Code(err)
	_, err = admin.Get(ctx, &mcpreadyv1.GetRequest{})
	out["get"] = status.Code(err)
	_, err = rec.QueryReceipts(ctx, &mcpreadyv1.QueryReceiptsRequest{})
	out["query"] = status.Code(err)
	_, err = admin.ReportDrift(ctx, &mcpreadyv1.ReportDriftRequest{Node: &mcpreadyv1.Node{Id: node}})
	out["drift"] = status.Code(err)
	out["discovery"] = deltaCode(ctx, cc, node, "")
	return out
}

// deltaCode opens a delta stream, sends a first request naming node and,
// when later is set, a second one naming later; it returns the code the
// stream ends with (OK when both were answered).
func deltaCode(ctx context.Context, cc *grpc.ClientConn, node, later string) codes.Code {
	st, err := mcpreadyv1.NewDiscoveryServiceClient(cc).DeltaResources(ctx)
	if err != nil {
		return status.Code(err)
	}
	reqs := []*mcpreadyv1.DeltaResourcesRequest{{Node: &mcpreadyv1.Node{Id: node}}}
	if later != "" {
		reqs = append(reqs, &mcpreadyv1.DeltaResourcesRequest{Node: &mcpreadyv1.Node{Id: later}})
	}
	for _, r := range reqs {
		_ = st.Send(r) // a refused stream may be closed already (io.EOF); Recv has its status
		if _, err := st.Recv(); err != nil {
			return status.Code(err)
		}
	}
	st.CloseSend()
	return codes.OK
}

const (
	ok   = codes.Unimplemented // reached the (unimplemented) unary handler
	okS  = codes.OK            // the stream handler answered every request
	deny = codes.PermissionDenied
	anon = codes.Unauthenticated
)

func TestRolesOverMTLS(t *testing.T) {
	p := newPKI(t)
	reg := prometheus.NewRegistry()
	a, err := authz.New(authz.Options{Registerer: reg, Rules: []authz.Rule{
		{Match: "spiffe://example.org/agent/*", Role: authz.RoleAgent},
		{Match: "ops-admin", Role: authz.RoleAdmin},
		{Match: "audit-*", Role: authz.RoleReader},
	}})
	if err != nil {
		t.Fatal(err)
	}
	srv := credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{p.serve}, ClientCAs: p.pool,
		ClientAuth: tls.VerifyClientCertIfGiven, MinVersion: tls.VersionTLS12})
	addr := serve(t, a, srv)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	agentCert := p.issue(t, "ignored-cn", "spiffe://example.org/agent/host-1", x509.ExtKeyUsageClientAuth)
	adminCert := p.issue(t, "ops-admin", "", x509.ExtKeyUsageClientAuth)
	readerCert := p.issue(t, "audit-team", "", x509.ExtKeyUsageClientAuth)
	strangerCert := p.issue(t, "someone", "", x509.ExtKeyUsageClientAuth)
	cases := []struct {
		name string
		cert *tls.Certificate
		node string
		want map[string]codes.Code
	}{
		{"agent", &agentCert, "host-1", map[string]codes.Code{"apply": deny, "delete": deny, "get": deny, "query": deny, "drift": ok, "discovery": okS}},
		{"agent as another node", &agentCert, "host-2", map[string]codes.Code{"apply": deny, "delete": deny, "get": deny, "query": deny, "drift": deny, "discovery": deny}},
		{"admin", &adminCert, "host-1", map[string]codes.Code{"apply": ok, "delete": ok, "get": ok, "query": ok, "drift": deny, "discovery": deny}},
		{"reader", &readerCert, "host-1", map[string]codes.Code{"apply": deny, "delete": deny, "get": ok, "query": ok, "drift": deny, "discovery": deny}},
		{"no role", &strangerCert, "someone", map[string]codes.Code{"apply": deny, "delete": deny, "get": deny, "query": deny, "drift": deny, "discovery": deny}},
		{"no certificate", nil, "host-1", map[string]codes.Code{"apply": anon, "delete": anon, "get": anon, "query": anon, "drift": anon, "discovery": anon}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := calls(ctx, dial(t, addr, clientCreds(p, c.cert)), c.node)
			for k, w := range c.want {
				if got[k] != w {
					t.Errorf("%s: got %v, want %v", k, got[k], w)
				}
			}
		})
	}
	// An agent that starts as itself and switches node id mid-stream is cut off.
	if code := deltaCode(ctx, dial(t, addr, clientCreds(p, &agentCert)), "host-1", "host-2"); code != deny {
		t.Errorf("node switch mid-stream: %v, want %v", code, deny)
	}
	if n := testutil.ToFloat64(a.RefusedCounter().WithLabelValues("/mcpready.v1.AdminService/Apply", "unauthenticated")); n != 1 {
		t.Errorf("unauthenticated Apply refusals counted %v, want 1", n)
	}
}

func TestPlaintext(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, local := range []bool{false, true} {
		a, err := authz.New(authz.Options{LocalPlaintext: local})
		if err != nil {
			t.Fatal(err)
		}
		got := calls(ctx, dial(t, serve(t, a, nil), insecure.NewCredentials()), "any-node")
		for k, code := range got {
			want := anon
			if local {
				want = ok
				if k == "discovery" {
					want = okS
				}
			}
			if code != want {
				t.Errorf("LocalPlaintext=%v %s: %v, want %v", local, k, code, want)
			}
		}
	}
}

func TestMethodTableCoversEveryService(t *testing.T) {
	var missing []string
	protoregistry.GlobalFiles.RangeFilesByPackage("mcpready.v1", func(fd protoreflect.FileDescriptor) bool {
		for i := 0; i < fd.Services().Len(); i++ {
			sd := fd.Services().Get(i)
			for j := 0; j < sd.Methods().Len(); j++ {
				m := "/" + string(sd.FullName()) + "/" + string(sd.Methods().Get(j).Name())
				if !authz.Covers(m) {
					missing = append(missing, m)
				}
			}
		}
		return true
	})
	if len(missing) > 0 {
		t.Fatalf("methods the table does not classify (they would be refused): %s", strings.Join(missing, ", "))
	}
	if authz.Covers("/mcpready.v1.AdminService/Nope") {
		t.Fatal("unknown method covered")
	}
}

func TestParseRule(t *testing.T) {
	r, err := authz.ParseRule("spiffe://example.org/agent/*=agent")
	if err != nil || r.Role != authz.RoleAgent || r.Match != "spiffe://example.org/agent/*" {
		t.Fatalf("%+v %v", r, err)
	}
	for _, bad := range []string{"", "x", "=admin", "x=root", "[=admin"} {
		if _, err := authz.ParseRule(bad); !errors.Is(err, authz.ErrConfig) {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

func FuzzParseRule(f *testing.F) {
	f.Add("a=admin")
	f.Add("spiffe://x/*=agent")
	f.Fuzz(func(t *testing.T, s string) {
		r, err := authz.ParseRule(s)
		if err != nil && !errors.Is(err, authz.ErrConfig) {
			t.Fatalf("untyped error %v", err)
		}
		if err == nil {
			if _, err := authz.New(authz.Options{Rules: []authz.Rule{r}}); err != nil {
				t.Fatalf("parsed rule %q refused by New: %v", s, err)
			}
		}
	})
}
