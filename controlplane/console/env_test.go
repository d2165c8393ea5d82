package console_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/mcpready/mcpready/artifact"
	"github.com/mcpready/mcpready/controlplane/authz"
	"github.com/mcpready/mcpready/controlplane/console"
	"github.com/mcpready/mcpready/controlplane/discovery"
	"github.com/mcpready/mcpready/controlplane/lifecycle"
	"github.com/mcpready/mcpready/controlplane/receiptstore"
	"github.com/mcpready/mcpready/controlplane/store"
	"github.com/mcpready/mcpready/controlplane/writer"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/internal/etcdtest"
	"github.com/mcpready/mcpready/internal/testpki"
	"github.com/mcpready/mcpready/ledger"
)

const (
	oldEntry = "docs.lookup@2.4.1"
	server   = "com.example/docs"
	tool     = "docs.lookup"
)

// env is a control plane's state without the control plane: embedded
// etcd, the store, the write path, the lifecycle, a receipt store with
// receipts and a Discovery server with one agent stream that ACKed one
// version and NACKed the next.
type env struct {
	st        *store.Store
	lc        *lifecycle.Manager
	rs        *receiptstore.Store
	ds        *discovery.Server
	candidate string
	now       time.Time
}

func newEnv(t testing.TB, receipts int) *env {
	t.Helper()
	cli, _ := etcdtest.Etcd(t)
	st := store.New(cli, store.Options{})
	p := testpki.New(t)
	w, err := writer.New(writer.Options{Store: st, Root: p.Root.Public()})
	if err != nil {
		t.Fatal(err)
	}
	lc, err := lifecycle.New(lifecycle.Options{Writer: w, Signer: p.Observer})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	apply := func(b []byte) {
		t.Helper()
		if _, _, err := w.Apply(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	apply(p.TrustPolicy)
	now := time.Now()
	entry := &mcpreadyv1.RegistryEntry{
		Provenance:    &mcpreadyv1.Provenance{Issuer: "test", Version: "1"},
		Identity:      &mcpreadyv1.ToolIdentity{ServerName: server, ServerVersion: "2.4.1", ToolName: tool, Endpoint: "https://docs.example/mcp", InputSchemaDigest: "sha256:in17", OutputSchemaDigest: "sha256:out9"},
		SideEffect:    mcpreadyv1.SideEffectClass_SIDE_EFFECT_CLASS_READ_ONLY,
		State:         mcpreadyv1.LifecycleState_LIFECYCLE_STATE_QUALIFIED,
		Qualification: &mcpreadyv1.Qualification{Suite: "docs-lab", EvidenceRef: "lab/docs/fresh"},
	}
	apply(testpki.Sign(t, artifact.New(artifact.KindRegistryEntry, oldEntry, entry), p.Org))
	rate := func(l mcpreadyv1.ReadinessLayer, ok, of int64) *mcpreadyv1.LayerRate {
		return &mcpreadyv1.LayerRate{Layer: l, Successes: ok, Denominator: of, SuccessDefinition: "answered"}
	}
	evidence := map[string]*mcpreadyv1.Evidence{
		"lab/docs/fresh": {Method: mcpreadyv1.EvidenceMethod_EVIDENCE_METHOD_SYNTHETIC, ExpiresAt: timestamppb.New(now.Add(time.Hour)),
			Rates:   []*mcpreadyv1.LayerRate{rate(mcpreadyv1.ReadinessLayer_READINESS_LAYER_REACHABILITY, 1, 1), rate(mcpreadyv1.ReadinessLayer_READINESS_LAYER_INVOCATION, 1, 1)},
			Latency: &mcpreadyv1.Latency{P50Ms: 120, P95Ms: 300, Count: 1}, BlindSpots: []string{"one vantage point"}},
		"lab/docs/stale": {Method: mcpreadyv1.EvidenceMethod_EVIDENCE_METHOD_SYNTHETIC, ExpiresAt: timestamppb.New(now.Add(-time.Minute)),
			Rates: []*mcpreadyv1.LayerRate{rate(mcpreadyv1.ReadinessLayer_READINESS_LAYER_REACHABILITY, 0, 1)}},
		"passive/docs": {Method: mcpreadyv1.EvidenceMethod_EVIDENCE_METHOD_PASSIVE, ExpiresAt: timestamppb.New(now.Add(time.Hour)),
			Rates: []*mcpreadyv1.LayerRate{rate(mcpreadyv1.ReadinessLayer_READINESS_LAYER_INVOCATION, 0, 0)}, Sample: &mcpreadyv1.Sample{Attempted: 0}},
	}
	for name, ev := range evidence {
		ev.Subject = &mcpreadyv1.Subject{ServerName: server, ToolName: tool, ServerVersion: "2.4.1"}
		ev.Observer = &mcpreadyv1.Observer{Id: "lab-observer", Software: "mcpready-probe"}
		ev.ObservedAt = timestamppb.New(now.Add(-10 * time.Minute))
		apply(testpki.Sign(t, artifact.New(artifact.KindEvidence, name, testpki.ObserverEvidence.Claim(ev)), p.Observer))
	}
	observed := &mcpreadyv1.ToolIdentity{ServerName: server, ServerVersion: "2.5.0", ToolName: tool, Endpoint: "https://docs.example/mcp", InputSchemaDigest: "sha256:in17", OutputSchemaDigest: "sha256:out10"}
	cur, err := st.Get(ctx, artifact.KindRegistryEntry, oldEntry)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := lc.ReportDrift(ctx, testpki.DriftReport(t, p.Agent, "host-1", oldEntry, cur.Digest,
		[]mcpreadyv1.DriftLabel{mcpreadyv1.DriftLabel_DRIFT_LABEL_VERSION_DRIFT, mcpreadyv1.DriftLabel_DRIFT_LABEL_OUTPUT_SCHEMA_DRIFT}, observed, now))
	if err != nil {
		t.Fatal(err)
	}
	rs, err := receiptstore.Open(t.TempDir(), receiptstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rs.Close() })
	fillReceipts(t, rs, receipts, now)
	e := &env{st: st, lc: lc, rs: rs, candidate: resp.GetCandidateName(), now: now}
	e.ds = startFleet(t, st)
	return e
}

// fillReceipts appends n receipts in batches of 100: receipt i is
// "r-<i>", workflow "wf-<i%10>", emitted i milliseconds after
// now-1h; every seventh failed.
func fillReceipts(t testing.TB, rs *receiptstore.Store, n int, now time.Time) {
	t.Helper()
	start := now.Add(-time.Hour)
	for seq := 0; seq*100 < n; seq++ {
		bundle := []byte(fmt.Sprintf(`{"bundle":%d}`, seq))
		b := &ledger.Batch{AgentID: "host-1", Sequence: uint64(seq + 1), BatchID: fmt.Sprintf("b-%d", seq), Digest: artifact.Digest(bundle), Bundle: bundle, Received: now}
		for i := seq * 100; i < min(n, (seq+1)*100); i++ {
			outcome := mcpreadyv1.OutcomeClass_OUTCOME_CLASS_SUCCESS
			if i%7 == 0 {
				outcome = mcpreadyv1.OutcomeClass_OUTCOME_CLASS_TOOL_ERROR
			}
			r := &mcpreadyv1.Receipt{ReceiptId: fmt.Sprintf("r-%d", i), WorkflowId: fmt.Sprintf("wf-%d", i%10), Requested: "docs_lookup",
				EmittedAt: timestamppb.New(start.Add(time.Duration(i) * time.Millisecond)), Outcome: outcome, Latency: durationpb.New(time.Duration(50+i%900) * time.Millisecond),
				Selected:   &mcpreadyv1.Selection{ServerName: server, ToolName: tool, Endpoint: "https://docs.example/mcp"},
				Candidates: []*mcpreadyv1.Candidate{{Entry: oldEntry, ServerName: server, ToolName: tool, Selected: true}, {Entry: "other@1", ServerName: "com.example/other", ToolName: tool, RejectedAtStep: 6, RejectionCode: "stale_evidence"}},
				Attempts:   []*mcpreadyv1.Attempt{{Number: 1, Entry: oldEntry, Outcome: outcome, Latency: durationpb.New(40 * time.Millisecond)}}}
			enc, err := ledger.Encode(r)
			if err != nil {
				t.Fatal(err)
			}
			b.Receipts = append(b.Receipts, enc)
		}
		if _, err := rs.Append(b, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
}

// startFleet runs a Discovery server over st and one agent stream, node
// "host-1", that ACKs the Policy version it is sent and then NACKs the
// next one with a reason.
func startFleet(t testing.TB, st *store.Store) *discovery.Server {
	t.Helper()
	ds := discovery.New(st, discovery.Options{Debounce: 10 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { ds.Run(ctx); close(done) }()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	mcpreadyv1.RegisterDiscoveryServiceServer(gs, ds)
	go gs.Serve(lis)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(); gs.Stop(); cancel(); <-done })
	stream, err := mcpreadyv1.NewDiscoveryServiceClient(conn).StreamResources(ctx)
	if err != nil {
		t.Fatal(err)
	}
	typeURL := artifact.KindEvidence.TypeURL()
	if err := stream.Send(&mcpreadyv1.StreamResourcesRequest{Node: &mcpreadyv1.Node{Id: "host-1"}, TypeUrl: typeURL}); err != nil {
		t.Fatal(err)
	}
	r1, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	stream.Send(&mcpreadyv1.StreamResourcesRequest{TypeUrl: typeURL, VersionInfo: r1.VersionInfo, ResponseNonce: r1.Nonce,
		ErrorDetail: &mcpreadyv1.ErrorDetail{Code: 3, Message: "signature does not verify against the pinned root"}})
	deadline := time.Now().Add(10 * time.Second)
	for {
		if a := ds.Agents(); len(a) == 1 && len(a[0].Types) == 1 && a[0].Types[0].Nacked != "" {
			return ds
		}
		if time.Now().After(deadline) {
			t.Fatalf("the NACK never reached Agents: %+v", ds.Agents())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// handler is the console over e, authorising with rules (mTLS) or, with
// none, the quickstart's loopback rule.
func (e *env) handler(t testing.TB, rules []authz.Rule) http.Handler {
	t.Helper()
	az, err := authz.New(authz.Options{Rules: rules, LocalPlaintext: len(rules) == 0})
	if err != nil {
		t.Fatal(err)
	}
	c, err := console.New(console.Options{Registry: e.lc, Artifacts: e.st, Receipts: e.rs, Fleet: e.ds, Authorizer: az, Now: func() time.Time { return e.now }})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// mtlsServer serves h over TLS that asks for (and verifies, when given) a
// client certificate from f's CA.
func mtlsServer(t testing.TB, h http.Handler, f testpki.TLSFiles) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	cert, err := tls.LoadX509KeyPair(f.ServerCert, f.ServerKey)
	if err != nil {
		t.Fatal(err)
	}
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: pool(t, f.CA), ClientAuth: tls.VerifyClientCertIfGiven, MinVersion: tls.VersionTLS12}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

func pool(t testing.TB, caFile string) *x509.CertPool {
	t.Helper()
	b, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	p := x509.NewCertPool()
	p.AppendCertsFromPEM(b)
	return p
}

// client trusts f's CA and presents cert/key ("" presents none).
func client(t testing.TB, f testpki.TLSFiles, cert, key string) *http.Client {
	t.Helper()
	cfg := &tls.Config{RootCAs: pool(t, f.CA), MinVersion: tls.VersionTLS12}
	if cert != "" {
		c, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{c}
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}, Timeout: 10 * time.Second}
}
