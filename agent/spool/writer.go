package spool

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
)

// ErrRefusedWithoutReceipts wraps the reason Writer.Accepting refuses a
// call: the spool cannot accept its receipt.
var ErrRefusedWithoutReceipts = errors.New("receipts cannot be recorded")

// WriterOptions configures a Writer. Zero values take the documented
// defaults.
type WriterOptions struct {
	// Group is the most receipts the writer appends as one group (one
	// record, one fsync); default 256.
	Group int
	// Linger is how long the writer waits for more receipts after the
	// first of a group; default 20ms. A longer wait makes larger groups
	// and fewer fsyncs (each about 200µs on a virtual disk, its thread
	// holding a processor); it only delays receipts that need not be
	// durable before their answers.
	Linger time.Duration
	// Queue is how many receipts wait for the writer; default 4096. When
	// it is full, Record appends the receipt itself (backpressure rather
	// than loss).
	Queue int
	// ContinueReadOnly: when the spool cannot accept receipts, read-only
	// calls continue without them (true) or are refused like
	// state-changing ones (false).
	ContinueReadOnly bool
	// Logger; nil discards. Receipts are never logged, only their ids.
	Logger *slog.Logger
}

// Writer records the receipts of many callers in one Spool: durable ones
// before Record returns (concurrent callers share fsyncs: group commit),
// the others in groups appended by Run in the background, where deferred
// ones (Defer) are also finished. It also says
// whether a call may start at all (Accepting). It is safe for concurrent
// use.
type Writer struct {
	s    *Spool
	opts WriterOptions

	mu     sync.Mutex
	queued []entry // waiting for Run, in Record and Defer order
	// wake holds one token for Run: the queue became non-empty, or grew to
	// a whole group. Receipts queued in between wake nobody.
	wake chan struct{}
}

// NewWriter returns a Writer for s; start Run for the background groups.
func NewWriter(s *Spool, opts WriterOptions) *Writer {
	if opts.Group <= 0 {
		opts.Group = 256
	}
	if opts.Linger <= 0 {
		opts.Linger = 20 * time.Millisecond
	}
	if opts.Queue <= 0 {
		opts.Queue = 4096
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Writer{s: s, opts: opts, wake: make(chan struct{}, 1)}
}

// Accepting returns nil when a call may start: its receipt can be
// recorded (Spool.Ready), or it is read-only and ContinueReadOnly is set
// (its receipt is then dropped and counted). Otherwise the error wraps
// ErrRefusedWithoutReceipts and the spool's reason.
func (w *Writer) Accepting(stateChanging bool) error {
	err := w.s.Ready()
	if err == nil || !stateChanging && w.opts.ContinueReadOnly {
		return nil
	}
	return fmt.Errorf("%w: %w", ErrRefusedWithoutReceipts, err)
}

// Record hands r over. With durable it returns once r is fsync'd in the
// spool, or the reason it is not (the caller must not answer as if it
// were); otherwise it queues r for Run and returns nil. The spool keeps
// its own copy: r may be changed afterwards.
func (w *Writer) Record(r *mcpreadyv1.Receipt, durable bool) error {
	if durable {
		err := w.s.Append(r)
		if err != nil {
			w.opts.Logger.Error("receipt not durable", "err", err, "receipt", r.GetReceiptId())
		}
		return err
	}
	w.enqueue(entry{r: r})
	return nil
}

// Pending is a receipt that is finished only when the Writer appends it
// (Defer): the receipt work of a call that may wait until after its
// answer, done on the Writer's goroutine in groups rather than on the
// caller's.
type Pending interface {
	// Receipt finishes the receipt and returns it; nil records none. The
	// Writer calls it once, on the goroutine that appends it, never
	// while holding its lock.
	Receipt() *mcpreadyv1.Receipt
}

// Defer queues p, like Record of a receipt that need not be durable: Run
// finishes it (p.Receipt) and appends it with its group. When the queue is
// full, Defer finishes and appends it itself (backpressure rather than
// loss).
func (w *Writer) Defer(p Pending) {
	w.enqueue(entry{p: p})
}

// entry is one queued receipt: finished (r) or still to finish (p).
type entry struct {
	r *mcpreadyv1.Receipt
	p Pending
}

// receipt is e's receipt, finished now if it was deferred.
func (e entry) receipt() *mcpreadyv1.Receipt {
	if e.p != nil {
		return e.p.Receipt()
	}
	return e.r
}

// enqueue queues e for Run, or appends it at once when the queue is full.
func (w *Writer) enqueue(e entry) {
	w.mu.Lock()
	if len(w.queued) >= w.opts.Queue {
		w.mu.Unlock()
		if r := e.receipt(); r != nil {
			w.append(r)
		}
		return
	}
	w.queued = append(w.queued, e)
	n := len(w.queued)
	w.mu.Unlock()
	if n == 1 || n == w.opts.Group {
		select {
		case w.wake <- struct{}{}:
		default: // Run has a token already
		}
	}
}

// take moves up to one group of queued receipts into group (empty, reused)
// and reports how many are still queued after them.
func (w *Writer) take(group []entry) ([]entry, int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.queued) <= w.opts.Group {
		group, w.queued = w.queued, group // the two buffers change places
		return group, 0
	}
	group = append(group, w.queued[:w.opts.Group]...)
	n := copy(w.queued, w.queued[w.opts.Group:])
	clear(w.queued[n:])
	w.queued = w.queued[:n]
	return group, n
}

// queuedLen is how many receipts wait.
func (w *Writer) queuedLen() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.queued)
}

func (w *Writer) append(r *mcpreadyv1.Receipt) {
	if err := w.s.Append(r); err != nil {
		w.opts.Logger.Error("receipt not spooled", "err", err, "receipt", r.GetReceiptId())
	}
}

// Run appends the queued receipts until ctx ends: once receipts wait, it
// waits up to Linger for more (less when a whole Group is queued), then
// appends what is queued, a Group per Spool.AppendBatch, before waiting
// again. Call Drain after it returns.
func (w *Writer) Run(ctx context.Context) {
	var group groupBuffers
	linger := time.NewTimer(w.opts.Linger)
	linger.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.wake:
		}
		if w.queuedLen() < w.opts.Group {
			linger.Reset(w.opts.Linger)
			select {
			case <-linger.C:
			case <-w.wake: // a whole group is queued
				linger.Stop()
			}
		}
		group = w.appendQueued(group)
	}
}

// groupBuffers are the buffers one group passes through, reused from
// group to group: its queue entries, then its finished receipts.
type groupBuffers struct {
	entries  []entry
	receipts []*mcpreadyv1.Receipt
}

// appendQueued appends every queued receipt, a group at a time (deferred
// ones finished first, outside the lock), and returns the emptied buffers
// for reuse.
func (w *Writer) appendQueued(g groupBuffers) groupBuffers {
	for {
		var left int
		g.entries, left = w.take(g.entries[:0])
		for _, e := range g.entries {
			if r := e.receipt(); r != nil {
				g.receipts = append(g.receipts, r)
			}
		}
		clear(g.entries)
		if len(g.receipts) > 0 {
			w.appendGroup(g.receipts)
		}
		clear(g.receipts) // the spool keeps its own copies
		g.entries, g.receipts = g.entries[:0], g.receipts[:0]
		if left == 0 {
			return g
		}
	}
}

// appendGroup appends one group with one Spool.AppendBatch.
func (w *Writer) appendGroup(group []*mcpreadyv1.Receipt) {
	n, err := w.s.AppendBatch(group)
	switch {
	case err == nil:
	case errors.Is(err, ErrEncode):
		// Nothing was written: append one by one so that only the
		// receipt that cannot be encoded is lost.
		for _, r := range group {
			w.append(r)
		}
	default:
		w.opts.Logger.Error("receipts not spooled", "err", err, "receipts", len(group)-n)
	}
}

// Drain appends every queued receipt (after Run returned).
func (w *Writer) Drain() {
	w.appendQueued(groupBuffers{})
}
