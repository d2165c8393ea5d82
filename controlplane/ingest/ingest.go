// Package ingest implements the control plane's ReceiptsService: it takes
// signed receipt batches from agents, verifies each manifest against the
// current TrustPolicy (signature, key granted kind ReceiptBatch for the
// name "<agent>/<sequence>", not revoked or expired), checks that every
// receipt sent beside it hashes to its signed digest and that the batch
// continues the agent's hash chain (gap, fork, replay), stores the batch
// durably in the receipt store and only then acknowledges it. Resends are
// acknowledged again with duplicate=true and stored once.
//
// # Shared chain heads
//
// With Options.Heads (package chainhead, in etcd) the chain check uses the
// shared head, so an agent whose connection moves to another replica
// continues its chain there. Per batch, under a per-agent mutex: verify
// the signature and receipts; check the batch against the shared head
// (an exact resend of an accepted batch is a duplicate, another batch at
// an accepted sequence a fork, anything else that is not head+1 a gap);
// store it durably in this replica's receipt store; advance the shared
// head with a compare-and-swap transaction; only then acknowledge and hand
// it to the Observer. The head never moves for a batch that no replica
// has stored durably, so an acknowledged batch is never lost.
//
// Failure cases, all safe because the head only moves by the CAS:
//   - Crash (or etcd failure) between the local store and the CAS: the
//     batch is on this replica's disk but not in the chain and was not
//     acknowledged. The agent resends it; against the unchanged head it is
//     the next batch again, on any replica: this one finds it already
//     stored (nothing written twice) and only advances the head, another
//     one stores its own copy and advances. It is never refused.
//   - Crash between the CAS and the ack: the resend is an exact resend of
//     an accepted batch, a duplicate on every replica.
//   - Lost race (the CAS finds the head moved): the batch is checked again
//     against the head the CAS returned. The same batch accepted by the
//     other replica makes this a duplicate; a different one a fork, which
//     is refused. A refused batch stays on this replica's disk (queries of
//     this replica see it) but is not in the chain, not acknowledged and
//     not observed. There is never more than one head.
//   - etcd unavailable: the batch is refused (the agent keeps it) before
//     it is stored, or, if etcd fails at the CAS, after it is stored as in
//     the first case.
//
// Each replica remembers the head it last read or wrote per agent, so a
// batch normally costs one etcd round trip (the CAS); a batch that the
// remembered head refuses is checked again against a fresh read before it
// is refused. An agent with no shared head yet starts from this replica's
// local head, so chains begun before heads were shared continue where they
// are.
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
	"github.com/mcpready/mcpready/controlplane/chainhead"
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

// Heads is the chain state shared by every replica; *chainhead.Store
// implements it (see that package for the meaning of each method).
type Heads interface {
	Get(ctx context.Context, agentID string) (chainhead.State, error)
	BatchDigest(ctx context.Context, agentID string, seq uint64) (string, bool, error)
	Advance(ctx context.Context, agentID string, base chainhead.State, next receipt.Head) (chainhead.State, error)
}

// Options configures the service.
type Options struct {
	// Heads, if set, holds the agents' chain heads shared by all replicas
	// (package chainhead); nil checks chains against this replica's store
	// only, which is right for a single replica.
	Heads Heads
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
	// ReasonChainUnavailable: the shared chain head could not be read or
	// advanced; the batch was not acknowledged and is resent later.
	ReasonChainUnavailable = "chain-unavailable"
)

// casAttempts bounds how often a lost head race is re-checked. A lost race
// moves the head past the batch, so one re-check normally decides it.
const casAttempts = 3

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
	agents  map[string]*agentState

	// afterStore, if set (tests), runs between the local store and the
	// head CAS; an error stands for a crash there.
	afterStore func(b *mcpreadyv1.ReceiptBatch) error
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
	return &Service{opts: opts, log: opts.Logger.With("component", "ingest"), m: newMetrics(opts.Registry), agents: map[string]*agentState{}}, nil
}

// agentState serialises one agent's batches on this replica and, with
// shared heads, remembers the head this replica last read or wrote. That
// head is only a hint saving a read per batch: the CAS compares it, and a
// batch it refuses is checked again against a fresh read.
type agentState struct {
	mu    sync.Mutex
	head  chainhead.State
	known bool
}

func (s *Service) agent(id string) *agentState {
	s.agentMu.Lock()
	defer s.agentMu.Unlock()
	a := s.agents[id]
	if a == nil {
		a = &agentState{}
		s.agents[id] = a
	}
	return a
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
	// A resend of bytes already stored needs no second verification (with
	// shared heads it may still have to advance the head: see the package doc).
	if req.GetBatchId() != "" && s.opts.Heads == nil {
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
	a := s.agent(b.AgentId)
	a.mu.Lock()
	defer a.mu.Unlock()
	if s.opts.Heads != nil {
		return s.ingestShared(a, b, digest, req, receipts)
	}
	dup, err := s.opts.Store.Head(b.AgentId).Next(b, digest, func(seq uint64) (string, bool) { return s.opts.Store.BatchDigest(b.AgentId, seq) })
	if err != nil {
		return Result{}, chainReject(err)
	}
	if dup {
		return Result{Duplicate: true}, nil
	}
	ar, err := s.store(b, digest, req, receipts)
	if err != nil {
		return Result{}, err
	}
	if ar.Duplicate {
		return Result{Duplicate: true}, nil
	}
	s.observe(b, receipts)
	return Result{Receipts: len(receipts)}, nil
}

// store appends the batch to the local receipt store (fsync'd).
func (s *Service) store(b *mcpreadyv1.ReceiptBatch, digest string, req *mcpreadyv1.UploadBatchesRequest, receipts []*mcpreadyv1.Receipt) (receiptstore.AppendResult, error) {
	ar, err := s.opts.Store.Append(&receiptstore.Batch{AgentID: b.AgentId, Sequence: b.Sequence, BatchID: b.BatchId, Digest: digest,
		Bundle: req.GetBundle(), Receipts: req.GetReceipts(), Received: s.opts.Now(), Decoded: receipts, Digests: b.ReceiptDigests})
	if err != nil {
		return ar, &RejectError{ReasonStore, err.Error()}
	}
	if ar.DuplicateReceipts > 0 {
		s.log.Warn("batch repeats receipt ids already stored", "agent", b.AgentId, "batch", b.BatchId, "count", ar.DuplicateReceipts)
	}
	return ar, nil
}

func (s *Service) observe(b *mcpreadyv1.ReceiptBatch, receipts []*mcpreadyv1.Receipt) {
	if s.opts.Observer != nil {
		s.opts.Observer.Observe(b.AgentId, receipts, b.ReceiptDigests)
	}
}

// ingestShared checks b against the shared head, stores it locally and
// advances the head (see the package doc). The caller holds a.mu.
func (s *Service) ingestShared(a *agentState, b *mcpreadyv1.ReceiptBatch, digest string, req *mcpreadyv1.UploadBatchesRequest, receipts []*mcpreadyv1.Receipt) (Result, error) {
	ctx := context.Background() // each Heads call is bounded by its own timeout
	cur, hint := a.head, a.known
	a.known = false // until the head is read or written again
	if !hint {
		var err error
		if cur, err = s.readHead(ctx, b.AgentId); err != nil {
			return Result{}, err
		}
	}
	dup, err := s.checkShared(ctx, cur, b, digest)
	if err != nil && hint {
		// The remembered head may be stale (another replica served the
		// agent meanwhile): decide on the current one.
		if cur, err = s.readHead(ctx, b.AgentId); err != nil {
			return Result{}, err
		}
		dup, err = s.checkShared(ctx, cur, b, digest)
	}
	a.head, a.known = cur, err == nil
	if err != nil || dup {
		return Result{Duplicate: dup}, err
	}
	if _, err := s.store(b, digest, req, receipts); err != nil {
		return Result{}, err
	}
	if s.afterStore != nil {
		if err := s.afterStore(b); err != nil {
			return Result{}, &RejectError{ReasonChainUnavailable, err.Error()}
		}
	}
	next := receipt.Head{Sequence: b.Sequence, Digest: digest}
	for attempt := 1; ; attempt++ {
		now, err := s.opts.Heads.Advance(ctx, b.AgentId, cur, next)
		if err == nil {
			a.head, a.known = now, true
			break
		}
		if !errors.Is(err, chainhead.ErrConflict) || attempt == casAttempts {
			a.known = false
			return Result{}, &RejectError{ReasonChainUnavailable, err.Error()}
		}
		cur = now
		a.head = now
		dup, err := s.checkShared(ctx, cur, b, digest)
		if rej := (*RejectError)(nil); errors.As(err, &rej) && rej.Reason != ReasonChainUnavailable {
			s.log.Warn("batch stored on this replica lost its sequence to another batch; it stays stored but outside the chain", "agent", b.AgentId, "batch", b.BatchId, "sequence", b.Sequence)
		}
		if err != nil {
			return Result{}, err
		}
		if dup {
			return Result{Duplicate: true}, nil
		}
	}
	// Observed only once in the chain: a batch stored here before a crash
	// or a lost race was never observed.
	s.observe(b, receipts)
	return Result{Receipts: len(receipts)}, nil
}

// readHead reads agentID's shared head; with none stored yet it starts
// from the local store's head, so a chain begun before heads were shared
// continues.
func (s *Service) readHead(ctx context.Context, agentID string) (chainhead.State, error) {
	cur, err := s.opts.Heads.Get(ctx, agentID)
	if err != nil {
		return cur, &RejectError{ReasonChainUnavailable, err.Error()}
	}
	if cur.Version == 0 {
		cur.Head = s.opts.Store.Head(agentID)
	}
	return cur, nil
}

// checkShared is receipt.Head.Next against the shared state cur: earlier
// sequences are looked up among the shared batch digests (or, for a chain
// not shared yet, the local store's).
func (s *Service) checkShared(ctx context.Context, cur chainhead.State, b *mcpreadyv1.ReceiptBatch, digest string) (bool, error) {
	var lookupErr error
	dup, err := cur.Next(b, digest, func(seq uint64) (string, bool) {
		if cur.Version == 0 {
			return s.opts.Store.BatchDigest(b.AgentId, seq)
		}
		d, ok, err := s.opts.Heads.BatchDigest(ctx, b.AgentId, seq)
		lookupErr = err
		return d, ok
	})
	if lookupErr != nil {
		return false, &RejectError{ReasonChainUnavailable, lookupErr.Error()}
	}
	if err != nil {
		return false, chainReject(err)
	}
	return dup, nil
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
