package controlplane_test

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/mcpready/mcpready/artifact"
	"github.com/mcpready/mcpready/controlplane"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/internal/cprun"
	"github.com/mcpready/mcpready/internal/testpki"
)

// streamsPerConn is how many agent streams share one client connection.
const streamsPerConn = 100

// BenchmarkConvergence measures the time from an Apply (through the Admin
// API, verified and written to embedded etcd) until every connected agent
// has ACKed the new version over its own state-of-the-world stream
// (loopback TCP), with the default 100 ms debounce. bytes/agent is the heap
// and stack growth per connected agent, client and server side together.
func BenchmarkConvergence(b *testing.B) {
	for _, n := range []int{100, 1000, 10000} {
		b.Run("agents="+strconv.Itoa(n), func(b *testing.B) {
			if n > 1000 && testing.Short() {
				b.Skip("10,000 agents skipped under -short")
			}
			benchConvergence(b, n)
		})
	}
}

func benchConvergence(b *testing.B, n int) {
	ctx, p, dial, adm := benchControlPlane(b)
	r, err := adm.Apply(ctx, &mcpreadyv1.ApplyRequest{Bundle: testpki.Sign(b, testpki.Policy("org/p", "0", nil), p.Org)})
	if err != nil {
		b.Fatal(err)
	}
	// Pre-sign the versions to apply so signing is not measured.
	bundles := make([][]byte, b.N)
	for i := range bundles {
		bundles[i] = testpki.Sign(b, testpki.Policy("org/p", fmt.Sprint(i+1), nil), p.Org)
	}

	var target, acked atomic.Int64
	target.Store(r.Revision)
	before := heapInUse()
	agentCtx, stopAgents := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var conns []*grpc.ClientConn
	for i := 0; i < n; i++ {
		if i%streamsPerConn == 0 {
			conns = append(conns, dial())
		}
		st, err := mcpreadyv1.NewDiscoveryServiceClient(conns[len(conns)-1]).StreamResources(agentCtx)
		if err != nil {
			b.Fatal(err)
		}
		if err := st.Send(&mcpreadyv1.StreamResourcesRequest{Node: &mcpreadyv1.Node{Id: "agent-" + strconv.Itoa(i)}, TypeUrl: artifact.KindPolicy.TypeURL()}); err != nil {
			b.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				resp, err := st.Recv()
				if err != nil {
					return
				}
				if err := st.Send(&mcpreadyv1.StreamResourcesRequest{TypeUrl: resp.TypeUrl, VersionInfo: resp.VersionInfo, ResponseNonce: resp.Nonce}); err != nil {
					return
				}
				for _, res := range resp.Resources {
					if res.Name == "org/p" && res.Version == strconv.FormatInt(target.Load(), 10) {
						acked.Add(1)
					}
				}
			}
		}()
	}
	waitAcked(b, &acked, int64(n), 60*time.Second)
	perAgent := float64(heapInUse()-before) / float64(n)

	b.ResetTimer()
	var total, applyTotal, worst time.Duration
	for i := 0; i < b.N; i++ {
		acked.Store(0)
		target.Store(r.Revision + int64(i) + 1)
		t0 := time.Now()
		if _, err := adm.Apply(ctx, &mcpreadyv1.ApplyRequest{Bundle: bundles[i]}); err != nil {
			b.Fatal(err)
		}
		applyTotal += time.Since(t0)
		waitAcked(b, &acked, int64(n), 60*time.Second)
		d := time.Since(t0)
		total += d
		worst = max(worst, d)
	}
	b.StopTimer()
	b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N), "converge-ms")
	b.ReportMetric(float64(worst.Microseconds())/1000, "max-ms")
	b.ReportMetric(float64(applyTotal.Microseconds())/1000/float64(b.N), "apply-ms")
	b.ReportMetric(perAgent, "bytes/agent")
	stopAgents()
	for _, c := range conns {
		c.Close()
	}
	wg.Wait()
}

func waitAcked(b *testing.B, acked *atomic.Int64, n int64, limit time.Duration) {
	deadline := time.Now().Add(limit)
	for acked.Load() < n {
		if time.Now().After(deadline) {
			b.Fatalf("only %d of %d agents ACKed within %s", acked.Load(), n, limit)
		}
		time.Sleep(200 * time.Microsecond)
	}
}

func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse + m.StackInuse
}

// benchControlPlane starts a control plane (embedded etcd, loopback, no
// metrics listener) for one benchmark and applies the test TrustPolicy. It
// returns a context that ends with the benchmark, the PKI, a dialler for
// agent connections and an Admin client; all are closed when b ends.
func benchControlPlane(b *testing.B) (context.Context, *testpki.PKI, func() *grpc.ClientConn, mcpreadyv1.AdminServiceClient) {
	p := testpki.New(b)
	s := cprun.Start(b, controlplane.Options{Listen: "127.0.0.1:0", MetricsListen: "off", DataDir: b.TempDir(), Root: p.Root.Public(), Logger: quiet})
	ctx := b.Context()
	dial := func() *grpc.ClientConn {
		c, err := grpc.NewClient(s.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			b.Fatal(err)
		}
		return c
	}
	adminConn := dial()
	b.Cleanup(func() { adminConn.Close() })
	adm := mcpreadyv1.NewAdminServiceClient(adminConn)
	if _, err := adm.Apply(ctx, &mcpreadyv1.ApplyRequest{Bundle: p.TrustPolicy}); err != nil {
		b.Fatal(err)
	}
	return ctx, p, dial, adm
}
