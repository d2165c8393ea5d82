package shipper

import (
	"context"
	"crypto"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/mcpready/mcpready/agent/receipt"
	"github.com/mcpready/mcpready/agent/spool"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/sign"
)

// slowServer acknowledges each batch after a delay and records how many
// were outstanding at most; it drops the stream once after dropAfter
// batches.
type slowServer struct {
	mcpreadyv1.UnimplementedReceiptsServiceServer
	mu          sync.Mutex
	maxInFlight int
	seen        map[uint64]int
	dropAfter   int
	dropped     bool
	node        string
}

func (s *slowServer) UploadBatches(stream mcpreadyv1.ReceiptsService_UploadBatchesServer) error {
	reqs := make(chan *mcpreadyv1.UploadBatchesRequest, 100)
	var inFlight int
	var mu sync.Mutex
	go func() {
		defer close(reqs)
		for {
			req, err := stream.Recv()
			if err != nil {
				return
			}
			mu.Lock()
			inFlight++
			s.mu.Lock()
			s.maxInFlight = max(s.maxInFlight, inFlight)
			if req.GetNode() != nil {
				s.node = req.GetNode().GetId()
			}
			s.mu.Unlock()
			mu.Unlock()
			reqs <- req
		}
	}()
	n := 0
	for req := range reqs {
		time.Sleep(2 * time.Millisecond)
		s.mu.Lock()
		s.seen[req.GetSequence()]++
		drop := !s.dropped && n == s.dropAfter
		if drop {
			s.dropped = true
		}
		s.mu.Unlock()
		if drop {
			return io.ErrUnexpectedEOF // stored, but the ack is lost
		}
		mu.Lock()
		inFlight--
		mu.Unlock()
		n++
		if err := stream.Send(&mcpreadyv1.UploadBatchesResponse{BatchId: req.GetBatchId(), Sequence: req.GetSequence(), Accepted: true}); err != nil {
			return err
		}
	}
	return nil
}

func TestWindowAckAndResendAfterDrop(t *testing.T) {
	key, _ := sign.GenerateKey(sign.AlgorithmEd25519)
	sp := openSpool(t, key)
	appendReceipts(t, sp, 60)
	sp.Flush() // 20 batches of 3
	srv := &slowServer{seen: map[uint64]int{}, dropAfter: 5}
	lis, _ := net.Listen("tcp", "127.0.0.1:0")
	gs := grpc.NewServer()
	mcpreadyv1.RegisterReceiptsServiceServer(gs, srv)
	go gs.Serve(lis)
	defer gs.Stop()
	conn, _ := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	defer conn.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		done <- Run(ctx, conn, sp, Options{Node: &mcpreadyv1.Node{Id: "agent-1"}, Window: 4, MinBackoff: time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	}()
	deadline := time.Now().Add(10 * time.Second)
	for sp.Stats().Depth > 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != context.Canceled {
		t.Fatalf("Run returned %v", err)
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if sp.Stats().Depth != 0 {
		t.Fatalf("spool not drained: %+v", sp.Stats())
	}
	if srv.maxInFlight > 4 {
		t.Fatalf("%d batches in flight, window is 4", srv.maxInFlight)
	}
	if srv.node != "agent-1" {
		t.Fatalf("node %q", srv.node)
	}
	for seq := uint64(1); seq <= 20; seq++ {
		if srv.seen[seq] == 0 {
			t.Fatalf("batch %d never sent", seq)
		}
	}
	if srv.seen[6] < 2 {
		t.Fatalf("batch 6 (ack lost) was not resent: %v", srv.seen)
	}
}

func openSpool(t *testing.T, key crypto.Signer) *spool.Spool {
	sp, err := spool.Open(t.TempDir(), spool.Options{AgentID: "agent-1", Signer: key, BatchSize: 3, BatchInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sp.Close() })
	return sp
}

// limitedServer refuses its first refusals batches as the control plane
// refuses an agent over its upload bound, then acknowledges every batch.
type limitedServer struct {
	mcpreadyv1.UnimplementedReceiptsServiceServer
	mu         sync.Mutex
	refusals   int
	retryAfter time.Duration // sent with each refusal when set
	seen       []uint64
	at         []time.Time // when each of seen arrived
	acked      uint64
	misorders  int
}

func (s *limitedServer) UploadBatches(stream mcpreadyv1.ReceiptsService_UploadBatchesServer) error {
	for {
		req, err := stream.Recv()
		if err != nil {
			return nil
		}
		s.mu.Lock()
		s.seen, s.at = append(s.seen, req.GetSequence()), append(s.at, time.Now())
		resp := &mcpreadyv1.UploadBatchesResponse{BatchId: req.GetBatchId(), Sequence: req.GetSequence(), Accepted: true}
		switch {
		case req.GetSequence() != s.acked+1:
			resp.Accepted, resp.Error = false, "gap: not the next batch"
			s.misorders++
		case s.refusals > 0:
			s.refusals--
			resp.Accepted, resp.Error = false, `agent-rate-limited: agent "agent-1" exceeded the upload bound of 5000 receipts/s (burst 300000): batch of 3 receipts refused unverified and not stored; keep it and retry in 1.2s`
			if s.retryAfter > 0 {
				resp.RetryAfter = durationpb.New(s.retryAfter)
			}
		default:
			s.acked++
		}
		s.mu.Unlock()
		if err := stream.Send(resp); err != nil {
			return err
		}
	}
}

// TestRateLimitedBatchesKeptAndResent: a batch refused as agent-rate-limited
// stays in the spool and is resent (after backoff) until accepted; nothing
// is dropped or skipped.
func TestRateLimitedBatchesKeptAndResent(t *testing.T) {
	key, _ := sign.GenerateKey(sign.AlgorithmEd25519)
	sp := openSpool(t, key)
	appendReceipts(t, sp, 30)
	sp.Flush() // 10 batches of 3
	srv := &limitedServer{refusals: 3}
	shipTo(t, srv, sp)
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if sp.Stats().Depth != 0 || srv.acked != 10 {
		t.Fatalf("spool %+v, %d of 10 batches acknowledged", sp.Stats(), srv.acked)
	}
	if srv.misorders != 0 || srv.seen[0] != 1 || srv.seen[3] != 1 {
		t.Fatalf("refused batch not resent first (or a batch skipped): %v", srv.seen)
	}
}

// A refusal's retry_after is honoured: the shipper sends the refused batch
// again no sooner, whatever its own backoff (which restarts short after a
// session that got batches accepted). Before, it reconnected at its own
// pace, a few times a second, while the control plane kept refusing.
func TestRefusalRetryAfterHonoured(t *testing.T) {
	key, _ := sign.GenerateKey(sign.AlgorithmEd25519)
	sp := openSpool(t, key)
	appendReceipts(t, sp, 6)
	sp.Flush() // 2 batches of 3
	const wait = 300 * time.Millisecond
	srv := &limitedServer{refusals: 1, retryAfter: wait}
	shipTo(t, srv, sp)
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if sp.Stats().Depth != 0 || len(srv.seen) < 2 || srv.seen[0] != 1 || srv.seen[1] != 1 {
		t.Fatalf("spool %+v, batches seen %v", sp.Stats(), srv.seen)
	}
	if d := srv.at[1].Sub(srv.at[0]); d < wait {
		t.Fatalf("the refused batch was sent again after %s, before the %s the control plane asked for", d, wait)
	}
}

// shipTo runs the shipper (one batch in flight, 1 ms minimum backoff)
// against srv on a loopback gRPC server until sp is empty or 10 s pass.
func shipTo(t *testing.T, srv mcpreadyv1.ReceiptsServiceServer, sp *spool.Spool) {
	t.Helper()
	lis, _ := net.Listen("tcp", "127.0.0.1:0")
	gs := grpc.NewServer()
	mcpreadyv1.RegisterReceiptsServiceServer(gs, srv)
	go gs.Serve(lis)
	defer gs.Stop()
	conn, _ := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	defer conn.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		done <- Run(ctx, conn, sp, Options{Node: &mcpreadyv1.Node{Id: "agent-1"}, Window: 1, MinBackoff: time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	}()
	deadline := time.Now().Add(10 * time.Second)
	for sp.Stats().Depth > 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	<-done
}

// appendReceipts appends n receipts to sp, Requested "0" to n-1.
func appendReceipts(t *testing.T, sp *spool.Spool, n int) {
	t.Helper()
	for i := range n {
		r := receipt.Builder{EmitterID: "agent-1"}.Start(time.Now())
		r.Requested = fmt.Sprint(i)
		if err := sp.Append(r); err != nil {
			t.Fatal(err)
		}
	}
}
