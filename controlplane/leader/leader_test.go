package leader

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/mcpready/mcpready/internal/etcdtest"
)

// TestOneLeaderAtATimeAndTakeover: of three candidates exactly one runs
// the task; when its term ends (its context is cancelled, as when the
// replica stops) another takes over, and never two at once.
func TestOneLeaderAtATimeAndTakeover(t *testing.T) {
	_, m := etcdtest.Etcd(t)
	var running, maxRunning atomic.Int32
	terms := make(chan string, 10)
	var wg sync.WaitGroup
	cancels := map[string]context.CancelFunc{}
	for _, id := range []string{"a", "b", "c"} {
		ctx, cancel := context.WithCancel(context.Background())
		cancels[id] = cancel
		c := etcdtest.Client(t, m.ClientURL)
		wg.Go(func() {
			Run(ctx, c, "/test/elections/x", id, Options{TTL: 2}, func(ctx context.Context) {
				n := running.Add(1)
				if n > maxRunning.Load() {
					maxRunning.Store(n)
				}
				terms <- id
				<-ctx.Done()
				running.Add(-1)
			})
		})
	}
	first := <-terms
	select {
	case id := <-terms:
		t.Fatalf("%s elected while %s leads", id, first)
	case <-time.After(500 * time.Millisecond):
	}
	cancels[first]()
	select {
	case second := <-terms:
		if second == first {
			t.Fatalf("%s re-elected after stopping", first)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no takeover")
	}
	for _, c := range cancels {
		c()
	}
	wg.Wait()
	if maxRunning.Load() != 1 {
		t.Fatalf("%d leaders at once", maxRunning.Load())
	}
}

// TestStopsWhileEtcdIsGone: a candidate waiting in the campaign while
// another leads, whose etcd then goes away, must still stop when its
// context ends. etcd's Campaign resigns on the client's own context when
// the campaign's ends, and that waits for etcd for as long as the client
// lives: before, Run never returned, and a control plane that lost etcd
// hung on shutdown (its client is closed only after Run returns).
func TestStopsWhileEtcdIsGone(t *testing.T) {
	cli, m := etcdtest.Etcd(t)
	leading := make(chan struct{})
	ctxA, cancelA := context.WithCancel(context.Background())
	defer cancelA()
	go Run(ctxA, etcdtest.Client(t, m.ClientURL), "/test/elections/y", "a", Options{TTL: 5}, func(ctx context.Context) {
		close(leading)
		<-ctx.Done()
	})
	<-leading
	ctxB, cancelB := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		Run(ctxB, etcdtest.Client(t, m.ClientURL), "/test/elections/y", "b", Options{TTL: 5}, func(context.Context) {
			t.Error("b elected while a leads")
		})
		close(done)
	}()
	// b is waiting in its campaign once its candidacy is in etcd beside a's.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		r, err := cli.Get(context.Background(), "/test/elections/y", clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err == nil && r.Count == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("b never campaigned: %v", err)
		}
	}
	m.Close()
	cancelB()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its context ended, etcd gone")
	}
}

// TestRefusedCampaignPausesAndReports: a replica whose etcd user may not
// write the election's prefix has every campaign refused. Run reports each
// refusal (OnError) and pauses Retry before the next, rather than opening a
// session and campaigning again in a tight loop that nothing counts.
func TestRefusedCampaignPausesAndReports(t *testing.T) {
	root, m := etcdtest.Etcd(t)
	ctx := context.Background()
	for _, step := range []func() error{
		func() error { _, err := root.RoleAdd(ctx, "root"); return err },
		func() error { _, err := root.UserAdd(ctx, "root", "root-password"); return err },
		func() error { _, err := root.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := root.RoleAdd(ctx, "elsewhere"); return err },
		func() error {
			_, err := root.RoleGrantPermission(ctx, "elsewhere", "/other/", clientv3.GetPrefixRangeEnd("/other/"), clientv3.PermissionType(clientv3.PermReadWrite))
			return err
		},
		func() error { _, err := root.UserAdd(ctx, "replica", "replica-password"); return err },
		func() error { _, err := root.UserGrantRole(ctx, "replica", "elsewhere"); return err },
		func() error { _, err := root.AuthEnable(ctx); return err },
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{m.ClientURL}, Username: "replica", Password: "replica-password", DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })

	var refused atomic.Int32
	var elected atomic.Bool
	// Two seconds: under -race on a loaded machine one campaign's refusal
	// alone took most of one second (1 reported, once in CI).
	runCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	Run(runCtx, cli, "/test/elections/x", "a", Options{TTL: 2, Retry: 200 * time.Millisecond, OnError: func(error) { refused.Add(1) }},
		func(context.Context) { elected.Store(true) })
	if elected.Load() {
		t.Fatal("elected without permission on the election's prefix")
	}
	// Two seconds, a pause of 200 ms after each refusal: about ten.
	if n := refused.Load(); n < 2 || n > 16 {
		t.Fatalf("%d refused campaigns reported in two seconds, want 2 to 16", n)
	}
}

// TestEarlyTermPauses: a task that returns at once (it fails on start, say)
// ends its term; the replica resigns and campaigns again only after Retry,
// instead of winning, failing and resigning in a tight loop of etcd writes.
func TestEarlyTermPauses(t *testing.T) {
	_, m := etcdtest.Etcd(t)
	cli := etcdtest.Client(t, m.ClientURL)
	var terms atomic.Int32
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	Run(ctx, cli, "/test/elections/x", "a", Options{TTL: 2, Retry: 200 * time.Millisecond}, func(context.Context) { terms.Add(1) })
	// One second, a pause of 200 ms after each term: about five.
	if n := terms.Load(); n < 2 || n > 8 {
		t.Fatalf("%d terms in one second, want 2 to 8", n)
	}
}
