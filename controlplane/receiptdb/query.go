package receiptdb

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/proto"

	"github.com/mcpready/mcpready/controlplane/receiptstore"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/ledger"
)

// pageRows is how many rows a tail or export reads per statement, so
// memory stays bounded however much is stored.
const pageRows = 500

// position orders receipts: the writing transaction's id, then the
// receipt's place in its batch (one batch per transaction).
type position struct {
	tx  uint64
	idx int32
}

const receiptSelect = `SELECT tx::text, idx, agent_id, batch_id, digest, body FROM receipts`

func scanReceipt(rows pgx.Rows) (*mcpreadyv1.StoredReceipt, position, error) {
	var p position
	var tx string
	sr := &mcpreadyv1.StoredReceipt{}
	var body []byte
	if err := rows.Scan(&tx, &p.idx, &sr.AgentId, &sr.BatchId, &sr.Digest, &body); err != nil {
		return nil, p, fail(err)
	}
	var err error
	if p.tx, err = strconv.ParseUint(tx, 10, 64); err != nil {
		return nil, p, fmt.Errorf("%w: transaction id %q", ErrCorrupt, tx)
	}
	sr.Receipt = &mcpreadyv1.Receipt{}
	if err := proto.Unmarshal(body, sr.Receipt); err != nil {
		return nil, p, fmt.Errorf("%w: batch %s receipt %d: %w", ErrCorrupt, sr.BatchId, p.idx, err)
	}
	return sr, p, nil
}

// where builds the filter of q; args are numbered from $1.
func where(q receiptstore.Query) (string, []any) {
	var conds []string
	var args []any
	add := func(cond string, v any) {
		args = append(args, v)
		conds = append(conds, strings.ReplaceAll(cond, "?", "$"+strconv.Itoa(len(args))))
	}
	if q.ReceiptID != "" {
		add("receipt_id = ?", q.ReceiptID)
	}
	if q.WorkflowID != "" {
		add("workflow_id = ?", q.WorkflowID)
	}
	if q.ServerName != "" {
		add("server_name = ?", q.ServerName)
	}
	if q.ToolName != "" {
		add("tool_name = ?", q.ToolName)
	}
	if q.AgentID != "" {
		add("agent_id = ?", q.AgentID)
	}
	if !q.Since.IsZero() {
		add("emitted_at >= ?", q.Since)
	}
	if !q.Until.IsZero() {
		add("emitted_at < ?", q.Until)
	}
	if len(conds) == 0 {
		return "", nil
	}
	return " WHERE " + strings.Join(conds, " AND "), args
}

// Query returns matching receipts in store order, at most q.Limit (the
// newest ones before q.Before), and, when the limit was reached, the
// cursor of the page before them; Limit 0 means all, read a page at a
// time.
func (d *DB) Query(ctx context.Context, q receiptstore.Query) ([]*mcpreadyv1.StoredReceipt, string, error) {
	w, args := where(q)
	if q.Before != "" {
		c, err := receiptstore.ParseCursor(q.Before)
		if err != nil {
			return nil, "", err
		}
		args = append(args, strconv.FormatUint(c.A, 10), c.Idx)
		w = and(w, fmt.Sprintf("(tx, idx) < ($%d::xid8, $%d)", len(args)-1, len(args)))
	}
	if q.Limit > 0 {
		out, last, err := d.page(ctx, receiptSelect+w+` ORDER BY tx DESC, idx DESC LIMIT `+strconv.Itoa(q.Limit), args)
		if err != nil {
			return nil, "", err
		}
		slices.Reverse(out)
		next := ""
		if len(out) == q.Limit {
			next = receiptstore.Cursor{A: last.tx, Idx: last.idx}.String()
		}
		return out, next, nil
	}
	var out []*mcpreadyv1.StoredReceipt
	_, err := d.scanFrom(ctx, w, args, position{}, nil, func(sr *mcpreadyv1.StoredReceipt) error {
		out = append(out, sr)
		return nil
	})
	return out, "", err
}

// and adds cond to the filter w.
func and(w, cond string) string {
	if w == "" {
		return " WHERE " + cond
	}
	return w + " AND " + cond
}

// scanFrom calls fn for every receipt matching w after position from and
// (if upTo is set) written by a transaction before *upTo, in order, a page
// per statement, and returns the position of the last one.
func (d *DB) scanFrom(ctx context.Context, w string, args []any, from position, upTo *uint64, fn func(*mcpreadyv1.StoredReceipt) error) (position, error) {
	for {
		n := len(args)
		a := append(slices.Clip(args), strconv.FormatUint(from.tx, 10), from.idx)
		cond := fmt.Sprintf("(tx, idx) > ($%d::xid8, $%d)", n+1, n+2)
		if upTo != nil {
			a = append(a, strconv.FormatUint(*upTo, 10))
			cond += fmt.Sprintf(" AND tx < $%d::xid8", n+3)
		}
		page, last, err := d.page(ctx, receiptSelect+and(w, cond)+` ORDER BY tx, idx LIMIT `+strconv.Itoa(pageRows), a)
		if err != nil {
			return from, err
		}
		for _, sr := range page {
			if err := fn(sr); err != nil {
				return from, err
			}
		}
		if len(page) > 0 {
			from = last
		}
		if len(page) < pageRows {
			return from, nil
		}
	}
}

// page runs one bounded statement.
func (d *DB) page(ctx context.Context, sql string, args []any) ([]*mcpreadyv1.StoredReceipt, position, error) {
	ctx, cancel := d.timeout(ctx)
	defer cancel()
	rows, err := d.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, position{}, fail(err)
	}
	defer rows.Close()
	var out []*mcpreadyv1.StoredReceipt
	var last position
	for rows.Next() {
		sr, p, err := scanReceipt(rows)
		if err != nil {
			return nil, last, err
		}
		out, last = append(out, sr), p
	}
	if err := rows.Err(); err != nil {
		return nil, last, fail(err)
	}
	return out, last, nil
}

// horizon is the oldest transaction id still running: every receipt
// written by an earlier transaction is committed (or gone), so a cursor
// below it never misses a receipt that commits later.
func (d *DB) horizon(ctx context.Context) (uint64, error) {
	ctx, cancel := d.timeout(ctx)
	defer cancel()
	var s string
	if err := d.pool.QueryRow(ctx, `SELECT pg_snapshot_xmin(pg_current_snapshot())::text`).Scan(&s); err != nil {
		return 0, fail(err)
	}
	return strconv.ParseUint(s, 10, 64)
}

// Tail calls fn with the last n receipts and then, with follow, with every
// receipt committed later, polling every Options.PollEvery, until ctx ends
// or fn fails. Receipts are delivered once each, in transaction order,
// whichever replica stored them.
func (d *DB) Tail(ctx context.Context, n int, follow bool, fn func(*mcpreadyv1.StoredReceipt) error) error {
	h, err := d.horizon(ctx)
	if err != nil {
		return err
	}
	// Start after the (n+1)-th newest receipt and read forward a page at
	// a time, so a large n costs time, not memory.
	from := position{idx: -1}
	tctx, cancel := d.timeout(ctx)
	var tx string
	err = d.pool.QueryRow(tctx, `SELECT tx::text, idx FROM receipts WHERE tx < $1::xid8 ORDER BY tx DESC, idx DESC OFFSET $2 LIMIT 1`,
		strconv.FormatUint(h, 10), n).Scan(&tx, &from.idx)
	cancel()
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		from = position{idx: -1} // fewer than n+1: all of them
	case err != nil:
		return fail(err)
	default:
		if from.tx, err = strconv.ParseUint(tx, 10, 64); err != nil {
			return fmt.Errorf("%w: transaction id %q", ErrCorrupt, tx)
		}
	}
	if _, err := d.scanFrom(ctx, "", nil, from, &h, fn); err != nil {
		return err
	}
	if !follow {
		return nil
	}
	return d.follow(ctx, h, fn)
}

// Follow calls fn with every receipt received at or after since, then
// with every receipt committed later, polling every Options.PollEvery,
// until ctx ends or fn fails; each once, whichever replica stored it.
func (d *DB) Follow(ctx context.Context, since time.Time, fn func(*mcpreadyv1.StoredReceipt) error) error {
	h, err := d.horizon(ctx)
	if err != nil {
		return err
	}
	if _, err := d.scanFrom(ctx, " WHERE received >= $1", []any{since}, position{}, &h, fn); err != nil {
		return err
	}
	return d.follow(ctx, h, fn)
}

// follow passes fn every receipt of a transaction at or after horizon h
// (every earlier one has been seen), reading the band [from, horizon)
// at each poll.
func (d *DB) follow(ctx context.Context, h uint64, fn func(*mcpreadyv1.StoredReceipt) error) error {
	from := position{tx: h, idx: -1}
	t := time.NewTicker(d.o.PollEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		h, err := d.horizon(ctx)
		if err != nil {
			return err
		}
		if _, err = d.scanFrom(ctx, "", nil, from, &h, fn); err != nil {
			return err
		}
		from = position{tx: h, idx: -1}
	}
}

// Export calls fn for each stored batch received at or after since (all
// when zero), optionally of one agent, exactly as signed, in transaction
// order, a page of batches at a time.
func (d *DB) Export(ctx context.Context, since time.Time, agentID string, fn func(*ledger.Batch) error) error {
	var after uint64 // transaction ids start above 0
	for {
		page, err := d.batchPage(ctx, since, agentID, after)
		if err != nil {
			return err
		}
		for _, b := range page {
			if err := d.fillReceipts(ctx, b); err != nil {
				return err
			}
			if err := fn(&b.Batch); err != nil {
				return err
			}
			after = b.tx
		}
		if len(page) < pageRows/10 {
			return nil
		}
	}
}

type batchRow struct {
	ledger.Batch
	tx uint64
	n  int
}

func (d *DB) batchPage(ctx context.Context, since time.Time, agentID string, after uint64) ([]*batchRow, error) {
	ctx, cancel := d.timeout(ctx)
	defer cancel()
	rows, err := d.pool.Query(ctx, `SELECT tx::text, received, agent_id, sequence, batch_id, digest, bundle, receipts FROM receipt_batches
		WHERE ($1::timestamptz IS NULL OR received >= $1) AND ($2 = '' OR agent_id = $2) AND tx > $3::xid8
		ORDER BY tx LIMIT `+strconv.Itoa(pageRows/10), sinceArg(since), agentID, strconv.FormatUint(after, 10))
	if err != nil {
		return nil, fail(err)
	}
	defer rows.Close()
	var out []*batchRow
	for rows.Next() {
		b := &batchRow{}
		var tx string
		var seq int64
		if err := rows.Scan(&tx, &b.Received, &b.AgentID, &seq, &b.BatchID, &b.Digest, &b.Bundle, &b.n); err != nil {
			return nil, fail(err)
		}
		b.Sequence = uint64(seq)
		if b.tx, err = strconv.ParseUint(tx, 10, 64); err != nil {
			return nil, fmt.Errorf("%w: transaction id %q", ErrCorrupt, tx)
		}
		out = append(out, b)
	}
	if err := rows.Err(); err != nil {
		return nil, fail(err)
	}
	return out, nil
}

func sinceArg(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t
}

// fillReceipts reads b's receipts as stored, in batch order.
func (d *DB) fillReceipts(ctx context.Context, b *batchRow) error {
	ctx, cancel := d.timeout(ctx)
	defer cancel()
	rows, err := d.pool.Query(ctx, `SELECT body FROM receipts WHERE tx = $1::xid8 AND batch_id = $2 ORDER BY idx`, strconv.FormatUint(b.tx, 10), b.BatchID)
	if err != nil {
		return fail(err)
	}
	bodies, err := pgx.CollectRows(rows, pgx.RowTo[[]byte])
	if err != nil {
		return fail(err)
	}
	if len(bodies) != b.n {
		return fmt.Errorf("%w: batch %s has %d of its %d receipts", ErrCorrupt, b.BatchID, len(bodies), b.n)
	}
	b.Receipts = bodies
	return nil
}
