package decide

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/mcpready/mcpready/agent/access"
	"github.com/mcpready/mcpready/agent/config"
	"github.com/mcpready/mcpready/internal/oauthtest"
)

// accessBench is benchInputs with the 50 search members behind OAuth
// upstreams whose tokens (real JWTs from oauthtest) are cached: one
// upstream for all, or one per member (distinct), and the Guard that
// checks them for every candidate.
func accessBench(b *testing.B, distinct bool) (*Snapshot, Request, func() AccessGuard) {
	as := oauthtest.Start(b, oauthtest.Options{Clients: []oauthtest.Client{{ID: "agent", Secret: "s"}}})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	url := "http://" + ln.Addr().String() + "/mcp"
	hs := &httptest.Server{Listener: ln, Config: &http.Server{Handler: as.Protect(oauthtest.Resource{URL: url}, http.NotFoundHandler())}}
	hs.Start()
	b.Cleanup(hs.Close)
	secret := filepath.Join(b.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("s"), 0o600); err != nil {
		b.Fatal(err)
	}
	c := access.New(access.Options{})
	ups := map[string]*access.Upstream{}
	in := benchInputs()
	var shared *access.Upstream
	for i := 0; i < 50; i++ {
		e := in.Entries[fmt.Sprintf("search-%02d", i)]
		e.Identity.Endpoint = url
		if shared != nil && !distinct {
			ups[e.Identity.ServerName] = shared
			continue
		}
		up := &access.Upstream{Name: fmt.Sprint("bench", i), URL: url, OAuth: config.OAuth{Grant: config.GrantClientCredentials, ClientID: "agent", ClientSecretFile: secret, Scopes: []string{"docs:read"}}}
		if _, err := c.Token(context.Background(), access.Principal{}, up); err != nil {
			b.Fatal(err)
		}
		ups[e.Identity.ServerName], shared = up, up
	}
	s := snap(b, in)
	req := baseReq()
	req.Tool = "search"
	resolve := func(server string) (*access.Upstream, bool) {
		up, ok := ups[server]
		return up, ok
	}
	// A Guard serves one decision: each op gets one and releases it, as in
	// the pipeline.
	guard := func() AccessGuard { return c.Guard(access.Principal{Name: "dev-client"}, resolve) }
	req.Access = guard()
	if d := s.Decide(req, nil); d.Refusal != nil || len(d.Routes) != 4 {
		b.Fatalf("setup: refusal %v, %d routes", d.Refusal, len(d.Routes))
	}
	req.Access = nil
	return s, req, guard
}

// BenchmarkDecideAccess: BenchmarkDecide's decision over the same 50-member
// class, without (baseline) and with the per-call access check of a cached
// token for every candidate, the members on one OAuth upstream (access) or
// each on its own (access-distinct); the difference of the p99s is the
// check's cost (target < 5µs).
func BenchmarkDecideAccess(b *testing.B) {
	for _, v := range []struct {
		name             string
		access, distinct bool
	}{{"baseline", false, false}, {"access", true, false}, {"access-distinct", true, true}} {
		s, r, guard := accessBench(b, v.distinct)
		if !v.access {
			guard = func() AccessGuard { return nil }
		}
		b.Run(v.name, func(b *testing.B) {
			timeSerial(b, func() {
				r.Access = guard()
				_ = s.Decide(r, nil)
				if g, ok := r.Access.(*access.Guard); ok {
					g.Release() // as the pipeline does once the decision is made
				}
			})
		})
	}
}

// timeSerial runs op b.N times, timing each, and reports CPU per op and
// the p50/p99 of the samples.
func timeSerial(b *testing.B, op func()) {
	samples := make([]time.Duration, 0, min(b.N, maxSamples))
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := processCPU()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		op()
		if el := time.Since(start); len(samples) < maxSamples {
			samples = append(samples, el)
		}
	}
	b.StopTimer()
	reportCPU(b, cpu0)
	reportPercentiles(b, samples)
}
