// Package ingest implements the control plane's ReceiptsService: it takes
// signed receipt batches from agents, verifies each manifest against the
// current TrustPolicy (signature, key granted kind ReceiptBatch for the
// name "<agent>/<sequence>", not revoked or expired), checks that every
// receipt sent beside it hashes to its signed digest and that the batch
// continues the agent's hash chain (gap, fork, replay), stores the batch
// durably in the receipt store and only then acknowledges it. Resends are
// acknowledged again with duplicate=true and stored once.
//
// It also answers receipt queries, tails and exports from the store. It
// does not compute evidence itself; accepted receipts are handed to an
// Observer (package aggregate).
package ingest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/mcpready/mcpready/agent/receipt"
	"github.com/mcpready/mcpready/artifact"
	"github.com/mcpready/mcpready/controlplane/receiptstore"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/sign"
)

// Observer receives the receipts of every newly stored batch, in chain
// order per agent, as summaries (only receipt.SummaryFields are set). It
// must be fast (it runs on the ingest path).
type Observer interface {
	Observe(agentID string, receipts []*mcpreadyv1.Receipt, digests []string)
}

// Options configures the service.
type Options struct {
	// Store is the receipt store; required.
	Store *receiptstore.Store
	// Trust returns the current verified TrustPolicy (nil rejects every
	// batch); required. It is called per batch so policy updates apply.
	Trust func() *sign.Trust
	// Observer, if set, sees every newly stored batch's receipts.
	Observer Observer
	// Registry receives metrics; nil registers none.
	Registry prometheus.Registerer
	// Logger; default slog.Default(). Receipts are never logged.
	Logger *slog.Logger
	// Now; default time.Now.
	Now func() time.Time
}

// Reasons a batch is rejected besides sign.Reason and receipt.ChainReason.
const (
	ReasonNoTrust       = "no-trust-policy"
	ReasonWrongKind     = "wrong-kind"
	ReasonMismatch      = "request-mismatch"
	ReasonStore         = "store-failed"
	ReasonAgentMismatch = "agent-mismatch"
)

// RejectError is a rejected batch with a precise reason.
type RejectError struct {
	Reason string
	Detail string
}

func (e *RejectError) Error() string { return e.Reason + ": " + e.Detail }

// Service is the ReceiptsService server.
type Service struct {
	mcpreadyv1.UnimplementedReceiptsServiceServer
	opts Options
	log  *slog.Logger
	m    *metrics

	agentMu sync.Mutex
	agents  map[string]*sync.Mutex
}

// New returns the service.
func New(opts Options) (*Service, error) {
	if opts.Store == nil || opts.Trust == nil {
		return nil, errors.New("ingest: Store and Trust are required")
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Service{opts: opts, log: opts.Logger.With("component", "ingest"), m: newMetrics(opts.Registry), agents: map[string]*sync.Mutex{}}, nil
}

func (s *Service) agentLock(id string) *sync.Mutex {
	s.agentMu.Lock()
	defer s.agentMu.Unlock()
	m := s.agents[id]
	if m == nil {
		m = &sync.Mutex{}
		s.agents[id] = m
	}
	return m
}

// Result is the outcome of one batch.
type Result struct {
	Duplicate bool
	Receipts  int
}

// Ingest verifies, chain-checks and durably stores one signed batch from
// node (nil: unknown node). It returns *RejectError for a batch that must
// not be stored.
func (s *Service) Ingest(node *mcpreadyv1.Node, req *mcpreadyv1.UploadBatchesRequest) (Result, error) {
	res, err := s.ingest(node, req)
	var rej *RejectError
	switch {
	case err == nil && res.Duplicate:
		s.m.batches.WithLabelValues("duplicate").Inc()
	case err == nil:
		s.m.batches.WithLabelValues("accepted").Inc()
		s.m.receipts.Add(float64(res.Receipts))
	case errors.As(err, &rej):
		s.m.batches.WithLabelValues(rej.Reason).Inc()
		s.log.Warn("receipt batch rejected", "node", node.GetId(), "batch", req.GetBatchId(), "sequence", req.GetSequence(), "reason", rej.Reason, "detail", rej.Detail)
	}
	return res, err
}

func (s *Service) ingest(node *mcpreadyv1.Node, req *mcpreadyv1.UploadBatchesRequest) (Result, error) {
	digest := artifact.Digest(req.GetBundle())
	// A resend of bytes already stored needs no second verification.
	if req.GetBatchId() != "" {
		if dup, err := s.opts.Store.Stored(req.GetBatchId(), digest); err != nil {
			return Result{}, &RejectError{ReasonStore, err.Error()}
		} else if dup {
			return Result{Duplicate: true}, nil
		}
	}
	trust := s.opts.Trust()
	if trust == nil {
		return Result{}, &RejectError{ReasonNoTrust, "the control plane has no verified trust policy"}
	}
	v, err := trust.Verify(req.GetBundle(), s.opts.Now())
	if err != nil {
		return Result{}, &RejectError{string(sign.ReasonOf(err)), err.Error()}
	}
	b, ok := v.Object.Spec.(*mcpreadyv1.ReceiptBatch)
	if v.Object.Kind != artifact.KindReceiptBatch || !ok {
		return Result{}, &RejectError{ReasonWrongKind, fmt.Sprintf("bundle holds a %s, want %s", v.Object.Kind, artifact.KindReceiptBatch)}
	}
	if (req.GetBatchId() != "" && req.GetBatchId() != b.BatchId) || (req.GetSequence() != 0 && req.GetSequence() != b.Sequence) {
		return Result{}, &RejectError{ReasonMismatch, fmt.Sprintf("request names batch %s/%d, bundle holds %s/%d", req.GetBatchId(), req.GetSequence(), b.BatchId, b.Sequence)}
	}
	if node.GetId() != "" && node.GetId() != b.AgentId {
		return Result{}, &RejectError{ReasonAgentMismatch, fmt.Sprintf("node %q uploaded a batch of agent %q", node.GetId(), b.AgentId)}
	}
	receipts, err := receipt.OpenSummary(v.Object.Metadata.Name, b, req.GetReceipts())
	if err != nil {
		return Result{}, chainReject(err)
	}
	mu := s.agentLock(b.AgentId)
	mu.Lock()
	defer mu.Unlock()
	dup, err := s.opts.Store.Head(b.AgentId).Next(b, digest, func(seq uint64) (string, bool) { return s.opts.Store.BatchDigest(b.AgentId, seq) })
	if err != nil {
		return Result{}, chainReject(err)
	}
	if dup {
		return Result{Duplicate: true}, nil
	}
	ar, err := s.opts.Store.Append(&receiptstore.Batch{AgentID: b.AgentId, Sequence: b.Sequence, BatchID: b.BatchId, Digest: digest,
		Bundle: req.GetBundle(), Receipts: req.GetReceipts(), Received: s.opts.Now(), Decoded: receipts, Digests: b.ReceiptDigests})
	if err != nil {
		return Result{}, &RejectError{ReasonStore, err.Error()}
	}
	if ar.Duplicate {
		return Result{Duplicate: true}, nil
	}
	if ar.DuplicateReceipts > 0 {
		s.log.Warn("batch repeats receipt ids already stored", "agent", b.AgentId, "batch", b.BatchId, "count", ar.DuplicateReceipts)
	}
	if s.opts.Observer != nil {
		s.opts.Observer.Observe(b.AgentId, receipts, b.ReceiptDigests)
	}
	return Result{Receipts: len(receipts)}, nil
}

func chainReject(err error) error {
	var ce *receipt.ChainError
	if errors.As(err, &ce) {
		return &RejectError{string(ce.Reason), ce.Error()}
	}
	return &RejectError{"invalid", err.Error()}
}

// UploadBatches takes a stream of signed batches and answers each, in
// order, after it is durably stored (or rejected). The agent bounds how
// many it sends ahead; gRPC flow control does the rest.
func (s *Service) UploadBatches(stream mcpreadyv1.ReceiptsService_UploadBatchesServer) error {
	var node *mcpreadyv1.Node
	for {
		req, err := stream.Recv()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		if node == nil && req.GetNode() != nil {
			node = req.GetNode()
		}
		res, err := s.Ingest(node, req)
		resp := &mcpreadyv1.UploadBatchesResponse{BatchId: req.GetBatchId(), Sequence: req.GetSequence(), Accepted: err == nil, Duplicate: res.Duplicate}
		if err != nil {
			resp.Error = err.Error()
		}
		if err := stream.Send(resp); err != nil {
			return err
		}
	}
}

func toQuery(r *mcpreadyv1.QueryReceiptsRequest) receiptstore.Query {
	q := receiptstore.Query{ReceiptID: r.GetReceiptId(), WorkflowID: r.GetWorkflowId(), ServerName: r.GetServerName(), ToolName: r.GetToolName(),
		AgentID: r.GetAgentId(), Limit: int(r.GetLimit())}
	if r.GetSince() != nil {
		q.Since = r.GetSince().AsTime()
	}
	if r.GetUntil() != nil {
		q.Until = r.GetUntil().AsTime()
	}
	return q
}

// QueryReceipts finds receipts by id, workflow, subject, agent and time.
func (s *Service) QueryReceipts(_ context.Context, r *mcpreadyv1.QueryReceiptsRequest) (*mcpreadyv1.QueryReceiptsResponse, error) {
	if r.GetLimit() < 0 {
		return nil, status.Error(codes.InvalidArgument, "limit must not be negative")
	}
	rs, err := s.opts.Store.Query(toQuery(r))
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	if r.GetReceiptId() != "" && len(rs) == 0 {
		return nil, status.Errorf(codes.NotFound, "receipt %s not found", r.GetReceiptId())
	}
	return &mcpreadyv1.QueryReceiptsResponse{Receipts: rs}, nil
}

// TailReceipts streams the last n receipts (default 10) and, with follow,
// new ones until the client goes away.
func (s *Service) TailReceipts(r *mcpreadyv1.TailReceiptsRequest, stream mcpreadyv1.ReceiptsService_TailReceiptsServer) error {
	n := int(r.GetN())
	if n < 0 {
		return status.Error(codes.InvalidArgument, "n must not be negative")
	}
	if n == 0 {
		n = 10
	}
	err := s.opts.Store.Tail(stream.Context(), n, r.GetFollow(), func(sr *mcpreadyv1.StoredReceipt) error {
		return stream.Send(&mcpreadyv1.TailReceiptsResponse{Receipt: sr})
	})
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return nil
	}
	return err
}

// ExportBatches streams stored batches exactly as signed.
func (s *Service) ExportBatches(r *mcpreadyv1.ExportBatchesRequest, stream mcpreadyv1.ReceiptsService_ExportBatchesServer) error {
	var since time.Time
	if r.GetSince() != nil {
		since = r.GetSince().AsTime()
	}
	return s.opts.Store.Export(since, r.GetAgentId(), func(b *receiptstore.Batch) error {
		return stream.Send(&mcpreadyv1.ExportBatchesResponse{BatchId: b.BatchID, AgentId: b.AgentID, Sequence: b.Sequence, Bundle: b.Bundle, Receipts: b.Receipts})
	})
}

type metrics struct {
	batches  *prometheus.CounterVec
	receipts prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		batches: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "mcpready", Subsystem: "ingest", Name: "batches_total",
			Help: "Receipt batches by result: accepted, duplicate or the rejection reason."}, []string{"result"}),
		receipts: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "mcpready", Subsystem: "ingest", Name: "receipts_stored_total",
			Help: "Receipts durably stored."}),
	}
	if reg != nil {
		reg.MustRegister(m.batches, m.receipts)
	}
	return m
}
