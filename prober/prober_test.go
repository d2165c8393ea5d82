package prober_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/protobuf/types/known/durationpb"

	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/probe"
	"github.com/mcpready/mcpready/prober"
	"github.com/mcpready/mcpready/sign"
)

func TestRound(t *testing.T) {
	s := mcp.NewServer(&mcp.Implementation{Name: "com.example/docs", Version: "1"}, nil)
	ok := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	defer ok.Close()
	billing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusPaymentRequired) }))
	defer billing.Close()
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	var mu sync.Mutex
	var applied [][]byte
	reg := prometheus.NewRegistry()
	p, err := prober.New(prober.Options{
		Targets: func(context.Context) ([]probe.Target, error) {
			return []probe.Target{{URL: ok.URL, Options: probe.Options{Server: "com.example/docs"}},
				{URL: billing.URL, Options: probe.Options{Server: "com.example/paid"}}, {URL: "ftp://nope/"}}, nil
		},
		Apply: func(_ context.Context, b []byte) error {
			mu.Lock()
			defer mu.Unlock()
			applied = append(applied, b)
			return nil
		},
		Signer: key, Observer: probe.EvidenceOptions{Observer: "org/prober"}, Registerer: reg,
	})
	if err != nil {
		t.Fatal(err)
	}
	reports, err := p.Round(context.Background())
	if err != nil || len(reports) != 3 || reports[2] != nil {
		t.Fatalf("%v %v", reports, err)
	}
	if len(applied) != 2 {
		t.Fatalf("%d evidence applied, want 2 (the unprobeable URL gives none)", len(applied))
	}
	names := map[string]bool{}
	for _, b := range applied {
		v, err := sign.VerifyWithKey(b, key.Public())
		if err != nil {
			t.Fatal(err)
		}
		if v.Object.Spec.(*mcpreadyv1.Evidence).GetMethod() != mcpreadyv1.EvidenceMethod_EVIDENCE_METHOD_SYNTHETIC {
			t.Fatal("not synthetic")
		}
		names[v.Object.Metadata.Name] = true
	}
	if !names["probe/com.example/docs"] || !names["probe/com.example/paid"] {
		t.Fatalf("names %v", names)
	}
	if n := testutil.ToFloat64(p.FailedCounter().WithLabelValues("access")); n != 1 {
		t.Errorf("access failures counted %v, want 1", n)
	}
}

func TestInterval(t *testing.T) {
	d := func(x time.Duration) *durationpb.Duration { return durationpb.New(x) }
	for _, c := range []struct {
		in   map[string]*durationpb.Duration
		want time.Duration
	}{
		{nil, prober.DefaultInterval},
		{map[string]*durationpb.Duration{"reachability": d(10 * time.Minute), "access": d(2 * time.Hour)}, 5 * time.Minute},
		{map[string]*durationpb.Duration{"reachability": d(30 * time.Second)}, prober.MinInterval},
		{map[string]*durationpb.Duration{"x": d(0)}, prober.DefaultInterval},
	} {
		if got := prober.Interval(c.in); got != c.want {
			t.Errorf("%v: %v, want %v", c.in, got, c.want)
		}
	}
}
