package spool

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
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
	// first of a group; default 2ms.
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
// the others in groups appended by Run in the background. It also says
// whether a call may start at all (Accepting). It is safe for concurrent
// use.
type Writer struct {
	s    *Spool
	opts WriterOptions
	q    chan *mcpreadyv1.Receipt
}

// NewWriter returns a Writer for s; start Run for the background groups.
func NewWriter(s *Spool, opts WriterOptions) *Writer {
	if opts.Group <= 0 {
		opts.Group = 256
	}
	if opts.Linger <= 0 {
		opts.Linger = 2 * time.Millisecond
	}
	if opts.Queue <= 0 {
		opts.Queue = 4096
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Writer{s: s, opts: opts, q: make(chan *mcpreadyv1.Receipt, opts.Queue)}
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
	select {
	case w.q <- r:
	default:
		w.append(r)
	}
	return nil
}

func (w *Writer) append(r *mcpreadyv1.Receipt) {
	if err := w.s.Append(r); err != nil {
		w.opts.Logger.Error("receipt not spooled", "err", err, "receipt", r.GetReceiptId())
	}
}

// Run appends the queued receipts until ctx ends: it takes what is
// queued (waiting up to Linger for more, at most Group) and appends the
// group with one Spool.AppendBatch before gathering the next. Call Drain
// after it returns.
func (w *Writer) Run(ctx context.Context) {
	group := make([]*mcpreadyv1.Receipt, 0, w.opts.Group)
	for {
		select {
		case <-ctx.Done():
			return
		case r := <-w.q:
			group = append(group[:0], r)
		}
		linger := time.NewTimer(w.opts.Linger)
	gather:
		for len(group) < w.opts.Group {
			select {
			case r := <-w.q:
				group = append(group, r)
			case <-linger.C:
				break gather
			}
		}
		linger.Stop()
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
		clear(group) // the spool keeps its own copies
	}
}

// Drain appends every queued receipt (after Run returned).
func (w *Writer) Drain() {
	for {
		select {
		case r := <-w.q:
			w.append(r)
		default:
			return
		}
	}
}
