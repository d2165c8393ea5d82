package spool

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/internal/safebuf"
	"github.com/mcpready/mcpready/ledger"
)

// The adversary: a disk whose fsync fails once and then "recovers". A
// receipt whose fsync failed must not be acknowledged, the spool must
// refuse every later receipt (a retried fsync can succeed for data the
// kernel already dropped), and state-changing calls must be refused from
// then on. Before, the next Append retried the fsync, succeeded and
// acknowledged a receipt written after the lost one.
func TestFailedFsyncBreaksTheSpool(t *testing.T) {
	var fail atomic.Bool
	s := open(t, t.TempDir(), testKey(t), func(o *Options) {
		o.Fsync = func(f *os.File) error {
			if fail.Load() {
				return syscall.EIO
			}
			return f.Sync()
		}
	})
	defer s.Close()
	logs := &safebuf.Buffer{}
	w := NewWriter(s, WriterOptions{ContinueReadOnly: true, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err := w.Record(mk(1), true); err != nil {
		t.Fatal(err)
	}
	fail.Store(true)
	if err := w.Record(mk(2), true); !errors.Is(err, ErrBroken) {
		t.Fatalf("durable record with a failing fsync: %v, want ErrBroken", err)
	}
	if !strings.Contains(logs.String(), "receipt not durable") {
		t.Fatalf("the lost receipt was not logged: %q", logs.String())
	}
	fail.Store(false)
	if err := w.Record(mk(3), true); !errors.Is(err, ErrBroken) {
		t.Fatalf("durable record after a failed fsync: %v, want ErrBroken", err)
	}
	if err := s.Ready(); !errors.Is(err, ErrBroken) {
		t.Fatalf("Ready after a failed fsync: %v", err)
	}
	if err := w.Accepting(true); !errors.Is(err, ErrRefusedWithoutReceipts) || !errors.Is(err, ErrBroken) {
		t.Fatalf("Accepting a state-changing call on a broken spool: %v", err)
	}
	if err := w.Accepting(false); err != nil {
		t.Fatalf("Accepting a read-only call with ContinueReadOnly: %v", err)
	}
	if err := s.Flush(); !errors.Is(err, ErrBroken) {
		t.Fatalf("sealing after a failed fsync: %v, want ErrBroken", err)
	}
	if n := len(pending(t, s)); n != 0 {
		t.Fatalf("%d batches pending after a failed fsync", n)
	}
}

// A full spool refuses state-changing calls before they start; read-only
// ones follow ContinueReadOnly. Acknowledging batches frees room again.
func TestFullSpoolRefusesStateChangingCalls(t *testing.T) {
	s := open(t, t.TempDir(), testKey(t), func(o *Options) { o.MaxBytes = ReadyReserve + 4<<10; o.SegmentBytes = 2 << 10 })
	defer s.Close()
	strict := NewWriter(s, WriterOptions{})
	lenient := NewWriter(s, WriterOptions{ContinueReadOnly: true})
	if err := strict.Accepting(true); err != nil {
		t.Fatalf("empty spool: %v", err)
	}
	for i := 0; s.Ready() == nil; i++ {
		if err := strict.Record(mk(i), true); err != nil {
			t.Fatal(err)
		}
	}
	if err := strict.Accepting(true); !errors.Is(err, ErrRefusedWithoutReceipts) || !errors.Is(err, ErrSpoolFull) {
		t.Fatalf("full spool, state-changing: %v", err)
	}
	if err := strict.Accepting(false); !errors.Is(err, ErrRefusedWithoutReceipts) {
		t.Fatalf("full spool, read-only, refuse: %v", err)
	}
	if err := lenient.Accepting(false); err != nil {
		t.Fatalf("full spool, read-only, continue: %v", err)
	}
	if err := lenient.Accepting(true); !errors.Is(err, ErrRefusedWithoutReceipts) {
		t.Fatalf("full spool, state-changing, ContinueReadOnly: %v", err)
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	for _, b := range pending(t, s) {
		if err := s.Ack(b.Sequence); err != nil {
			t.Fatal(err)
		}
	}
	if err := strict.Accepting(true); err != nil {
		t.Fatalf("after acknowledgement: %v", err)
	}
}

// Concurrent durable and queued receipts all reach the spool.
func TestWriterDurableAndQueued(t *testing.T) {
	key := testKey(t)
	s := open(t, t.TempDir(), key, nil)
	w := NewWriter(s, WriterOptions{Linger: time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { w.Run(ctx); close(done) }()
	var wg sync.WaitGroup
	for i := range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := w.Record(mk(i), i%2 == 0); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	cancel()
	<-done
	w.Drain()
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, _ := drain(t, s, key, ledger.Head{}, false)
	if len(got) != 100 {
		t.Fatalf("%d receipts sealed, want 100", len(got))
	}
}

// Queued receipts reach the spool while Run runs (not only at Drain): a
// lone receipt after about Linger, a burst of several groups in groups of
// at most Group, and the queue bound makes Record append itself rather
// than lose a receipt.
func TestWriterAppendsQueuedWhileRunning(t *testing.T) {
	key := testKey(t)
	s := open(t, t.TempDir(), key, func(o *Options) { o.BatchInterval = time.Hour; o.BatchSize = 100000 })
	defer s.Close()
	w := NewWriter(s, WriterOptions{Linger: time.Millisecond, Group: 64, Queue: 300})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { w.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	depth := func(want int) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); s.Stats().Depth < want; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%d receipts in the spool, want %d (queued %d)", s.Stats().Depth, want, w.queuedLen())
			}
		}
	}
	if err := w.Record(mk(0), false); err != nil {
		t.Fatal(err)
	}
	depth(1)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 250 {
				if err := w.Record(mk(1+g*250+i), false); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	depth(1001)
	if n := w.queuedLen(); n != 0 {
		t.Fatalf("%d receipts still queued", n)
	}
}

// deferred is a Pending that counts its finishing.
type deferred struct {
	i        int
	none     bool // finishes into no receipt
	finished atomic.Int32
	done     chan struct{} // closed when finished, when not nil
}

func (d *deferred) Receipt() *mcpreadyv1.Receipt {
	d.finished.Add(1)
	if d.done != nil {
		close(d.done)
	}
	if d.none {
		return nil
	}
	r := mk(d.i)
	r.ErrorMessage = "finished by the writer"
	return r
}

// Deferred receipts are finished once, when the writer appends them (not
// when they are handed over), in order with the receipts recorded around
// them; one that finishes into nothing records nothing; Drain finishes
// those still queued; and a full queue makes Defer finish and append at
// once rather than lose the receipt.
func TestWriterDefer(t *testing.T) {
	key := testKey(t)
	s := open(t, t.TempDir(), key, func(o *Options) { o.BatchSize = 100000 })
	w := NewWriter(s, WriterOptions{Linger: time.Hour, Queue: 4})
	ds := []*deferred{{i: 1}, {i: 2, none: true}, {i: 3}}
	if err := w.Record(mk(0), false); err != nil {
		t.Fatal(err)
	}
	for _, d := range ds {
		w.Defer(d)
	}
	for _, d := range ds {
		if n := d.finished.Load(); n != 0 {
			t.Fatalf("deferred %d finished %d times when handed over", d.i, n)
		}
	}
	// The queue (4) is full: the next one is finished and appended by
	// the caller, before the queued ones.
	full := &deferred{i: 4}
	w.Defer(full)
	if full.finished.Load() != 1 || s.Stats().Depth != 1 {
		t.Fatalf("with the queue full: finished %d times, %d receipts in the spool", full.finished.Load(), s.Stats().Depth)
	}
	w.Drain()
	for _, d := range ds {
		if n := d.finished.Load(); n != 1 {
			t.Fatalf("deferred %d finished %d times after Drain", d.i, n)
		}
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, _ := drain(t, s, key, ledger.Head{}, false)
	if want := []string{"docs_lookup#4", "docs_lookup#0", "docs_lookup#1", "docs_lookup#3"}; !slices.Equal(got, want) {
		t.Fatalf("sealed %v, want %v", got, want)
	}
}

// Run finishes deferred receipts on its own goroutine, after Linger.
func TestWriterDeferFinishesOnRun(t *testing.T) {
	s := open(t, t.TempDir(), testKey(t), nil)
	defer s.Close()
	w := NewWriter(s, WriterOptions{Linger: time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { w.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	d := &deferred{i: 1, done: make(chan struct{})}
	w.Defer(d)
	select {
	case <-d.done:
	case <-time.After(10 * time.Second):
		t.Fatal("a deferred receipt was not finished while Run runs")
	}
	for deadline := time.Now().Add(10 * time.Second); s.Stats().Depth < 1; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the deferred receipt never reached the spool")
		}
	}
}

// The zero WriterOptions take the documented defaults: groups of up to 256
// receipts, lingering 20ms for more, and a queue of 4096.
func TestWriterDefaults(t *testing.T) {
	s := open(t, t.TempDir(), testKey(t), nil)
	defer s.Close()
	o := NewWriter(s, WriterOptions{}).opts
	if o.Group != 256 || o.Linger != 20*time.Millisecond || o.Queue != 4096 || o.Logger == nil {
		t.Fatalf("defaults: group %d, linger %v, queue %d, logger %v", o.Group, o.Linger, o.Queue, o.Logger)
	}
}
