package ingest

import (
	"bytes"
	"context"
	"crypto"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/mcpready/mcpready/agent/receipt"
	"github.com/mcpready/mcpready/agent/shipper"
	"github.com/mcpready/mcpready/agent/spool"
	"github.com/mcpready/mcpready/artifact"
	"github.com/mcpready/mcpready/controlplane/receiptstore"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/ledger"
	"github.com/mcpready/mcpready/ledger/ledgertest"
	"github.com/mcpready/mcpready/sign"
)

type pki struct {
	root, agent, other, revoked, unknown crypto.Signer
	trust                                *sign.Trust
}

var quiet = slog.New(slog.DiscardHandler)

func key(t testing.TB) crypto.Signer {
	k, err := sign.GenerateKey(sign.AlgorithmECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func grant(t testing.TB, name string, k crypto.Signer, scope string) *mcpreadyv1.KeyGrant {
	pem, err := sign.MarshalPublicKey(k.Public())
	if err != nil {
		t.Fatal(err)
	}
	id, _ := sign.KeyID(k.Public())
	return &mcpreadyv1.KeyGrant{KeyId: id, PublicKey: string(pem), Name: name, Kinds: []string{"ReceiptBatch"}, Scopes: []string{scope}}
}

// newPKI grants agent "agent-1/*", other "agent-2/*" and a revoked key.
func newPKI(t testing.TB) *pki {
	p := &pki{root: key(t), agent: key(t), other: key(t), revoked: key(t), unknown: key(t)}
	rev := grant(t, "revoked", p.revoked, "agent-1/*")
	rev.Revoked = true
	tp := &mcpreadyv1.TrustPolicy{Keys: []*mcpreadyv1.KeyGrant{grant(t, "agent-1", p.agent, "agent-1/*"), grant(t, "agent-2", p.other, "agent-2/*"), rev}}
	bundle, _, err := sign.Sign(artifact.New(artifact.KindTrustPolicy, "test/trust", tp), p.root)
	if err != nil {
		t.Fatal(err)
	}
	if p.trust, err = sign.NewTrust(bundle, p.root.Public(), time.Now()); err != nil {
		t.Fatal(err)
	}
	return p
}

// controlPlane is a real gRPC server with the service on 127.0.0.1:0.
type controlPlane struct {
	svc   *Service
	store *receiptstore.Store
	addr  string
	srv   *grpc.Server
	logs  *bytes.Buffer
}

type syncBuf struct {
	mu sync.Mutex
	bytes.Buffer
}

func (b *syncBuf) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.Buffer.Write(p)
}

func startCP(t testing.TB, dir string, p *pki, logs *syncBuf) *controlPlane {
	return startCPWith(t, dir, p, logs, nil)
}

// startCPWith is startCP with shared chain heads (nil: local heads).
func startCPWith(t testing.TB, dir string, p *pki, logs *syncBuf, heads Heads) *controlPlane {
	t.Helper()
	log := slog.New(slog.NewTextHandler(logs, nil))
	st, err := receiptstore.Open(dir, receiptstore.Options{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := New(Options{Store: st, Trust: func() *sign.Trust { return p.trust }, Logger: log, Heads: heads})
	if err != nil {
		t.Fatal(err)
	}
	srv, addr := serve(t, svc)
	cp := &controlPlane{svc: svc, store: st, addr: addr, srv: srv}
	t.Cleanup(cp.stop)
	return cp
}

// serve runs svc on a gRPC server on a loopback port and returns the
// server (stopped when the test ends) and its address.
func serve(t testing.TB, svc *Service) (*grpc.Server, string) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	mcpreadyv1.RegisterReceiptsServiceServer(srv, svc)
	go srv.Serve(lis)
	t.Cleanup(srv.Stop)
	return srv, lis.Addr().String()
}

func (c *controlPlane) stop() {
	c.srv.Stop()
	c.store.Close()
}

func dial(t testing.TB, addr string) *grpc.ClientConn {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func openSpool(t testing.TB, dir string, k crypto.Signer) *spool.Spool {
	sp, err := spool.Open(dir, spool.Options{AgentID: "agent-1", Signer: k, BatchSize: 10, BatchInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return sp
}

func mk(i int) *mcpreadyv1.Receipt {
	r := ledgertest.Receipt("agent-1", time.Now())
	r.Requested = fmt.Sprintf("docs_lookup#%d", i)
	r.WorkflowId = "wf-1"
	r.Selected = &mcpreadyv1.Selection{ServerName: "docs-a", ToolName: "lookup"}
	return r
}

// ship runs the shipper until the spool is empty.
func ship(t *testing.T, addr string, sp *spool.Spool) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		done <- shipper.Run(ctx, dial(t, addr), sp, shipper.Options{Node: &mcpreadyv1.Node{Id: "agent-1"}, Window: 3, MinBackoff: 10 * time.Millisecond})
	}()
	deadline := time.Now().Add(10 * time.Second)
	for sp.Stats().Depth > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("spool not drained: %+v", sp.Stats())
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	<-done
}

// requireExactlyOnce checks the store holds receipts 0..n-1 once each.
func requireExactlyOnce(t *testing.T, st *receiptstore.Store, n int) {
	t.Helper()
	rs, _, err := st.Query(context.Background(), receiptstore.Query{})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, r := range rs {
		seen[r.Receipt.Requested]++
	}
	for i := 0; i < n; i++ {
		if c := seen[fmt.Sprintf("docs_lookup#%d", i)]; c != 1 {
			t.Fatalf("receipt %d stored %d times", i, c)
		}
	}
	if len(rs) != n {
		t.Fatalf("%d receipts stored, want %d", len(rs), n)
	}
}

func TestAgentCrashBetweenWriteAndSend(t *testing.T) {
	p := newPKI(t)
	cp := startCP(t, t.TempDir(), p, &syncBuf{})
	spoolDir := t.TempDir()
	sp := openSpool(t, spoolDir, p.agent)
	for i := 0; i < 25; i++ {
		if err := sp.Append(mk(i)); err != nil {
			t.Fatal(err)
		}
	}
	sp.Close() // crash: written, never sent (some never sealed)
	sp = openSpool(t, spoolDir, p.agent)
	defer sp.Close()
	for i := 25; i < 40; i++ {
		sp.Append(mk(i))
	}
	ship(t, cp.addr, sp)
	requireExactlyOnce(t, cp.store, 40)
}

func TestControlPlaneCrashBetweenStoreAndAck(t *testing.T) {
	p := newPKI(t)
	storeDir, spoolDir := t.TempDir(), t.TempDir()
	cp := startCP(t, storeDir, p, &syncBuf{})
	sp := openSpool(t, spoolDir, p.agent)
	defer sp.Close()
	for i := 0; i < 30; i++ {
		sp.Append(mk(i))
	}
	sp.Flush()
	// The control plane stores two batches but dies before acknowledging.
	first, err := sp.Pending(0, 2)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range first {
		if _, err := cp.svc.Ingest(nil, b.UploadRequest()); err != nil {
			t.Fatal(err)
		}
	}
	cp.stop()
	cp = startCP(t, storeDir, p, &syncBuf{})
	ship(t, cp.addr, sp) // resends 1 and 2 (duplicates), then 3
	requireExactlyOnce(t, cp.store, 30)
	if h := cp.store.Head("agent-1"); h != sp.Head() {
		t.Fatalf("store head %+v, spool head %+v", h, sp.Head())
	}
}

func TestControlPlaneAwayAgentKeepsSpooling(t *testing.T) {
	p := newPKI(t)
	lis, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := lis.Addr().String()
	lis.Close() // nothing listens yet
	sp := openSpool(t, t.TempDir(), p.agent)
	defer sp.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		done <- shipper.Run(ctx, dial(t, addr), sp, shipper.Options{MinBackoff: 5 * time.Millisecond, MaxBackoff: 50 * time.Millisecond, Logger: quiet})
	}()
	for i := 0; i < 20; i++ {
		if err := sp.Append(mk(i)); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(100 * time.Millisecond)
	// The control plane comes up at that address.
	st, _ := receiptstore.Open(t.TempDir(), receiptstore.Options{})
	defer st.Close()
	svc, _ := New(Options{Store: st, Trust: func() *sign.Trust { return p.trust }})
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		t.Skip("address reused:", err)
	}
	srv := grpc.NewServer()
	mcpreadyv1.RegisterReceiptsServiceServer(srv, svc)
	go srv.Serve(lis)
	defer srv.Stop()
	deadline := time.Now().Add(10 * time.Second)
	for sp.Stats().Depth > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-done
	requireExactlyOnce(t, st, 20)
}

// sealed is a batch signed directly (for bad-input cases).
type sealed struct {
	b        *mcpreadyv1.ReceiptBatch
	bundle   []byte
	receipts [][]byte
}

func seal(t *testing.T, k crypto.Signer, agent string, seq uint64, prev string, rs ...*mcpreadyv1.Receipt) sealed {
	b := &mcpreadyv1.ReceiptBatch{AgentId: agent, Sequence: seq, BatchId: ledger.NewID(), PrevBatchDigest: prev, CreatedAt: timestamppb.Now()}
	var enc [][]byte
	for _, r := range rs {
		e, _ := ledger.Encode(r)
		enc = append(enc, e)
		b.ReceiptDigests = append(b.ReceiptDigests, ledger.Digest(e))
	}
	return sealed{b, signBatch(t, k, ledger.BatchName(agent, seq), b), enc}
}

func signBatch(t *testing.T, k crypto.Signer, name string, b *mcpreadyv1.ReceiptBatch) []byte {
	bundle, _, err := sign.Sign(artifact.New(artifact.KindReceiptBatch, name, b), k)
	if err != nil {
		t.Fatal(err)
	}
	return bundle
}

func TestRejectsBadBatches(t *testing.T) {
	p := newPKI(t)
	cp := startCP(t, t.TempDir(), p, &syncBuf{})
	up := func(node string, s sealed) error {
		_, err := cp.svc.Ingest(&mcpreadyv1.Node{Id: node}, &mcpreadyv1.UploadBatchesRequest{BatchId: s.b.BatchId, Sequence: s.b.Sequence, Bundle: s.bundle, Receipts: s.receipts})
		return err
	}
	s1 := seal(t, p.agent, "agent-1", 1, "", mk(1))
	if err := up("agent-1", s1); err != nil {
		t.Fatal(err)
	}
	d1 := artifact.Digest(s1.bundle)
	s2 := seal(t, p.agent, "agent-1", 2, d1, mk(2))
	if err := up("agent-1", s2); err != nil {
		t.Fatal(err)
	}
	d2 := artifact.Digest(s2.bundle)

	tampered := s2
	tampered.bundle = bytes.Clone(s2.bundle)
	i := bytes.Index(tampered.bundle, []byte(`"sig":"`))
	if i < 0 {
		t.Fatal("could not tamper")
	}
	tampered.bundle[i+8] ^= 0x01 // one signature character changed
	edited := seal(t, p.agent, "agent-1", 3, d2, mk(3), mk(4))
	r := mk(3)
	r.Requested = "something else"
	edited.receipts[0], _ = ledger.Encode(r) // no longer hashes to its signed digest
	removed := seal(t, p.agent, "agent-1", 3, d2, mk(3), mk(4))
	removed.receipts = removed.receipts[1:]
	misnamed := seal(t, p.agent, "agent-1", 3, d2, mk(3))
	misnamed.bundle = signBatch(t, p.agent, "agent-1/9", misnamed.b)
	inlined := seal(t, p.agent, "agent-1", 3, d2)
	inlined.b.Receipts = []*mcpreadyv1.Receipt{mk(3)}
	inlined.bundle = signBatch(t, p.agent, "agent-1/3", inlined.b)
	mk3 := func(k crypto.Signer, agent string, seq uint64, prev string) sealed {
		return seal(t, k, agent, seq, prev, mk(3))
	}
	for _, tc := range []struct {
		name   string
		node   string
		batch  sealed
		reason string
	}{
		{"unknown key", "agent-1", mk3(p.unknown, "agent-1", 3, d2), string(sign.ReasonUnknownKey)},
		{"revoked key", "agent-1", mk3(p.revoked, "agent-1", 3, d2), string(sign.ReasonKeyRevoked)},
		{"key of another agent", "agent-1", mk3(p.other, "agent-1", 3, d2), string(sign.ReasonOutOfScope)},
		{"node uploads another agent's batch", "agent-1", mk3(p.other, "agent-2", 1, ""), ReasonAgentMismatch},
		{"tampered bundle", "agent-1", tampered, "bad-signature|malformed"},
		{"edited receipt", "agent-1", edited, string(ledger.ReasonDigestMismatch)},
		{"removed receipt", "agent-1", removed, string(ledger.ReasonDigestMismatch)},
		{"receipts inlined in the manifest", "agent-1", inlined, string(ledger.ReasonDigestMismatch)},
		{"name does not match", "agent-1", misnamed, string(ledger.ReasonBadName)},
		{"gap", "agent-1", mk3(p.agent, "agent-1", 4, d2), string(ledger.ReasonGap)},
		{"fork: wrong previous digest", "agent-1", mk3(p.agent, "agent-1", 3, d1), string(ledger.ReasonFork)},
		{"fork: other batch at stored sequence", "agent-1", mk3(p.agent, "agent-1", 2, d1), string(ledger.ReasonFork)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := up(tc.node, tc.batch)
			var rej *RejectError
			if !errors.As(err, &rej) {
				t.Fatalf("accepted: %v", err)
			}
			ok := false
			for _, r := range strings.Split(tc.reason, "|") {
				ok = ok || rej.Reason == r
			}
			if !ok {
				t.Fatalf("reason %q (%v), want %s", rej.Reason, err, tc.reason)
			}
		})
	}
	// An exact resend is acknowledged as a duplicate and stored once.
	res, err := cp.svc.Ingest(nil, &mcpreadyv1.UploadBatchesRequest{BatchId: s1.b.BatchId, Sequence: 1, Bundle: s1.bundle, Receipts: s1.receipts})
	if err != nil || !res.Duplicate {
		t.Fatal(res, err)
	}
	if st := cp.store.Stats(); st.Receipts != 2 || st.Batches != 2 {
		t.Fatalf("store %+v", st)
	}
}

func TestRejectionOverStreamKeepsBatchInSpool(t *testing.T) {
	p := newPKI(t)
	cp := startCP(t, t.TempDir(), p, &syncBuf{})
	sp := openSpool(t, t.TempDir(), p.unknown) // key not granted
	defer sp.Close()
	sp.Append(mk(0))
	sp.Flush()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	shipper.Run(ctx, dial(t, cp.addr), sp, shipper.Options{MinBackoff: 10 * time.Millisecond, Logger: quiet})
	if sp.Stats().PendingBatches != 1 || cp.store.Stats().Batches != 0 {
		t.Fatalf("spool %+v store %+v", sp.Stats(), cp.store.Stats())
	}
}

func TestSecretNeverStoredExportedOrLogged(t *testing.T) {
	const secret = "ghp_SECRET_tok_7c1e"
	p := newPKI(t)
	logs := &syncBuf{}
	storeDir, spoolDir := t.TempDir(), t.TempDir()
	cp := startCP(t, storeDir, p, logs)
	sp, _ := spool.Open(spoolDir, spool.Options{AgentID: "agent-1", Signer: p.agent, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	defer sp.Close()
	b := receipt.Builder{EmitterID: "agent-1", Redaction: receipt.Redaction{KeepArguments: []string{"query"}}}
	r := b.Start(time.Now())
	b.Arguments(r, []byte(`{"query":"mcp","api_key":"`+secret+`","headers":{"Authorization":"Bearer `+secret+`"}}`))
	b.Result(r, []byte(`{"content":[{"type":"text","text":"here is `+secret+`"}],"isError":false}`))
	r.ErrorMessage = receipt.SafeError("upstream 401: Authorization: Bearer " + secret)
	r.Selected = &mcpreadyv1.Selection{ServerName: "docs-a", ToolName: "lookup"}
	sp.Append(r)
	sp.Flush()
	ship(t, cp.addr, sp)
	var export bytes.Buffer
	cp.store.Export(context.Background(), time.Time{}, "", func(b *ledger.Batch) error {
		export.Write(b.Bundle)
		for _, r := range b.Receipts {
			export.Write(r)
		}
		return nil
	})
	if export.Len() == 0 {
		t.Fatal("nothing exported")
	}
	if bytes.Contains(export.Bytes(), []byte(secret)) || bytes.Contains(logs.Bytes(), []byte(secret)) {
		t.Fatal("secret in export or logs")
	}
	for _, dir := range []string{storeDir, spoolDir} {
		files, _ := filepath.Glob(filepath.Join(dir, "*"))
		for _, f := range files {
			data, _ := os.ReadFile(f)
			if bytes.Contains(data, []byte(secret)) {
				t.Fatalf("secret in %s", f)
			}
		}
	}
	got, err := cp.store.Get(r.ReceiptId)
	if err != nil || got.Receipt.KeptArguments["query"] != "mcp" {
		t.Fatal(got, err)
	}
}

func TestQueryTailExportRPCs(t *testing.T) {
	p := newPKI(t)
	cp := startCP(t, t.TempDir(), p, &syncBuf{})
	sp := openSpool(t, t.TempDir(), p.agent)
	defer sp.Close()
	for i := 0; i < 12; i++ {
		sp.Append(mk(i))
	}
	ship(t, cp.addr, sp)
	c := mcpreadyv1.NewReceiptsServiceClient(dial(t, cp.addr))
	ctx := context.Background()
	q, err := c.QueryReceipts(ctx, &mcpreadyv1.QueryReceiptsRequest{WorkflowId: "wf-1", Limit: 5})
	if err != nil || len(q.Receipts) != 5 {
		t.Fatal(q, err)
	}
	if _, err := c.QueryReceipts(ctx, &mcpreadyv1.QueryReceiptsRequest{ReceiptId: "nope"}); err == nil {
		t.Fatal("missing receipt found")
	}
	tail, _ := c.TailReceipts(ctx, &mcpreadyv1.TailReceiptsRequest{N: 3})
	n := 0
	for {
		if _, err := tail.Recv(); err != nil {
			break
		}
		n++
	}
	if n != 3 {
		t.Fatalf("tail %d", n)
	}
	ex, _ := c.ExportBatches(ctx, &mcpreadyv1.ExportBatchesRequest{})
	var head ledger.Head
	batches, receipts := 0, 0
	for {
		m, err := ex.Recv()
		if err != nil {
			break
		}
		v, err := sign.VerifyWithKey(m.Bundle, p.agent.Public())
		if err != nil {
			t.Fatal(err)
		}
		rb := v.Object.Spec.(*mcpreadyv1.ReceiptBatch)
		if _, err := ledger.Open(v.Object.Metadata.Name, rb, m.Receipts); err != nil {
			t.Fatal(err)
		}
		if _, err := head.Next(rb, artifact.Digest(m.Bundle), nil); err != nil {
			t.Fatal(err)
		}
		head = ledger.Head{Sequence: m.Sequence, Digest: artifact.Digest(m.Bundle)}
		batches++
		receipts += len(m.Receipts)
	}
	// How many batches the spool cut depends on timing (size 10 or a
	// 20 ms interval); the export must chain all of them and hold every
	// receipt once.
	if batches < 2 || head.Sequence != uint64(batches) || receipts != 12 {
		t.Fatalf("exported %d receipts in %d batches through sequence %d", receipts, batches, head.Sequence)
	}
}
