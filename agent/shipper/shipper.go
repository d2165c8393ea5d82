// Package shipper streams the spool's sealed receipt batches to the
// control plane's ReceiptsService.
//
// It keeps a bounded window of batches in flight, deletes a batch from the
// spool only when the control plane acknowledges it (after its durable
// write), and reconnects with jittered exponential backoff when the stream
// fails or a batch is rejected; each new stream resends every
// unacknowledged batch from the oldest, and the control plane deduplicates.
// The agent keeps spooling while the control plane is away. The shipper
// never alters, reorders or drops a batch.
package shipper

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/mcpready/mcpready/agent/spool"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/ledger"
)

// Options configures Run. Zero values take the defaults.
type Options struct {
	// Node identifies the agent; its id must be the spool's agent id.
	Node *mcpreadyv1.Node
	// Window is the most batches sent but not yet acknowledged; default 8.
	Window int
	// MinBackoff and MaxBackoff bound the reconnect delay; defaults 200ms
	// and 30s. The delay doubles per failure with ±50% jitter.
	MinBackoff, MaxBackoff time.Duration
	// Registry receives metrics; nil registers none.
	Registry prometheus.Registerer
	// Logger; nil discards.
	Logger *slog.Logger
}

// RejectedError is a batch the control plane refused; the shipper keeps it
// and retries after backoff (e.g. until the trust policy grants the key).
type RejectedError struct {
	Sequence uint64
	BatchID  string
	Reason   string
	// RetryAfter is how long the control plane asked the agent to wait
	// before sending the batch again (0: no wait asked).
	RetryAfter time.Duration
}

func (e *RejectedError) Error() string {
	return fmt.Sprintf("control plane rejected batch %s (sequence %d): %s", e.BatchID, e.Sequence, e.Reason)
}

// Run ships batches from sp over conn until ctx ends, and returns ctx's
// error.
func Run(ctx context.Context, conn grpc.ClientConnInterface, sp *spool.Spool, opts Options) error {
	if opts.Window <= 0 {
		opts.Window = 8
	}
	if opts.MinBackoff <= 0 {
		opts.MinBackoff = 200 * time.Millisecond
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = 30 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	log := opts.Logger.With("component", "shipper")
	sent := prometheus.NewCounter(prometheus.CounterOpts{Namespace: "mcpready", Subsystem: "receipts", Name: "sent_total",
		Help: "Receipts sent to the control plane (resends included)."})
	if opts.Registry != nil {
		if err := opts.Registry.Register(sent); err != nil {
			log.Warn("metric not registered", "err", err)
		}
	}
	client := mcpreadyv1.NewReceiptsServiceClient(conn)
	failures := 0
	for {
		progressed, err := session(ctx, client, sp, opts, sent)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if progressed {
			failures = 0
		}
		d := min(opts.MinBackoff<<min(failures, 20), opts.MaxBackoff)
		d = d/2 + rand.N(d/2+1)
		if re := (*RejectedError)(nil); errors.As(err, &re) && re.RetryAfter > d {
			d = min(re.RetryAfter, opts.MaxBackoff) // as long as the control plane asked, up to the longest backoff
		}
		failures++
		log.Warn("receipt stream interrupted; retrying", "err", err, "retry_in", d)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(d):
		}
	}
}

type answer struct {
	resp *mcpreadyv1.UploadBatchesResponse
	err  error
}

// session runs one stream. progressed reports whether any batch was
// acknowledged.
func session(ctx context.Context, client mcpreadyv1.ReceiptsServiceClient, sp *spool.Spool, opts Options, sent prometheus.Counter) (progressed bool, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := client.UploadBatches(ctx)
	if err != nil {
		return false, err
	}
	answers := make(chan answer, opts.Window)
	go func() {
		for {
			resp, err := stream.Recv()
			select {
			case answers <- answer{resp, err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	var inflight []ledger.Batch
	var cursor uint64
	node := opts.Node
	for {
		if len(inflight) < opts.Window {
			batches, err := sp.Pending(cursor, opts.Window-len(inflight))
			if err != nil {
				return progressed, err
			}
			for _, b := range batches {
				req := b.UploadRequest()
				req.Node = node
				if err := stream.Send(req); err != nil {
					return progressed, err
				}
				node = nil // the node travels once per stream
				sent.Add(float64(len(b.Receipts)))
				inflight = append(inflight, b)
				cursor = b.Sequence
			}
		}
		select {
		case <-ctx.Done():
			return progressed, ctx.Err()
		case <-sp.Sealed():
		case a := <-answers:
			if a.err != nil {
				return progressed, a.err
			}
			if len(inflight) == 0 || a.resp.GetSequence() != inflight[0].Sequence {
				return progressed, fmt.Errorf("unexpected acknowledgement for sequence %d", a.resp.GetSequence())
			}
			b := inflight[0]
			if !a.resp.GetAccepted() {
				return progressed, &RejectedError{Sequence: b.Sequence, BatchID: b.BatchID, Reason: a.resp.GetError(), RetryAfter: a.resp.GetRetryAfter().AsDuration()}
			}
			if err := sp.Ack(b.Sequence); err != nil && !errors.Is(err, spool.ErrClosed) {
				return progressed, err
			}
			inflight = inflight[1:]
			progressed = true
		}
	}
}
