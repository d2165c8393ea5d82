package controlplane_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/mcpready/mcpready/agent/subscribe"
	"github.com/mcpready/mcpready/artifact"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/internal/testpki"
)

// BenchmarkConvergenceDelta is BenchmarkConvergence with production
// agents: each is an agent/subscribe Client on the incremental stream
// that verifies every resource against the pinned root and the
// TrustPolicy chain and checks its version (rollback, expiry, scope)
// before it installs and ACKs. The time is from the Apply until every
// agent has installed the new Policy version.
func BenchmarkConvergenceDelta(b *testing.B) {
	for _, n := range []int{100, 1000, 10000} {
		b.Run("agents="+strconv.Itoa(n), func(b *testing.B) {
			if n > 1000 && testing.Short() {
				b.Skip("10,000 agents skipped under -short")
			}
			benchConvergenceDelta(b, n)
		})
	}
}

func benchConvergenceDelta(b *testing.B, n int) {
	ctx, p, dialCP, adm := benchControlPlane(b)
	if _, err := adm.Apply(ctx, &mcpreadyv1.ApplyRequest{Bundle: testpki.Sign(b, testpki.Policy("org/p", "1", nil), p.Org)}); err != nil {
		b.Fatal(err)
	}
	bundles := make([][]byte, b.N)
	for i := range bundles {
		bundles[i] = testpki.Sign(b, testpki.Policy("org/p", fmt.Sprint(i+2), nil), p.Org)
	}

	var target, installed atomic.Int64
	target.Store(1)
	before := heapInUse()
	agentCtx, stopAgents := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var conns []*grpc.ClientConn
	for i := 0; i < n; i++ {
		if i%streamsPerConn == 0 {
			conns = append(conns, dialCP())
		}
		c, err := subscribe.New(subscribe.Options{Conn: conns[len(conns)-1], Root: p.Root.Public(), Node: &mcpreadyv1.Node{Id: "agent-" + strconv.Itoa(i)},
			Kinds: []artifact.Kind{artifact.KindPolicy}})
		if err != nil {
			b.Fatal(err)
		}
		wg.Add(2)
		go func() { defer wg.Done(); _ = c.Run(agentCtx) }()
		go func() {
			defer wg.Done()
			seen := int64(0)
			for {
				ch := c.Changed()
				if r := c.Snapshot().Get(artifact.KindPolicy, "org/p"); r != nil {
					if v, _ := strconv.ParseInt(r.Verified.Object.Version(), 10, 64); v > seen {
						seen = v
						if v == target.Load() {
							installed.Add(1)
						}
					}
				}
				select {
				case <-agentCtx.Done():
					return
				case <-ch:
				}
			}
		}()
	}
	waitAcked(b, &installed, int64(n), 120*time.Second)
	perAgent := float64(heapInUse()-before) / float64(n)

	b.ResetTimer()
	var total, worst time.Duration
	for i := 0; i < b.N; i++ {
		installed.Store(0)
		target.Store(int64(i) + 2)
		t0 := time.Now()
		if _, err := adm.Apply(ctx, &mcpreadyv1.ApplyRequest{Bundle: bundles[i]}); err != nil {
			b.Fatal(err)
		}
		waitAcked(b, &installed, int64(n), 60*time.Second)
		d := time.Since(t0)
		total += d
		worst = max(worst, d)
	}
	b.StopTimer()
	b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N), "converge-ms")
	b.ReportMetric(float64(worst.Microseconds())/1000, "max-ms")
	b.ReportMetric(perAgent, "bytes/agent")
	stopAgents()
	for _, c := range conns {
		c.Close()
	}
	wg.Wait()
}
