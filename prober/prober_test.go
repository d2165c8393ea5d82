package prober_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/mcpready/mcpready/agent/access"
	"github.com/mcpready/mcpready/agent/config"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/internal/oauthtest"
	"github.com/mcpready/mcpready/internal/safebuf"
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

// clock is a settable time source.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

// TestMetrics: probes run, funnels stopped per layer, and the evidence age
// per subject — seconds since the last applied Evidence, +Inf for a target
// that has none, unchanged by a refused Apply, and dropped with its target.
func TestMetrics(t *testing.T) {
	s := mcp.NewServer(&mcp.Implementation{Name: "com.example/docs", Version: "1"}, nil)
	ok := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	defer ok.Close()
	billing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusPaymentRequired) }))
	defer billing.Close()
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	clk := &clock{t: time.Date(2026, 9, 14, 9, 0, 0, 0, time.UTC)}
	all := []probe.Target{{URL: ok.URL, Options: probe.Options{Server: "com.example/docs"}},
		{URL: billing.URL, Options: probe.Options{Server: "com.example/paid"}}, {URL: "ftp://nope/"}}
	targets, refusePaid := all, false
	reg := prometheus.NewRegistry()
	p, err := prober.New(prober.Options{
		Targets: func(context.Context) ([]probe.Target, error) { return targets, nil },
		Apply: func(_ context.Context, b []byte) error {
			if v, _ := sign.VerifyWithKey(b, key.Public()); refusePaid && v.Object.Metadata.Name == "probe/com.example/paid" {
				return errors.New("refused")
			}
			return nil
		},
		Signer: key, Observer: probe.EvidenceOptions{Observer: "org/prober"}, Registerer: reg, Now: clk.now,
		// No target calls this canary's tool: it is not called, and its
		// series stays at +Inf, so the alert on evidence age fires.
		Canaries: []prober.Canary{{Server: "com.example/docs", Tool: "lookup", InputClass: "bulk", Arguments: map[string]any{}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	expect := func(want string) {
		t.Helper()
		if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "mcpready_prober_evidence_age_seconds",
			"mcpready_prober_probes_total", "mcpready_prober_layer_not_ready_total"); err != nil {
			t.Error(err)
		}
	}
	const head = `# HELP mcpready_prober_evidence_age_seconds Seconds since this prober last applied Evidence for the subject (+Inf: none since it started), one series per target of the latest round.
# TYPE mcpready_prober_evidence_age_seconds gauge
`
	const counters = `# HELP mcpready_prober_layer_not_ready_total Probes whose funnel stopped at a layer, by layer.
# TYPE mcpready_prober_layer_not_ready_total counter
mcpready_prober_layer_not_ready_total{layer="access"} %d
# HELP mcpready_prober_probes_total Probes run: one per registry endpoint and one per canary.
# TYPE mcpready_prober_probes_total counter
mcpready_prober_probes_total %d
`
	if _, err := p.Round(context.Background()); err != nil {
		t.Fatal(err)
	}
	clk.add(90 * time.Second)
	expect(head + `mcpready_prober_evidence_age_seconds{subject="com.example/docs"} 90
mcpready_prober_evidence_age_seconds{subject="com.example/docs/input-class/bulk"} +Inf
mcpready_prober_evidence_age_seconds{subject="com.example/paid"} 90
mcpready_prober_evidence_age_seconds{subject="ftp://nope/"} +Inf
` + fmt.Sprintf(counters, 1, 2))

	refusePaid = true
	if _, err := p.Round(context.Background()); err == nil {
		t.Fatal("a refused Apply is not reported")
	}
	clk.add(30 * time.Second)
	expect(head + `mcpready_prober_evidence_age_seconds{subject="com.example/docs"} 30
mcpready_prober_evidence_age_seconds{subject="com.example/docs/input-class/bulk"} +Inf
mcpready_prober_evidence_age_seconds{subject="com.example/paid"} 120
mcpready_prober_evidence_age_seconds{subject="ftp://nope/"} +Inf
` + fmt.Sprintf(counters, 2, 4))

	if err := testutil.GatherAndCompare(reg, strings.NewReader(`# HELP mcpready_prober_evidence_total Evidence artifacts produced, by result (applied, refused).
# TYPE mcpready_prober_evidence_total counter
mcpready_prober_evidence_total{result="applied"} 3
mcpready_prober_evidence_total{result="refused"} 1
`), "mcpready_prober_evidence_total"); err != nil {
		t.Error(err)
	}
	// The others left the registry: their series go. Once a target calls
	// the canary's tool it is probed, and its series (named as its
	// Evidence is) ages from then.
	docs := all[0]
	docs.Options.ReadOnly = []string{"lookup"}
	targets = []probe.Target{docs}
	if _, err := p.Round(context.Background()); err != nil {
		t.Fatal(err)
	}
	expect(head + `mcpready_prober_evidence_age_seconds{subject="com.example/docs"} 0
mcpready_prober_evidence_age_seconds{subject="com.example/docs/input-class/bulk"} 0
` + fmt.Sprintf(counters, 2, 6))
}

// TestJitter runs Run with a seeded jitter source and a recording wait:
// every wait lies in [interval, interval*1.1], and the waits are spread
// across that range, not bunched at one end.
func TestJitter(t *testing.T) {
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	src := mrand.New(mrand.NewPCG(1, 2))
	const rounds = 200
	every := 5 * time.Minute // half the shortest maximum age below
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var waits []time.Duration
	roundsRun := 0
	p, err := prober.New(prober.Options{
		Targets: func(context.Context) ([]probe.Target, error) { roundsRun++; return nil, nil },
		MaxAge: func(context.Context) (map[string]*durationpb.Duration, error) {
			return map[string]*durationpb.Duration{"reachability": durationpb.New(10 * time.Minute)}, nil
		},
		Apply:  func(context.Context, []byte) error { return nil },
		Signer: key, Observer: probe.EvidenceOptions{Observer: "org/prober"},
		Jitter: func(n int64) int64 { return src.Int64N(n + 1) },
		After: func(d time.Duration) <-chan time.Time {
			waits = append(waits, d)
			if len(waits) == rounds {
				cancel()
				return nil // never fires: Run must return on ctx
			}
			c := make(chan time.Time, 1)
			c <- time.Time{}
			return c
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Run(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run: %v", err)
	}
	if len(waits) != rounds || roundsRun != rounds {
		t.Fatalf("%d waits, %d rounds, want %d", len(waits), roundsRun, rounds)
	}
	lo, hi := waits[0], waits[0]
	distinct := map[time.Duration]bool{}
	buckets := make([]int, 10) // tenths of the jitter range
	for _, w := range waits {
		if w < every || w > every+every/10 {
			t.Fatalf("wait %v outside [%v, %v]", w, every, every+every/10)
		}
		lo, hi = min(lo, w), max(hi, w)
		distinct[w] = true
		buckets[min(int((w-every)*100/every), 9)]++
	}
	if hi-lo < every/10*9/10 || len(distinct) < rounds*9/10 {
		t.Errorf("waits not spread: %v to %v, %d distinct", lo, hi, len(distinct))
	}
	for i, n := range buckets {
		if n == 0 {
			t.Errorf("no wait in the %d%%-%d%% jitter band: %v", i, i+1, buckets)
		}
	}
}

// TestZeroJitterIsBounded: the zero Options (runtime-seeded jitter, real
// time.After) also keeps each wait in [interval, interval*1.1].
func TestZeroJitterIsBounded(t *testing.T) {
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var waits []time.Duration
	p, err := prober.New(prober.Options{
		Targets: func(context.Context) ([]probe.Target, error) { return nil, nil },
		Apply:   func(context.Context, []byte) error { return nil },
		Signer:  key, Observer: probe.EvidenceOptions{Observer: "org/prober"},
		After: func(d time.Duration) <-chan time.Time {
			if waits = append(waits, d); len(waits) == 50 {
				cancel()
			}
			return time.After(0)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	_ = p.Run(ctx)
	for _, w := range waits {
		if w < prober.DefaultInterval || w > prober.DefaultInterval*11/10 {
			t.Fatalf("wait %v outside [1h, 1h6m]", w)
		}
	}
}

// TestConcurrencyBounded probes 12 real go-sdk endpoints with Concurrency
// 3. Each funnel's first step (the registry lookup) blocks until the test
// releases it: exactly 3 funnels reach it, no fourth starts while they are
// held, and once released all 12 complete.
func TestConcurrencyBounded(t *testing.T) {
	s := mcp.NewServer(&mcp.Implementation{Name: "com.example/s", Version: "1"}, nil)
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: true}))
	defer ts.Close()
	started, release := make(chan string, 12), make(chan struct{})
	registered := func(ctx context.Context, server string) (bool, error) {
		started <- server
		select {
		case <-release:
			return true, nil
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
	targets := make([]probe.Target, 12)
	for i := range targets {
		targets[i] = probe.Target{URL: fmt.Sprintf("%s/mcp/%d", ts.URL, i), Options: probe.Options{Server: fmt.Sprintf("com.example/s%d", i), Registered: registered}}
	}
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	var applied atomic.Int64
	p, err := prober.New(prober.Options{
		Targets: func(context.Context) ([]probe.Target, error) { return targets, nil },
		Apply:   func(context.Context, []byte) error { applied.Add(1); return nil },
		Signer:  key, Observer: probe.EvidenceOptions{Observer: "org/prober"}, Concurrency: 3,
	})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := p.Round(context.Background()); done <- err }()
	for range 3 {
		select {
		case <-started:
		case <-time.After(10 * time.Second):
			t.Fatal("fewer than 3 funnels started")
		}
	}
	select {
	case s := <-started:
		t.Fatalf("a fourth funnel (%s) started while 3 were in flight", s)
	case <-time.After(200 * time.Millisecond):
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if len(started) != 9 || applied.Load() != 12 {
		t.Fatalf("%d more funnels started, %d applied; want 9 and 12", len(started), applied.Load())
	}
}

// A server's token file gives its probes a bearer token, read at every
// round: an endpoint that wants it is ready at the access layer and the
// Evidence says bearer-token. A target whose file cannot be read is not
// probed (a keyless run would only report auth-required), is logged
// without the token, and its evidence-age series stays.
func TestTokenFiles(t *testing.T) {
	s := mcp.NewServer(&mcp.Implementation{Name: "com.example/docs", Version: "1"}, nil)
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	var presented, want atomic.Value
	want.Store("Bearer s3cret-token")
	authd := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		presented.Store(r.Header.Get("Authorization"))
		if r.Header.Get("Authorization") != want.Load() {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	defer authd.Close()
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "docs.token")
	if err := os.WriteFile(tokenFile, []byte("s3cret-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	var logs safebuf.Buffer
	var applied []*mcpreadyv1.Evidence
	reg := prometheus.NewRegistry()
	p, err := prober.New(prober.Options{
		Targets: func(context.Context) ([]probe.Target, error) {
			return []probe.Target{{URL: authd.URL, Options: probe.Options{Server: "com.example/docs"}},
				{URL: authd.URL + "/other", Options: probe.Options{Server: "com.example/other"}}}, nil
		},
		TokenFiles: map[string]string{"com.example/docs": tokenFile, "com.example/other": filepath.Join(dir, "missing.token")},
		Apply:      keep(key, &applied),
		Signer:     key, Observer: probe.EvidenceOptions{Observer: "org/prober"}, Registerer: reg,
		Logger: slog.New(slog.NewTextHandler(&logs, nil)), Now: (&clock{t: time.Date(2026, 9, 14, 9, 0, 0, 0, time.UTC)}).now,
	})
	if err != nil {
		t.Fatal(err)
	}
	reports, err := p.Round(context.Background())
	if err != nil || len(reports) != 1 {
		t.Fatalf("%d reports, %v; want the one target with a usable token file", len(reports), err)
	}
	if l := reports[0].Layer(probe.LayerAccess); l.Status != probe.Ready || !reports[0].BearerPresented || presented.Load() != "Bearer s3cret-token" {
		t.Fatalf("access layer %+v, bearer presented %v", l, reports[0].BearerPresented)
	}
	if len(applied) != 1 || applied[0].GetAuthClass() != "bearer-token" {
		t.Fatalf("evidence %v", applied)
	}
	if !strings.Contains(logs.String(), "missing.token") || strings.Contains(logs.String(), "s3cret") {
		t.Fatalf("want the unreadable file named and no token in the logs:\n%s", logs.String())
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`# HELP mcpready_prober_evidence_age_seconds Seconds since this prober last applied Evidence for the subject (+Inf: none since it started), one series per target of the latest round.
# TYPE mcpready_prober_evidence_age_seconds gauge
mcpready_prober_evidence_age_seconds{subject="com.example/docs"} 0
mcpready_prober_evidence_age_seconds{subject="com.example/other"} +Inf
`), "mcpready_prober_evidence_age_seconds"); err != nil {
		t.Error(err)
	}
	// The file is read at every round: a rotated token is presented from
	// the next one.
	want.Store("Bearer rotated-token")
	if err := os.WriteFile(tokenFile, []byte("rotated-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	reports, err = p.Round(context.Background())
	if err != nil || len(reports) != 1 || reports[0].Layer(probe.LayerAccess).Status != probe.Ready || presented.Load() != "Bearer rotated-token" {
		t.Fatalf("after rotation: %d reports, %v, presented %v", len(reports), err, presented.Load())
	}
}

// keep is an Apply that verifies each bundle with key and appends its
// Evidence to applied.
func keep(key ed25519.PrivateKey, applied *[]*mcpreadyv1.Evidence) func(context.Context, []byte) error {
	return func(_ context.Context, b []byte) error {
		v, err := sign.VerifyWithKey(b, key.Public())
		if err != nil {
			return err
		}
		*applied = append(*applied, v.Object.Spec.(*mcpreadyv1.Evidence))
		return nil
	}
}

// protected serves a go-sdk MCP server at /mcp as a resource of as, and
// records the Authorization header of each request it gets.
func protected(t *testing.T, as *oauthtest.Server, presented *atomic.Value) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := "http://" + ln.Addr().String() + "/mcp"
	s := mcp.NewServer(&mcp.Implementation{Name: "com.example/docs", Version: "1"}, nil)
	h := as.Protect(oauthtest.Resource{URL: u, Scopes: []string{"read"}}, mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil))
	hs := &httptest.Server{Listener: ln, Config: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a := r.Header.Get("Authorization"); a != "" {
			presented.Store(a)
		}
		h.ServeHTTP(w, r)
	})}}
	hs.Start()
	t.Cleanup(hs.Close)
	return u
}

// A server's OAuth settings give its probes the token an agent would get
// with them, from a real authorization server, cached across rounds: the
// endpoint is ready at the access layer and the Evidence's auth class is
// oauth:client_credentials, so it counts for the agents' calls made with
// that grant. A target whose token cannot be had is not probed and is
// logged without any secret.
func TestOAuthCredentials(t *testing.T) {
	as := oauthtest.Start(t, oauthtest.Options{Clients: []oauthtest.Client{{ID: "prober", Secret: "prober-s3cret"}}})
	var presented atomic.Value
	docs, other := protected(t, as, &presented), protected(t, as, &presented)
	dir := t.TempDir()
	secret := func(name, v string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(v+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := config.OAuth{Grant: config.GrantClientCredentials, ClientID: "prober", ClientSecretFile: secret("good", "prober-s3cret"), Scopes: []string{"read"}}
	bad := good
	bad.ClientSecretFile = secret("bad", "wr0ng-s3cret")
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	var logs safebuf.Buffer
	var applied []*mcpreadyv1.Evidence
	o := prober.Options{
		Targets: func(context.Context) ([]probe.Target, error) {
			return []probe.Target{{URL: docs, Options: probe.Options{Server: "com.example/docs"}},
				{URL: other, Options: probe.Options{Server: "com.example/other"}}}, nil
		},
		OAuth:  map[string]config.OAuth{"com.example/docs": good, "com.example/other": bad},
		Apply:  keep(key, &applied),
		Signer: key, Observer: probe.EvidenceOptions{Observer: "org/prober"},
		Logger: slog.New(slog.NewTextHandler(&logs, nil)),
	}
	p, err := prober.New(o)
	if err != nil {
		t.Fatal(err)
	}
	for round := range 2 {
		reports, err := p.Round(context.Background())
		if err != nil || len(reports) != 1 || reports[0].URL != docs {
			t.Fatalf("round %d: %d reports, %v; want the one target with a usable token", round, len(reports), err)
		}
		if l := reports[0].Layer(probe.LayerAccess); l.Status != probe.Ready || l.Reason != "token-accepted" || reports[0].AuthClass != "oauth:client_credentials" {
			t.Fatalf("round %d: access layer %+v, auth class %q", round, l, reports[0].AuthClass)
		}
	}
	if n := as.Issued(); n != 1 {
		t.Fatalf("tokens issued = %d, want 1 (cached across rounds)", n)
	}
	if len(applied) != 2 || applied[0].GetAuthClass() != "oauth:client_credentials" {
		t.Fatalf("evidence %v", applied)
	}
	tok, _ := presented.Load().(string)
	if !strings.HasPrefix(tok, "Bearer ") {
		t.Fatalf("presented %q, want a bearer token", tok)
	}
	l := logs.String()
	if !strings.Contains(l, "no OAuth token") || !strings.Contains(l, other) {
		t.Fatalf("want the endpoint without a token named in the logs:\n%s", l)
	}
	for _, s := range []string{"s3cret", strings.TrimPrefix(tok, "Bearer ")} {
		if strings.Contains(l, s) {
			t.Fatalf("logs hold a secret:\n%s", l)
		}
	}

	// No token is asked for an endpoint it could not be presented to.
	issued := as.Issued()
	if _, err := prober.OAuthCredential(context.Background(), access.New(access.Options{}), "com.example/docs", "http://mcp.example/mcp", good); !errors.Is(err, probe.ErrURL) || as.Issued() != issued {
		t.Errorf("plain http off loopback: %v, %d tokens issued", err, as.Issued()-issued)
	}

	// Grants that act for someone else, and a server with two
	// credentials, are refused.
	for _, g := range []string{config.GrantTokenExchange, config.GrantAuthorizationCode} {
		x := o
		x.OAuth = map[string]config.OAuth{"com.example/docs": {Grant: g}}
		if _, err := prober.New(x); !errors.Is(err, prober.ErrGrant) {
			t.Errorf("grant %s: %v, want ErrGrant", g, err)
		}
	}
	x := o
	x.TokenFiles = map[string]string{"com.example/docs": secret("token", "t")}
	if _, err := prober.New(x); !errors.Is(err, prober.ErrGrant) {
		t.Errorf("token file and OAuth: %v, want ErrGrant", err)
	}
}

// OAuthHTTP is the client the prober reaches authorization servers with:
// an https authorization server under a private PKI gives tokens only
// through a client that trusts it.
func TestOAuthHTTP(t *testing.T) {
	as := oauthtest.Start(t, oauthtest.Options{TLS: true, Clients: []oauthtest.Client{{ID: "prober", Secret: "prober-s3cret"}}})
	var presented atomic.Value
	docs := protected(t, as, &presented)
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("prober-s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	roots := x509.NewCertPool()
	roots.AddCert(as.Certificate())
	for _, trusted := range []bool{false, true} {
		var applied []*mcpreadyv1.Evidence
		o := prober.Options{
			Targets: func(context.Context) ([]probe.Target, error) {
				return []probe.Target{{URL: docs, Options: probe.Options{Server: "com.example/docs"}}}, nil
			},
			OAuth: map[string]config.OAuth{"com.example/docs": {Grant: config.GrantClientCredentials, ClientID: "prober", ClientSecretFile: secret, Scopes: []string{"read"}}},
			Apply: keep(key, &applied), Signer: key, Observer: probe.EvidenceOptions{Observer: "org/prober"},
		}
		if trusted {
			o.OAuthHTTP = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
		}
		p, err := prober.New(o)
		if err != nil {
			t.Fatal(err)
		}
		reports, _ := p.Round(context.Background())
		if got := len(reports) == 1 && reports[0].AuthClass == "oauth:client_credentials"; got != trusted {
			t.Fatalf("authorization server trusted %v: %d reports", trusted, len(reports))
		}
	}
}

// A short-lived token (20 s, under the access layer's 30 s refresh margin)
// is reused across back-to-back rounds, as a long-lived one is
// (TestOAuthCredentials): the access layer renews it at half its life
// (access.TestShortLivedTokenReused). Before, every request of the funnel
// asked for a new one: 28 tokens for two rounds.
func TestShortLivedTokenReused(t *testing.T) {
	as := oauthtest.Start(t, oauthtest.Options{Lifetime: 20 * time.Second, Clients: []oauthtest.Client{{ID: "prober", Secret: "prober-s3cret"}}})
	var presented atomic.Value
	docs := protected(t, as, &presented)
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("prober-s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	var applied []*mcpreadyv1.Evidence
	p, err := prober.New(prober.Options{
		Targets: func(context.Context) ([]probe.Target, error) {
			return []probe.Target{{URL: docs, Options: probe.Options{Server: "com.example/docs"}}}, nil
		},
		OAuth: map[string]config.OAuth{"com.example/docs": {Grant: config.GrantClientCredentials, ClientID: "prober", ClientSecretFile: secret, Scopes: []string{"read"}}},
		Apply: keep(key, &applied), Signer: key, Observer: probe.EvidenceOptions{Observer: "org/prober"},
	})
	if err != nil {
		t.Fatal(err)
	}
	var seen []string
	for range 2 {
		if reports, err := p.Round(context.Background()); err != nil || len(reports) != 1 || reports[0].Layer(probe.LayerAccess).Status != probe.Ready {
			t.Fatalf("%d reports, %v", len(reports), err)
		}
		seen = append(seen, presented.Load().(string))
	}
	if n := as.Issued(); n != 1 || seen[0] != seen[1] {
		t.Fatalf("tokens issued = %d (the same one presented in both rounds: %v), want one", n, seen[0] == seen[1])
	}
}
