package main

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/mcpready/mcpready/agent/shipper"
	"github.com/mcpready/mcpready/agent/spool"
	"github.com/mcpready/mcpready/artifact"
	"github.com/mcpready/mcpready/controlplane/ingest"
	"github.com/mcpready/mcpready/controlplane/receiptdb"
	"github.com/mcpready/mcpready/controlplane/receiptstore"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/internal/etcdtest"
	"github.com/mcpready/mcpready/internal/pgtest"
	"github.com/mcpready/mcpready/internal/safebuf"
	"github.com/mcpready/mcpready/ledger"
	"github.com/mcpready/mcpready/ledger/ledgertest"
	"github.com/mcpready/mcpready/sign"
)

// cpProcess is `mcpready controlplane` running as a real process.
type cpProcess struct {
	cmd    *exec.Cmd
	addr   string
	stderr *safebuf.Buffer
	done   chan error
}

func freeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// startCPProcess starts a replica and waits until its Receipts service
// answers; with wait false it returns at once.
func startCPProcess(t *testing.T, bin string, wait bool, args ...string) *cpProcess {
	t.Helper()
	p := &cpProcess{addr: freeAddr(t), stderr: &safebuf.Buffer{}, done: make(chan error, 1)}
	p.cmd = exec.Command(bin, append([]string{"controlplane", "--listen", p.addr, "--metrics-listen", "off"}, args...)...)
	p.cmd.Stderr = p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	t.Cleanup(func() { p.kill() })
	if !wait {
		return p
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		conn, err := net.DialTimeout("tcp", p.addr, time.Second)
		if err == nil {
			conn.Close()
			return p
		}
		select {
		case err := <-p.done:
			t.Fatalf("control plane exited: %v\n%s", err, p.stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("control plane not listening; stderr:\n%s", p.stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// kill is kill -9.
func (p *cpProcess) kill() {
	if p.cmd.ProcessState == nil {
		p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.done
		p.done <- nil
	}
}

func dialCP(t *testing.T, addr string) mcpreadyv1.ReceiptsServiceClient {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return mcpreadyv1.NewReceiptsServiceClient(conn)
}

// pendingBatches is every batch sp has not had acknowledged.
func pendingBatches(t *testing.T, sp *spool.Spool) []ledger.Batch {
	t.Helper()
	bs, err := sp.Pending(0, 0)
	if err != nil {
		t.Fatal(err)
	}
	return bs
}

// shipAll runs the real shipper against addr until the spool is empty.
func shipAll(t *testing.T, addr string, sp *spool.Spool) {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- shipper.Run(ctx, conn, sp, shipper.Options{Node: &mcpreadyv1.Node{Id: "agent-1"}, MinBackoff: 20 * time.Millisecond})
	}()
	deadline := time.Now().Add(60 * time.Second)
	for sp.Stats().Depth > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("spool not drained: %+v", sp.Stats())
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-done
}

// allRequested pages through every receipt via one replica.
func allRequested(t *testing.T, c mcpreadyv1.ReceiptsServiceClient) map[string]int {
	t.Helper()
	seen := map[string]int{}
	req := &mcpreadyv1.QueryReceiptsRequest{AgentId: "agent-1", Limit: 100}
	for {
		resp, err := c.QueryReceipts(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range resp.GetReceipts() {
			seen[r.GetReceipt().GetRequested()]++
		}
		if resp.GetNextPageToken() == "" {
			return seen
		}
		req.PageToken = resp.GetNextPageToken()
	}
}

// TestReceiptDatabaseReplicasKill9: two control-plane processes on one
// etcd and one PostgreSQL. Replica A is killed with SIGKILL while batches
// it has committed are still unacknowledged; the agent resends them to B
// (duplicates there, not stored again), then moves back to a restarted
// A; the database goes away mid-run (batches refused with
// receipt-database-unavailable and kept in the spool) and comes back.
// Every receipt is stored exactly once and a query through either replica
// sees all of them; a replica refuses to start without its database.
func TestReceiptDatabaseReplicasKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	pg := pgtest.Start(t)
	_, etcd := etcdtest.Etcd(t)
	bin := buildBinary(t)
	dir := t.TempDir()
	agentKey, err := sign.WriteKeyPair(filepath.Join(dir, "agent"), sign.AlgorithmECDSAP256, []byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	rootKey, err := sign.WriteKeyPair(filepath.Join(dir, "root"), sign.AlgorithmECDSAP256, []byte("pw"))
	if err != nil {
		t.Fatal(err)
	}
	id, _ := sign.KeyID(agentKey.Public())
	tp := &mcpreadyv1.TrustPolicy{Keys: []*mcpreadyv1.KeyGrant{{KeyId: id, PublicKey: string(mustRead(t, filepath.Join(dir, "agent.pub"))), Name: "agent-1", Kinds: []string{"ReceiptBatch"}, Scopes: []string{"agent-1/*"}}}}
	tpBundle, _, err := sign.Sign(artifact.New(artifact.KindTrustPolicy, "example/trust", tp), rootKey)
	if err != nil {
		t.Fatal(err)
	}
	trustFile := writeFile(t, dir, "trust.bundle.json", tpBundle)
	replica := func(name string, wait bool) *cpProcess {
		return startCPProcess(t, bin, wait, "--data", filepath.Join(dir, name), "--root", filepath.Join(dir, "root.pub"),
			"--etcd-endpoints", etcd.ClientURL, "--receipts-store", pg.DSN)
	}
	a := replica("a", true)
	if out, err := exec.Command(bin, "apply", "-f", trustFile, "--server", a.addr).CombinedOutput(); err != nil {
		t.Fatalf("apply trust: %v\n%s", err, out)
	}
	b := replica("b", true)

	sp, err := spool.Open(filepath.Join(dir, "spool"), spool.Options{AgentID: "agent-1", Signer: agentKey, BatchSize: 2, BatchInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Close()
	n := 0
	add := func(k int) {
		for range k {
			r := ledgertest.Receipt("agent-1", time.Now())
			r.Requested = fmt.Sprintf("call#%d", n)
			if err := sp.Append(r); err != nil {
				t.Fatal(err)
			}
			n++
		}
		if err := sp.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	add(400)

	// Stream every batch to A, read only 20 acknowledgements, give A time
	// to commit more, then kill -9 it.
	db, err := receiptdb.Open(context.Background(), pg.DSN, receiptdb.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx, cancel := context.WithCancel(context.Background())
	stream, err := dialCP(t, a.addr).UploadBatches(ctx)
	if err != nil {
		t.Fatal(err)
	}
	pending := pendingBatches(t, sp)
	go func() {
		for i, bt := range pending {
			req := bt.UploadRequest()
			if i == 0 {
				req.Node = &mcpreadyv1.Node{Id: "agent-1"}
			}
			if stream.Send(req) != nil {
				return
			}
		}
	}()
	var acked uint64
	for range 20 {
		resp, err := stream.Recv()
		if err != nil || !resp.GetAccepted() {
			t.Fatalf("ack: %v %v", resp, err)
		}
		acked = resp.GetSequence()
	}
	var committed uint64
	for deadline := time.Now().Add(10 * time.Second); committed < acked+20 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		h, err := db.Get(context.Background(), "agent-1")
		if err != nil {
			t.Fatal(err)
		}
		committed = h.Sequence
	}
	a.kill()
	cancel()
	if err := sp.Ack(acked); err != nil {
		t.Fatal(err)
	}
	h, _ := db.Get(context.Background(), "agent-1")
	if h.Sequence <= acked {
		t.Fatalf("no batch committed beyond the acknowledged %d (head %d): the kill did not land between commit and ack", acked, h.Sequence)
	}
	t.Logf("killed A with batches %d..%d committed but unacknowledged", acked+1, h.Sequence)

	// The agent resends everything unacknowledged to B.
	shipAll(t, b.addr, sp)

	// The database goes away: B refuses with the specific reason, the
	// batches stay in the spool.
	add(20)
	if err := pg.Kill(); err != nil {
		t.Fatal(err)
	}
	bs, err := dialCP(t, b.addr).UploadBatches(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	first := pendingBatches(t, sp)[0].UploadRequest()
	first.Node = &mcpreadyv1.Node{Id: "agent-1"}
	if err := bs.Send(first); err != nil {
		t.Fatal(err)
	}
	resp, err := bs.Recv()
	if err != nil || resp.GetAccepted() || !strings.HasPrefix(resp.GetError(), ingest.ReasonDatabaseUnavailable+":") {
		t.Fatalf("upload with the database down: %v %v", resp, err)
	}
	bs.CloseSend()
	if d := sp.Stats().Depth; d != 20 {
		t.Fatalf("spool depth %d with the database down, want its 20 receipts", d)
	}
	// A replica does not start without its database.
	down := replica("c", false)
	select {
	case err := <-down.done:
		down.done <- err
		if err == nil || !strings.Contains(down.stderr.String(), "receipt database unavailable") {
			t.Fatalf("start with the database down: %v\n%s", err, down.stderr.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatal("control plane started without its database")
	}
	if err := pg.Restart(); err != nil {
		t.Fatal(err)
	}

	// The agent moves back to a restarted A mid-chain.
	a = replica("a", true)
	add(30)
	shipAll(t, a.addr, sp)

	// The export through either replica is the whole chain exactly as
	// signed: the offline verifier accepts it unchanged.
	for _, r := range []*cpProcess{a, b} {
		file := filepath.Join(dir, "export-"+r.addr+".jsonl")
		if out, err := exec.Command(bin, "receipts", "export", "--server", r.addr, "--output-file", file).CombinedOutput(); err != nil {
			t.Fatalf("export: %v\n%s", err, out)
		}
		if out, err := exec.Command(bin, "receipts", "verify", file, "--key", filepath.Join(dir, "agent.pub")).CombinedOutput(); err != nil || !strings.Contains(string(out), "verified") {
			t.Fatalf("verify the export of %s: %v\n%s", r.addr, err, out)
		}
	}
	for name, c := range map[string]mcpreadyv1.ReceiptsServiceClient{"A": dialCP(t, a.addr), "B": dialCP(t, b.addr)} {
		seen := allRequested(t, c)
		if len(seen) != n {
			t.Fatalf("replica %s sees %d distinct receipts, want %d", name, len(seen), n)
		}
		for k, c := range seen {
			if c != 1 {
				t.Fatalf("replica %s: %s stored %d times", name, k, c)
			}
		}
	}
}

// TestUpWithReceiptDatabase: `mcpready up --receipts-store` keeps the
// demo's receipts in the database: a call through the agent is stored
// there (not in segments) and `receipts tail` shows it.
func TestUpWithReceiptDatabase(t *testing.T) {
	if testing.Short() {
		t.Skip("starts mcpready up as a real process")
	}
	pg := pgtest.Start(t)
	bin := buildBinary(t)
	p := startUp(t, bin, t.TempDir(), "--receipts-store", pg.DSN)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: p.agentURL}, nil)
	if err != nil {
		t.Fatalf("connect: %v; stderr:\n%s", err, p.stderr.String())
	}
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "docs_lookup", Arguments: map[string]any{"query": "receipts"}}); err != nil || res.IsError {
		t.Fatalf("docs_lookup: %v %+v", err, res)
	}
	cs.Close()
	db, err := receiptdb.Open(ctx, pg.DSN, receiptdb.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		rs, _, err := db.Query(ctx, receiptstore.Query{Limit: 100})
		if err == nil && slices.ContainsFunc(rs, func(r *mcpreadyv1.StoredReceipt) bool { return r.GetReceipt().GetRequested() == "docs_lookup" }) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the docs_lookup receipt never reached the database (%d receipts, %v); stderr:\n%s", len(rs), err, p.stderr.String())
		}
	}
	out, err := exec.Command(bin, "receipts", "tail", "-n", "20", "--server", p.server).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "docs_lookup") {
		t.Fatalf("receipts tail: %v\n%s", err, out)
	}
	p.stop(t)
}
