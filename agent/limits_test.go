package agent

import (
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/protobuf/proto"

	"github.com/mcpready/mcpready/agent/config"
	"github.com/mcpready/mcpready/agent/front"
	"github.com/mcpready/mcpready/agent/idempotency"
	"github.com/mcpready/mcpready/agent/internal/cptest"
	"github.com/mcpready/mcpready/agent/internal/mcptest"
	"github.com/mcpready/mcpready/agent/pipeline"
	"github.com/mcpready/mcpready/agent/receipt"
	"github.com/mcpready/mcpready/agent/workflow"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/readiness"
)

// TestConfiguredLimits: the limits section of the agent configuration is
// what the running agent enforces, through its real wiring (before, the
// section was refused as an unknown field and only the front's defaults
// applied: 64 dedicated sessions per principal, 256 open workflows per
// principal, a 1 minute cold threshold, a 10 s header timeout).
func TestConfiguredLimits(t *testing.T) {
	env := cptest.Start(t)
	up := mcptest.New(t, mcptest.Options{})
	publish(t, env, up)
	dir := t.TempDir()
	p := filepath.Join(dir, "agent.yaml")
	if err := os.WriteFile(p, []byte(`defaultPrincipal: {name: local, principalClass: default}
limits:
  sessionsPerPrincipal: 2
  upstreamSessionsPerPrincipal: 1
  readHeaderTimeout: 1s
  coldAfter: 100ms
  idempotencyKeysPerCaller: 1
  workflows: {openPerPrincipal: 1}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	a, stop := start(t, Options{ControlPlane: env.Addr, Root: env.RootPub, NodeID: "host-limits", Listen: "127.0.0.1:0",
		DataDir: filepath.Join(dir, "data"), Config: cfg, Metrics: reg})
	defer stop()
	waitConfigured(t, a)

	connectTo := func(path string) (*mcp.ClientSession, error) {
		c := mcp.NewClient(&mcp.Implementation{Name: "ai"}, nil)
		return c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: "http://" + a.Addr() + path, MaxRetries: -1},
			&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	}
	connect := func() (*mcp.ClientSession, error) { return connectTo("/mcp/servers/test") }
	cs, err := connect()
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if second, err := connect(); err == nil {
		second.Close()
		t.Fatal("a second dedicated upstream session was admitted past the configured cap of 1")
	} else if !strings.Contains(err.Error(), "too many upstream sessions") {
		t.Fatalf("refusal does not say why: %v", err)
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`# HELP mcpready_agent_upstream_sessions_refused_total Transparent-view sessions refused at a dedicated upstream session cap, by scope (principal, total); owners: calls refused at the bound on shared sessions opened with principals' own tokens.
# TYPE mcpready_agent_upstream_sessions_refused_total counter
mcpready_agent_upstream_sessions_refused_total{scope="principal"} 1
`), "mcpready_agent_upstream_sessions_refused_total"); err != nil {
		t.Errorf("refusal not counted: %v", err)
	}
	// The refused session leaves no front session behind: its client, told
	// of the refusal, closes it (the go-sdk's DELETE), and the session's
	// slot is freed when it ends, just after that answer. Then one more
	// fits the configured 2 per principal, and then no more.
	for deadline := time.Now().Add(5 * time.Second); gaugeValue(t, reg, "mcpready_agent_sessions_open") != 1; {
		if time.Now().After(deadline) {
			t.Fatalf("front sessions open: %v, want 1 once the refused one is closed", gaugeValue(t, reg, "mcpready_agent_sessions_open"))
		}
		time.Sleep(5 * time.Millisecond)
	}
	agg, err := connectTo("/mcp")
	if err != nil {
		t.Fatalf("a second front session within the configured cap of 2: %v", err)
	}
	defer agg.Close()
	if third, err := connectTo("/mcp"); err == nil {
		third.Close()
		t.Fatal("a third front session was admitted past the configured cap of 2")
	} else if !strings.Contains(err.Error(), "Service Unavailable") { // HTTP 503; the body, which says why, is front TestFrontSessionsCapped's
		t.Fatalf("front session refusal: %v", err)
	}

	callIn := func(wf string) *mcp.CallToolResult {
		t.Helper()
		params := &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi"}}
		if wf != "" {
			params.Meta = mcp.Meta{"mcpready.dev/workflow": wf}
		}
		res, err := cs.CallTool(context.Background(), params)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := callIn("wf-a"); res.IsError {
		t.Fatalf("call in wf-a: %+v", res.Content)
	}
	if res := callIn("wf-b"); !res.IsError || !strings.Contains(textOf(res), string(readiness.CodeWorkflowLimit)) {
		t.Fatalf("a second open workflow past the configured cap of 1: %s", textOf(res))
	}
	keyed := func(key string) *mcp.CallToolResult {
		t.Helper()
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi"},
			Meta: mcp.Meta{"mcpready.dev/idempotency-key": key}})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := keyed("key-1"); res.IsError {
		t.Fatalf("first key: %s", textOf(res))
	}
	if res := keyed("key-2"); !res.IsError || !strings.Contains(textOf(res), "live idempotency keys") {
		t.Fatalf("a second live key past the configured cap of 1: %s", textOf(res))
	}
	callIn("") // warm: used just now
	time.Sleep(250 * time.Millisecond)
	callIn("") // cold: idle past the configured 100ms
	var warmth []mcpreadyv1.CallWarmth
	for _, r := range spooled(t, a, func(r *mcpreadyv1.Receipt) bool {
		return strings.HasSuffix(r.GetRequested(), "echo") && r.GetWarmth() != mcpreadyv1.CallWarmth_CALL_WARMTH_UNSPECIFIED
	}, 3) {
		warmth = append(warmth, r.GetWarmth())
	}
	if last := warmth[len(warmth)-1]; last != mcpreadyv1.CallWarmth_CALL_WARMTH_COLD_IDLE || warmth[len(warmth)-2] != mcpreadyv1.CallWarmth_CALL_WARMTH_WARM {
		t.Errorf("warmth of the calls %v: want ... WARM, COLD_IDLE (the configured cold threshold)", warmth)
	}

	// A connection that never finishes its headers is closed after the
	// configured 1s, not the default 10s.
	conn, err := net.Dial("tcp", a.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	began := time.Now()
	if _, err := conn.Write([]byte("GET /healthz HTTP/1.1\r\nHost: x\r\n")); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(8 * time.Second))
	_, _ = io.ReadAll(conn)
	if took := time.Since(began); took > 4*time.Second {
		t.Errorf("slow headers held the connection %s, want about the configured 1s", took)
	}
}

// spooled waits for at least n receipts matching keep in a's spool and
// returns every one that does, in spool order.
func spooled(t *testing.T, a *Agent, keep func(*mcpreadyv1.Receipt) bool, n int) []*mcpreadyv1.Receipt {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		_ = a.spool.Flush()
		var out []*mcpreadyv1.Receipt
		batches, err := a.spool.Pending(0, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range batches {
			for _, enc := range b.Receipts {
				r := &mcpreadyv1.Receipt{}
				if err := proto.Unmarshal(enc, r); err != nil {
					t.Fatal(err)
				}
				if keep(r) {
					out = append(out, r)
				}
			}
		}
		if len(out) >= n {
			return out
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d matching receipts spooled, want %d", len(out), n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestReceiptDigestKeyWired: with a receipt digest key (mcpready agent
// --receipt-digest-key) the spooled receipts' argument and result digests
// are HMAC-SHA256 under it, as compliance.md says, so compliance can check
// a guessed argument with the key and nobody can without it.
func TestReceiptDigestKeyWired(t *testing.T) {
	env := cptest.Start(t)
	up := mcptest.New(t, mcptest.Options{})
	publish(t, env, up)
	dir := t.TempDir()
	key := []byte("0123456789abcdef0123456789abcdef")
	a, stop := start(t, Options{ControlPlane: env.Addr, Root: env.RootPub, NodeID: "host-keyed", Listen: "127.0.0.1:0",
		DataDir: filepath.Join(dir, "data"), Config: writeConfig(t, dir), ReceiptDigestKey: key})
	defer stop()
	waitConfigured(t, a)
	if res := callEcho(t, a.Addr()); res.IsError {
		t.Fatalf("call: %+v", res.Content)
	}
	r := spooled(t, a, func(r *mcpreadyv1.Receipt) bool { return strings.HasSuffix(r.GetRequested(), "echo") }, 1)[0]
	if want := receipt.KeyedDigest(key, []byte(`{"text":"hi"}`)); r.GetArgumentsDigest() != want ||
		!strings.HasPrefix(r.GetResultDigest(), "hmac-sha256:") || r.GetRedactionPolicyVersion() != receipt.KeyedRedactionVersion {
		t.Fatalf("receipt digests %q %q (%s), want the arguments' %q under the key", r.GetArgumentsDigest(), r.GetResultDigest(), r.GetRedactionPolicyVersion(), want)
	}
}

// TestExampleLimitsAreDefaults: the limits the shipped example
// configuration spells out are valid and are the defaults, as its comment
// says (a changed default shows here).
func TestExampleLimitsAreDefaults(t *testing.T) {
	b, err := os.ReadFile("../deploy/examples/agent-config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	f, err := config.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	c, err := config.New(config.File{Limits: f.Limits})
	if err != nil {
		t.Fatal(err)
	}
	var fo front.Options
	var wo workflow.Options
	withLimits(&fo, &wo, c.Limits())
	want := front.Options{MaxSessions: front.DefaultMaxSessions, MaxSessionsPerPrincipal: front.DefaultMaxSessionsPerPrincipal,
		MaxCallsInProgress: front.DefaultMaxCallsInProgress, MaxCallsInProgressPerPrincipal: front.DefaultMaxCallsInProgressPerPrincipal, MaxUpstreamSessions: front.DefaultMaxUpstreamSessions, MaxUpstreamSessionsPerPrincipal: front.DefaultMaxUpstreamSessionsPerPrincipal,
		MaxHeldCalls: front.DefaultMaxHeldCalls, MaxHeldCallsPerPrincipal: front.DefaultMaxHeldCallsPerPrincipal,
		MaxPendingRounds: front.DefaultMaxPendingRounds, MaxPendingRoundsPerPrincipal: front.DefaultMaxPendingRoundsPerPrincipal,
		ReadHeaderTimeout: front.DefaultReadHeaderTimeout, IdleTimeout: front.DefaultIdleTimeout, BodyTimeout: front.DefaultBodyTimeout,
		SessionIdleTimeout: front.DefaultSessionIdleTimeout, ColdAfter: pipeline.DefaultColdAfter, RelistInterval: front.DefaultRelistInterval}
	if !reflect.DeepEqual(fo, want) {
		t.Errorf("example front limits %+v, want the defaults %+v", fo, want)
	}
	if !reflect.DeepEqual(wo, workflow.Options{MaxOpen: workflow.DefaultMaxOpen, MaxOpenPerPrincipal: workflow.DefaultMaxOpenPerPrincipal,
		MaxCalls: workflow.DefaultMaxCalls, MaxCallsTotal: workflow.DefaultMaxCallsTotal, IdleTimeout: workflow.DefaultIdleTimeout}) {
		t.Errorf("example workflow limits %+v, want the defaults", wo)
	}
	if l := c.Limits(); l.IdempotencyKeys != idempotency.DefaultMaxKeys || l.IdempotencyKeysPerCaller != idempotency.DefaultMaxKeysPerCaller {
		t.Errorf("example idempotency limits %d and %d, want the defaults", l.IdempotencyKeys, l.IdempotencyKeysPerCaller)
	}
}

// gaugeValue is the value of the unlabelled gauge name in reg (-1 when
// reg has no such gauge).
func gaugeValue(t *testing.T, reg prometheus.Gatherer, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	return -1
}
