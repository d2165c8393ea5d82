package pipeline

import "context"

// Later holds the part of a call's receipt work that may wait until the
// call's answer is on its way: for a call whose receipt need not be durable
// before its answer (Durable false), the digest of the result and the hand
// over to the ledger (which appends such receipts in the background
// anyway). A caller that sends answers itself puts a Later in the call's
// context (WithLater) and runs it once the answer is sent; without one,
// Call does that work before it returns. A Later serves one call, on one
// goroutine.
type Later struct {
	// call is the call whose receipt waits (nil for none): a call leaves
	// one piece of work, held as itself rather than in a closure and a
	// list (two allocations per call).
	call *flight
}

type laterKey struct{}

// WithLater returns ctx carrying l for the calls made under it.
func WithLater(ctx context.Context, l *Later) context.Context {
	return context.WithValue(ctx, laterKey{}, l)
}

// Pending reports whether l holds work.
func (l *Later) Pending() bool { return l.call != nil }

// Run does the work l holds, once: the receipt ends now, and the Ledger
// finishes it (digests, Options.Emit) when it appends it, on its own
// goroutine, so that the caller's goroutine is free as soon as its answer
// is sent. Without a Ledger, Run finishes the receipt itself.
func (l *Later) Run() {
	f := l.call
	l.call = nil
	switch {
	case f == nil:
	case f.p.opts.Ledger != nil:
		f.end = f.p.opts.Now()
		f.p.opts.Ledger.Defer(f)
	default:
		_ = f.complete() // not durable: nothing to withhold, no one to tell
	}
}

// hold keeps f's receipt work for Run, unless l holds another call's
// already (a Later shared by calls): then f's is not held, and the caller
// does it at once.
func (l *Later) hold(f *flight) bool {
	if l.call != nil {
		return false
	}
	l.call = f
	return true
}

// later is where call puts the receipt work of a read-only answer: ctx's
// Later, or nil when the work must be done at once.
func later(ctx context.Context) *Later {
	l, _ := ctx.Value(laterKey{}).(*Later)
	return l
}
