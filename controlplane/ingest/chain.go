package ingest

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/mcpready/mcpready/controlplane/chainhead"
	"github.com/mcpready/mcpready/controlplane/receiptstore"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/ledger"
)

// Heads holds every agent's chain head: *chainhead.Store (etcd, shared by
// replicas) and *chainhead.Memory implement it (see package chainhead for
// the meaning of each method). Ingest moves a head only through Advance.
type Heads interface {
	HeadReader
	Advance(ctx context.Context, agentID string, base chainhead.State, next ledger.Head) (chainhead.State, error)
}

// HeadReader reads chain heads and the digests of accepted batches.
type HeadReader interface {
	Get(ctx context.Context, agentID string) (chainhead.State, error)
	BatchDigest(ctx context.Context, agentID string, seq uint64) (string, bool, error)
}

// Queries answers receipt queries, tails and exports; both stores
// implement it.
type Queries interface {
	Query(ctx context.Context, q receiptstore.Query) ([]*mcpreadyv1.StoredReceipt, string, error)
	Tail(ctx context.Context, n int, follow bool, fn func(*mcpreadyv1.StoredReceipt) error) error
	Export(ctx context.Context, since time.Time, agentID string, fn func(*ledger.Batch) error) error
}

// Database is a receipt store shared by replicas that is also the heads
// store: Commit stores a batch and advances its agent's head from base in
// one transaction, returning ErrConflict (and the current state) when the
// head moved, like Heads.Advance.
type Database interface {
	HeadReader
	Queries
	Commit(ctx context.Context, base chainhead.State, b *ledger.Batch, summaries []*mcpreadyv1.Receipt, digests []string) (chainhead.State, error)
}

// casAttempts bounds how often a lost head race is re-checked. A lost race
// moves the head past the batch, so one re-check normally decides it.
const casAttempts = 3

// agentState serialises one agent's batches on this replica and remembers
// the head this replica last read or wrote. That head is only a hint
// saving a read per batch: the CAS compares it, and a batch it refuses is
// checked again against a fresh read.
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

// continueChain checks the verified batch b against its agent's head,
// stores it locally and advances the head (see the package doc).
func (s *Service) continueChain(b *mcpreadyv1.ReceiptBatch, batch *ledger.Batch, receipts []*mcpreadyv1.Receipt) (Result, error) {
	a := s.agent(b.AgentId)
	a.mu.Lock()
	defer a.mu.Unlock()
	ctx := context.Background() // each Heads call is bounded by its own timeout
	digest := batch.Digest
	cur, hint := a.head, a.known
	a.known = false // until the head is read or written again
	if !hint {
		var err error
		if cur, err = s.readHead(ctx, b.AgentId); err != nil {
			return Result{}, err
		}
	}
	dup, err := s.check(ctx, cur, b, digest)
	if err != nil && hint {
		// The remembered head may be stale (another replica served the
		// agent meanwhile): decide on the current one.
		if cur, err = s.readHead(ctx, b.AgentId); err != nil {
			return Result{}, err
		}
		dup, err = s.check(ctx, cur, b, digest)
	}
	a.head, a.known = cur, err == nil
	if err != nil || dup {
		return Result{Duplicate: dup}, err
	}
	batch.Received = s.opts.Now()
	if s.opts.Database == nil {
		if err := s.store(batch, b, receipts); err != nil {
			return Result{}, err
		}
		if s.afterStore != nil {
			if err := s.afterStore(b); err != nil {
				return Result{}, reject(ReasonChainUnavailable, err)
			}
		}
	}
	for attempt := 1; ; attempt++ {
		now, err := s.advance(ctx, cur, batch, b, receipts)
		if err == nil {
			a.head, a.known = now, true
			break
		}
		if !errors.Is(err, chainhead.ErrConflict) || attempt == casAttempts {
			a.known = false
			return Result{}, s.unavailable(err)
		}
		cur = now
		a.head = now
		dup, err := s.check(ctx, cur, b, digest)
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
	if s.opts.Observer != nil {
		s.opts.Observer.Observe(b.AgentId, receipts, b.ReceiptDigests)
	}
	return Result{Receipts: len(receipts)}, nil
}

// advance moves the agent's head from cur to batch: with a Database by
// committing the batch and the head in one transaction, else by the
// Heads CAS after the batch was stored locally.
func (s *Service) advance(ctx context.Context, cur chainhead.State, batch *ledger.Batch, b *mcpreadyv1.ReceiptBatch, receipts []*mcpreadyv1.Receipt) (chainhead.State, error) {
	if s.opts.Database != nil {
		return s.opts.Database.Commit(ctx, cur, batch, receipts, b.ReceiptDigests)
	}
	return s.opts.Heads.Advance(ctx, b.AgentId, cur, ledger.Head{Sequence: b.Sequence, Digest: batch.Digest})
}

// unavailable is the rejection for a head store (or database) failure.
func (s *Service) unavailable(err error) *RejectError {
	if s.opts.Database != nil {
		return reject(ReasonDatabaseUnavailable, err)
	}
	return reject(ReasonChainUnavailable, err)
}

// store appends the batch to the local receipt store (fsync'd). A batch
// already stored (a resend after a crash before the CAS) is not written
// again.
func (s *Service) store(batch *ledger.Batch, b *mcpreadyv1.ReceiptBatch, receipts []*mcpreadyv1.Receipt) error {
	ar, err := s.opts.Store.Append(batch, receipts, b.ReceiptDigests)
	if err != nil {
		return reject(ReasonStore, err)
	}
	if ar.DuplicateReceipts > 0 {
		s.log.Warn("batch repeats receipt ids already stored", "agent", b.AgentId, "batch", b.BatchId, "count", ar.DuplicateReceipts)
	}
	return nil
}

// readHead reads agentID's head; with none in Heads yet it starts from the
// local store's head, so a chain begun before heads were shared (or before
// a single replica restarted) continues.
func (s *Service) readHead(ctx context.Context, agentID string) (chainhead.State, error) {
	cur, err := s.heads.Get(ctx, agentID)
	if err != nil {
		return cur, s.unavailable(err)
	}
	if cur.Version == 0 && s.opts.Store != nil {
		cur.Head = s.opts.Store.Head(agentID)
	}
	return cur, nil
}

// check is ledger.Head.Next against the head cur: earlier sequences are
// looked up among the batch digests in Heads (or, for a head seeded from
// the local store, the store's).
func (s *Service) check(ctx context.Context, cur chainhead.State, b *mcpreadyv1.ReceiptBatch, digest string) (bool, error) {
	var lookupErr error
	dup, err := cur.Next(b, digest, func(seq uint64) (string, bool) {
		if cur.Version == 0 && s.opts.Store != nil {
			return s.opts.Store.BatchDigest(b.AgentId, seq)
		}
		d, ok, err := s.heads.BatchDigest(ctx, b.AgentId, seq)
		lookupErr = err
		return d, ok
	})
	if lookupErr != nil {
		return false, s.unavailable(lookupErr)
	}
	if err != nil {
		return false, chainReject(err)
	}
	return dup, nil
}
