// Package leader runs a task on one control-plane replica at a time: the
// winner of an etcd election (client/v3/concurrency). The winner runs the
// task until its context ends or its session (lease) is lost, then
// resigns; the others wait in the campaign and one of them takes over.
//
// It must not decide what the task does or retry the task itself: a task
// that returns early simply ends the term (the replica resigns, and
// campaigns again after Options.Retry; another replica may take over
// meanwhile).
package leader

import (
	"context"
	"log/slog"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// Options configures Run. The zero value is usable.
type Options struct {
	// TTL is the session lease in seconds: how long a dead leader holds
	// the election; 0 means 10.
	TTL int
	// Retry is the pause after etcd fails to open a session or refuses a
	// campaign, and after a term that ended while Run's context lives,
	// before campaigning again; 0 means 2s.
	Retry time.Duration
	// OnError, if set, is called for every failed session or campaign
	// (metrics); it is not called once ctx has ended.
	OnError func(error)
	// Logger; nil discards.
	Logger *slog.Logger
}

// Run campaigns in election name (an etcd key prefix) as id and runs task
// whenever this replica is elected, until ctx ends. task's context ends
// when the term does (ctx ends or the session is lost). Once ctx ends, Run
// returns within about resignWait after task does, also when etcd cannot
// be reached; a campaign it stopped waiting for ends when cli is closed.
func Run(ctx context.Context, cli *clientv3.Client, name, id string, o Options, task func(ctx context.Context)) {
	if o.TTL <= 0 {
		o.TTL = 10
	}
	if o.Retry <= 0 {
		o.Retry = 2 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	for ctx.Err() == nil {
		sess, err := concurrency.NewSession(cli, concurrency.WithTTL(o.TTL), concurrency.WithContext(ctx))
		if err != nil {
			o.failed(ctx, "opening an etcd session", name, err)
			continue
		}
		el := concurrency.NewElection(sess, name)
		err = campaign(ctx, el, id)
		if err == nil {
			o.Logger.Info("elected", "election", name, "id", id)
			tctx, cancel := context.WithCancel(ctx)
			go func() {
				select {
				case <-sess.Done():
				case <-tctx.Done():
				}
				cancel()
			}()
			task(tctx)
			cancel()
			rctx, c := context.WithTimeout(context.Background(), resignWait)
			_ = el.Resign(rctx)
			c()
		}
		_ = sess.Close() // revokes the lease so another replica takes over at once
		switch {
		case ctx.Err() != nil:
		case err != nil:
			// A campaign etcd refused (no permission on the election's
			// prefix, say) is refused again at once: pause as after a
			// failed session rather than spin.
			o.failed(ctx, "campaigning", name, err)
		default:
			// The term ended while ctx lives: the task returned (a task
			// that fails at once would fail again) or the session was
			// lost. Another replica may take over meanwhile.
			o.Logger.Info("term ended; campaigning again", "election", name, "id", id, "after", o.Retry)
			o.pause(ctx)
		}
	}
}

// failed reports err, from step of election name, and pauses.
func (o Options) failed(ctx context.Context, step, name string, err error) {
	if ctx.Err() != nil {
		return
	}
	if o.OnError != nil {
		o.OnError(err)
	}
	o.Logger.Warn("election failed; retrying", "election", name, "step", step, "err", err, "retry", o.Retry)
	o.pause(ctx)
}

// pause waits o.Retry or until ctx ends.
func (o Options) pause(ctx context.Context) {
	t := time.NewTimer(o.Retry)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// resignWait bounds how long Run waits for etcd once ctx has ended: to
// resign a term, or for a campaign to give up.
const resignWait = 2 * time.Second

// campaign is el.Campaign(ctx, id), except that once ctx ends it waits at
// most resignWait for it: etcd's Campaign then resigns on the client's own
// context, which waits for an unreachable etcd for as long as the client
// lives. A campaign left running ends when the client is closed.
func campaign(ctx context.Context, el *concurrency.Election, id string) error {
	errc := make(chan error, 1)
	go func() { errc <- el.Campaign(ctx, id) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	select {
	case err := <-errc:
		return err
	case <-time.After(resignWait):
		return ctx.Err()
	}
}
