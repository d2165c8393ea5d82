package receiptdb

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/mcpready/mcpready/controlplane/chainhead"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/ledger"
)

// Chain-head errors are chainhead's, so ingest treats every head store
// alike.
var (
	ErrConflict = chainhead.ErrConflict
	ErrInvalid  = chainhead.ErrInvalid
)

// Get returns agent's head; the zero State if none is stored. Version is
// a counter moved by every Commit.
func (d *DB) Get(ctx context.Context, agent string) (chainhead.State, error) {
	ctx, cancel := d.timeout(ctx)
	defer cancel()
	st, err := getHead(ctx, d.pool, agent, "")
	return st, err
}

// getHead reads agent's head through q, with lock appended to the query
// (FOR UPDATE inside a commit).
func getHead(ctx context.Context, q querier, agent, lock string) (chainhead.State, error) {
	var st chainhead.State
	var seq int64
	err := q.QueryRow(ctx, `SELECT sequence, digest, version FROM receipt_heads WHERE agent_id = $1 `+lock, agent).Scan(&seq, &st.Digest, &st.Version)
	if errors.Is(err, pgx.ErrNoRows) {
		return chainhead.State{}, nil
	}
	if err != nil {
		return chainhead.State{}, fail(err)
	}
	st.Sequence = uint64(seq)
	return st, nil
}

// BatchDigest returns the bundle digest of agent's stored batch at seq
// (false once retention dropped it).
func (d *DB) BatchDigest(ctx context.Context, agent string, seq uint64) (string, bool, error) {
	ctx, cancel := d.timeout(ctx)
	defer cancel()
	return batchDigest(ctx, d.pool, agent, seq)
}

// querier is a pool or a transaction.
type querier interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}

func batchDigest(ctx context.Context, q querier, agent string, seq uint64) (string, bool, error) {
	var digest string
	err := q.QueryRow(ctx, `SELECT digest FROM receipt_batches WHERE agent_id = $1 AND sequence = $2 LIMIT 1`, agent, int64(seq)).Scan(&digest)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fail(err)
	}
	return digest, true, nil
}

// Commit stores batch b (verified by the caller; b.Digest is its bundle
// digest, b.Received its receive time) with its receipts' summaries and
// digests, and advances b's agent's head from base to b, in one
// transaction. The transaction first locks the agent's head row and
// compares it with base: if another replica moved it, nothing is written
// and Commit returns the current state with ErrConflict. It returns the
// new state once the transaction has committed; on any other error
// nothing is stored.
func (d *DB) Commit(ctx context.Context, base chainhead.State, b *ledger.Batch, summaries []*mcpreadyv1.Receipt, digests []string) (chainhead.State, error) {
	if b.Sequence != base.Sequence+1 || b.Digest == "" {
		return chainhead.State{}, fmt.Errorf("%w: sequence %d after %d", ErrInvalid, b.Sequence, base.Sequence)
	}
	if len(summaries) != len(b.Receipts) || len(digests) != len(b.Receipts) {
		return chainhead.State{}, fmt.Errorf("%w: batch %s has %d receipts, %d summaries, %d digests", ErrInvalid, b.BatchID, len(b.Receipts), len(summaries), len(digests))
	}
	if err := d.ensurePartition(ctx, b.Received); err != nil {
		return chainhead.State{}, err
	}
	var now chainhead.State
	err := d.inTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		cur, err := getHead(ctx, tx, b.AgentID, "FOR UPDATE")
		if err != nil {
			return err
		}
		if cur.Version != base.Version {
			now = cur
			return ErrConflict
		}
		next := chainhead.State{Head: ledger.Head{Sequence: b.Sequence, Digest: b.Digest}, Version: base.Version + 1}
		var tag interface{ RowsAffected() int64 }
		if base.Version == 0 {
			tag, err = tx.Exec(ctx, `INSERT INTO receipt_heads (agent_id, sequence, digest, version) VALUES ($1, $2, $3, 1) ON CONFLICT DO NOTHING`,
				b.AgentID, int64(b.Sequence), b.Digest)
		} else {
			tag, err = tx.Exec(ctx, `UPDATE receipt_heads SET sequence = $2, digest = $3, version = $4 WHERE agent_id = $1`,
				b.AgentID, int64(b.Sequence), b.Digest, next.Version)
		}
		if err != nil {
			return err
		}
		if tag.RowsAffected() != 1 {
			// A first batch raced another replica's first batch.
			return ErrConflict
		}
		if err := insertBatch(ctx, tx, b, summaries, digests); err != nil {
			return err
		}
		now = next
		return nil
	})
	if errors.Is(err, ErrConflict) {
		if now.Version == 0 {
			// The racing first batch is committed now: read it.
			if now, err = d.Get(ctx, b.AgentID); err != nil {
				return chainhead.State{}, err
			}
		}
		return now, ErrConflict
	}
	if err != nil {
		return chainhead.State{}, err
	}
	return now, nil
}

// insertBatch writes b and its receipts inside tx.
func insertBatch(ctx context.Context, tx pgx.Tx, b *ledger.Batch, summaries []*mcpreadyv1.Receipt, digests []string) error {
	if _, err := tx.Exec(ctx, `INSERT INTO receipt_batches (received, agent_id, sequence, batch_id, digest, bundle, receipts) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
		b.Received, b.AgentID, int64(b.Sequence), b.BatchID, b.Digest, b.Bundle, len(b.Receipts)); err != nil {
		return err
	}
	_, err := tx.CopyFrom(ctx, pgx.Identifier{"receipts"}, receiptColumns, &receiptRows{b: b, rs: summaries, ds: digests})
	return err
}

// ImportResult says what Import did with one batch.
type ImportResult int

// Import outcomes.
const (
	Imported ImportResult = iota
	AlreadyStored
)

// Import stores a batch migrated from a segment store (verified when it
// was first received), in any order: a batch already stored at its
// agent's sequence with the same digest is skipped, one with another
// digest is ErrConflict (a fork between the stores), anything else is
// stored, and the agent's head becomes the highest sequence stored. It is
// for `mcpready receipts migrate` with no control plane writing, not for
// ingest (which uses Commit).
func (d *DB) Import(ctx context.Context, b *ledger.Batch, summaries []*mcpreadyv1.Receipt, digests []string) (ImportResult, error) {
	if len(summaries) != len(b.Receipts) || len(digests) != len(b.Receipts) || b.Digest == "" || b.Sequence == 0 {
		return 0, fmt.Errorf("%w: batch %s", ErrInvalid, b.BatchID)
	}
	if err := d.ensurePartition(ctx, b.Received); err != nil {
		return 0, err
	}
	res := Imported
	err := d.inTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		cur, err := getHead(ctx, tx, b.AgentID, "FOR UPDATE")
		if err != nil {
			return err
		}
		digest, found, err := batchDigest(ctx, tx, b.AgentID, b.Sequence)
		switch {
		case err != nil:
			return err
		case found && digest == b.Digest:
			res = AlreadyStored
			return nil
		case found:
			return fmt.Errorf("%w: agent %s sequence %d is stored with another digest", ErrConflict, b.AgentID, b.Sequence)
		}
		if err := insertBatch(ctx, tx, b, summaries, digests); err != nil {
			return err
		}
		if b.Sequence <= cur.Sequence {
			return nil
		}
		_, err = tx.Exec(ctx, `INSERT INTO receipt_heads (agent_id, sequence, digest, version) VALUES ($1, $2, $3, 1)
			ON CONFLICT (agent_id) DO UPDATE SET sequence = excluded.sequence, digest = excluded.digest, version = receipt_heads.version + 1`,
			b.AgentID, int64(b.Sequence), b.Digest)
		return err
	})
	return res, err
}

var receiptColumns = []string{"received", "idx", "agent_id", "batch_id", "receipt_id", "workflow_id", "server_name", "tool_name", "emitted_at", "digest", "body"}

// receiptRows feeds one batch's receipts to COPY.
type receiptRows struct {
	b  *ledger.Batch
	rs []*mcpreadyv1.Receipt
	ds []string
	i  int
}

func (r *receiptRows) Next() bool { r.i++; return r.i <= len(r.rs) }
func (r *receiptRows) Err() error { return nil }
func (r *receiptRows) Values() ([]any, error) {
	i := r.i - 1
	s := r.rs[i]
	var emitted any
	if t := s.GetEmittedAt(); t != nil {
		emitted = t.AsTime()
	}
	sel := s.GetSelected()
	return []any{r.b.Received, int32(i), r.b.AgentID, r.b.BatchID, s.GetReceiptId(), s.GetWorkflowId(), sel.GetServerName(), sel.GetToolName(),
		emitted, r.ds[i], r.b.Receipts[i]}, nil
}
