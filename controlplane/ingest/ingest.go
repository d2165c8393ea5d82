// Package ingest implements the control plane's ReceiptsService: it takes
// signed receipt batches from agents, verifies each manifest against the
// current TrustPolicy (signature, key granted kind ReceiptBatch for the
// name "<agent>/<sequence>", not revoked or expired), checks that every
// receipt sent beside it hashes to its signed digest and that the batch
// continues the agent's hash chain (gap, fork, replay), stores the batch
// durably in the receipt store and only then acknowledges it. Resends are
// acknowledged again with duplicate=true and stored once.
//
// It must not compute evidence (accepted receipts are handed to an
// Observer, package aggregate), keep receipts anywhere but the receipt
// store, or move a chain head except through Options.Heads.
//
// # Chain heads
//
// Every batch takes one path, whatever holds the heads: Options.Heads is
// a chainhead.Store in etcd when replicas share agents (an agent whose
// connection moves to another replica continues its chain there) and a
// chainhead.Memory otherwise (the default, for one replica and for tests).
// Per batch, under a per-agent mutex: verify the signature and receipts;
// check the batch against the head (an exact resend of an accepted batch
// is a duplicate, another batch at an accepted sequence a fork, anything
// else that is not head+1 a gap); store it durably in this replica's
// receipt store; advance the head with a compare-and-swap; only then
// acknowledge and hand it to the Observer. The head never moves for a
// batch that no replica has stored durably, so an acknowledged batch is
// never lost.
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
//   - Heads unavailable (etcd down): the batch is refused (the agent keeps
//     it) before it is stored, or, if etcd fails at the CAS, after it is
//     stored as in the first case.
//
// Each replica remembers the head it last read or wrote per agent, so a
// batch normally costs one call to Heads (the CAS); a batch that the
// remembered head refuses is checked again against a fresh read before it
// is refused. An agent with no head in Heads yet starts from this
// replica's store, so chains begun before heads were shared, and every
// chain after a single replica restarts with in-memory heads, continue
// where they are.
//
// # Database mode
//
// With Options.Database (package receiptdb) the database is both the
// receipt store and the heads store, shared by every replica: the batch is
// checked against the head as above, then Database.Commit stores it and
// advances the head in one transaction that first locks and compares the
// head. There is no local store and no crash window: a batch is stored
// exactly when it is in the chain, it is acknowledged only after the
// commit, and a resend after a lost acknowledgement is a duplicate on any
// replica. A database that cannot be reached refuses the batch as
// receipt-database-unavailable (the agent keeps it and resends).
//
// # Upload bound
//
// Each agent's uploads are bounded by a token bucket of receipts
// (Options.AgentReceiptsPerSecond and AgentReceiptsBurst, by default 5,000
// receipts/s and a burst of 300,000, about a full agent spool). It is
// checked first, before the signature: a batch that does not fit is
// refused as agent-rate-limited, costing neither a signature check nor
// store space, and the agent keeps it and resends it. So an agent whose
// key is stolen cannot make the control plane verify and store receipts
// at line rate until the store that every agent shares is full. Buckets
// are keyed by the node id the upload stream names, which under mTLS is
// bound to the agent's certificate (package authz), so one agent cannot
// spend another's; uploads naming no node (only possible without client
// certificates, where every caller is trusted) share one bucket. A batch
// costs its receipts (at least 1); one larger than the burst fits a full
// bucket and leaves it in debt. After a refusal the rest of that upload
// stream is refused too (those batches could only be gaps). Buckets are
// this replica's: with several replicas an agent connected to each could
// upload at the bound on each.
//
// It also answers receipt queries, tails and exports from the store.
package ingest

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcpready/mcpready/artifact"
	"github.com/mcpready/mcpready/controlplane/chainhead"
	"github.com/mcpready/mcpready/controlplane/receiptstore"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/ledger"
	"github.com/mcpready/mcpready/sign"
)

// Observer receives the receipts of every newly stored batch, in chain
// order per agent, as summaries (only ledger.SummaryFields are set). It
// must be fast (it runs on the ingest path).
type Observer interface {
	Observe(agentID string, receipts []*mcpreadyv1.Receipt, digests []string)
}

// Options configures the service.
type Options struct {
	// Heads holds the agents' chain heads: a *chainhead.Store shared by
	// all replicas in etcd; nil means a fresh chainhead.Memory, which is
	// right for a single replica (after a restart each head is seeded from
	// Store).
	Heads Heads
	// Store is the segment receipt store on this replica's disk. Exactly
	// one of Store and Database is required.
	Store *receiptstore.Store
	// Database is a receipt store shared by every replica that also holds
	// the chain heads (*receiptdb.DB): each batch is stored and its head
	// advanced in one transaction, and Heads must be nil.
	Database Database
	// Trust returns the current verified TrustPolicy (nil rejects every
	// batch); required. It is called per batch so policy updates apply.
	Trust func() *sign.Trust
	// Observer, if set, sees every newly stored batch's receipts.
	Observer Observer
	// Registry receives metrics; nil registers none.
	Registry prometheus.Registerer
	// Logger; nil discards. Receipts are never logged.
	Logger *slog.Logger
	// Now; default time.Now.
	Now func() time.Time
	// AgentReceiptsPerSecond bounds how fast one agent may upload: a token
	// bucket of receipts per agent, refilled at this rate and holding at
	// most AgentReceiptsBurst. A batch that does not fit is refused as
	// agent-rate-limited before its signature is verified or anything is
	// stored (the agent keeps it and resends it later), so one compromised
	// agent cannot spend this replica's CPU on signature checks or fill the
	// receipt store that every agent shares. 0 means
	// DefaultAgentReceiptsPerSecond; negative: no bound. The bound is per
	// replica. See the package doc.
	AgentReceiptsPerSecond int
	// AgentReceiptsBurst is the most receipts an agent may upload at once
	// after a quiet spell; 0 or negative means DefaultAgentReceiptsBurst.
	AgentReceiptsBurst int
}

// Reasons a batch is rejected besides sign.Reason and ledger.ChainReason.
const (
	ReasonNoTrust       = "no-trust-policy"
	ReasonWrongKind     = "wrong-kind"
	ReasonMismatch      = "request-mismatch"
	ReasonStore         = "store-failed"
	ReasonAgentMismatch = "agent-mismatch"
	// ReasonChainUnavailable: the chain head could not be read or
	// advanced; the batch was not acknowledged and is resent later.
	ReasonChainUnavailable = "chain-unavailable"
	// ReasonDatabaseUnavailable: the receipt database could not be
	// reached (or failed) to check or commit the batch; nothing was
	// stored or acknowledged and the agent resends it later.
	ReasonDatabaseUnavailable = "receipt-database-unavailable"
	// ReasonAgentRateLimited: the agent uploaded more receipts than its
	// bound (Options.AgentReceiptsPerSecond); the batch was refused before
	// it was verified, nothing was stored or acknowledged, and the agent
	// resends it later (RejectError.RetryAfter says when it would fit).
	ReasonAgentRateLimited = "agent-rate-limited"
)

// ErrRejected is wrapped by every *RejectError.
var ErrRejected = errors.New("receipt batch rejected")

// RejectError is a rejected batch with a precise reason. errors.Is sees
// ErrRejected and the cause (a sign, ledger, chainhead or receiptstore
// error), when there is one.
type RejectError struct {
	Reason string
	Detail string
	// Err is the cause; nil for a rejection decided here.
	Err error
	// RetryAfter, for ReasonAgentRateLimited, is how long until the batch
	// would fit the agent's bound; 0 otherwise.
	RetryAfter time.Duration
}

func (e *RejectError) Error() string { return e.Reason + ": " + e.Detail }

// Unwrap returns ErrRejected and the cause.
func (e *RejectError) Unwrap() []error { return []error{ErrRejected, e.Err} }

// reject is a RejectError caused by err, detailed by its text.
func reject(reason string, err error) *RejectError {
	return &RejectError{Reason: reason, Detail: err.Error(), Err: err}
}

// Service is the ReceiptsService server.
type Service struct {
	mcpreadyv1.UnimplementedReceiptsServiceServer
	opts  Options
	q     Queries    // Store or Database
	heads HeadReader // Heads or Database
	log   *slog.Logger
	m     *metrics
	limit *limiter

	agentMu sync.Mutex
	agents  map[string]*agentState

	// afterStore, if set (tests), runs between the local store and the
	// head CAS; an error stands for a crash there.
	afterStore func(b *mcpreadyv1.ReceiptBatch) error
}

// New returns the service.
func New(opts Options) (*Service, error) {
	if (opts.Store == nil) == (opts.Database == nil) || opts.Trust == nil {
		return nil, errors.New("ingest: Trust and exactly one of Store and Database are required")
	}
	var q Queries = opts.Store
	if opts.Database != nil {
		if opts.Heads != nil {
			return nil, errors.New("ingest: with a Database the chain heads are the database's; Heads must be nil")
		}
		q = opts.Database
	} else if opts.Heads == nil {
		opts.Heads = chainhead.NewMemory(chainhead.Options{})
	}
	var heads HeadReader = opts.Heads
	if opts.Database != nil {
		heads = opts.Database
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Service{opts: opts, q: q, heads: heads, log: opts.Logger.With("component", "ingest"), m: newMetrics(opts.Registry), agents: map[string]*agentState{},
		limit: newLimiter(opts.AgentReceiptsPerSecond, opts.AgentReceiptsBurst)}, nil
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
	// The bound comes first: nothing is verified for a batch over it.
	if ok, wait, first := s.limit.take(node.GetId(), len(req.GetReceipts()), s.opts.Now()); !ok {
		rej := s.limit.rateLimited(node.GetId(), len(req.GetReceipts()), wait)
		s.m.batches.WithLabelValues(rej.Reason).Inc()
		if first { // once per episode: a flood of refusals must not flood the log
			s.log.Warn("agent over its receipt upload bound; its batches are refused until it slows down (logged once until one is accepted)",
				"node", node.GetId(), "batch", req.GetBatchId(), "sequence", req.GetSequence(), "reason", rej.Reason, "detail", rej.Detail)
		}
		return Result{}, rej
	}
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

// ingest verifies the batch and its receipts, then continues its chain.
func (s *Service) ingest(node *mcpreadyv1.Node, req *mcpreadyv1.UploadBatchesRequest) (Result, error) {
	trust := s.opts.Trust()
	if trust == nil {
		return Result{}, &RejectError{Reason: ReasonNoTrust, Detail: "the control plane has no verified trust policy"}
	}
	v, err := trust.Verify(req.GetBundle(), s.opts.Now())
	if err != nil {
		return Result{}, reject(string(sign.ReasonOf(err)), err)
	}
	b, ok := v.Object.Spec.(*mcpreadyv1.ReceiptBatch)
	if v.Object.Kind != artifact.KindReceiptBatch || !ok {
		return Result{}, &RejectError{Reason: ReasonWrongKind, Detail: fmt.Sprintf("bundle holds a %s, want %s", v.Object.Kind, artifact.KindReceiptBatch)}
	}
	if (req.GetBatchId() != "" && req.GetBatchId() != b.BatchId) || (req.GetSequence() != 0 && req.GetSequence() != b.Sequence) {
		return Result{}, &RejectError{Reason: ReasonMismatch, Detail: fmt.Sprintf("request names batch %s/%d, bundle holds %s/%d", req.GetBatchId(), req.GetSequence(), b.BatchId, b.Sequence)}
	}
	if node.GetId() != "" && node.GetId() != b.AgentId {
		return Result{}, &RejectError{Reason: ReasonAgentMismatch, Detail: fmt.Sprintf("node %q uploaded a batch of agent %q", node.GetId(), b.AgentId)}
	}
	receipts, err := ledger.OpenSummary(v.Object.Metadata.Name, b, req.GetReceipts())
	if err != nil {
		return Result{}, chainReject(err)
	}
	batch := &ledger.Batch{BatchID: b.BatchId, AgentID: b.AgentId, Sequence: b.Sequence, Bundle: req.GetBundle(), Receipts: req.GetReceipts(),
		Digest: artifact.Digest(req.GetBundle())}
	return s.continueChain(b, batch, receipts)
}

func chainReject(err error) error {
	var ce *ledger.ChainError
	if errors.As(err, &ce) {
		return &RejectError{Reason: string(ce.Reason), Detail: ce.Error(), Err: err}
	}
	return reject("invalid", err)
}
