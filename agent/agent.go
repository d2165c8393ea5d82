// Package agent wires the host agent together: the Discovery client
// (agent/subscribe) feeding verified configuration into the decision core, the
// MCP front (agent/front) with its upstream pool, the durable receipt spool
// and its shipper, drift reports to the control plane, workflow tracking
// (agent/workflow), and the HTTP server for /mcp, /mcp/servers/<name>,
// /workflows/report, /metrics and /healthz.
//
// It starts from the last known good configuration on disk and keeps routing
// when the control plane is unreachable. It binds loopback only unless told
// otherwise and never logs tokens, arguments or results.
package agent

import (
	"context"
	"crypto"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/mcpready/mcpready/agent/circuit"
	"github.com/mcpready/mcpready/agent/config"
	"github.com/mcpready/mcpready/agent/decide"
	"github.com/mcpready/mcpready/agent/front"
	"github.com/mcpready/mcpready/agent/idempotency"
	"github.com/mcpready/mcpready/agent/invoke"
	"github.com/mcpready/mcpready/agent/receipt"
	"github.com/mcpready/mcpready/agent/shipper"
	"github.com/mcpready/mcpready/agent/spool"
	"github.com/mcpready/mcpready/agent/subscribe"
	"github.com/mcpready/mcpready/agent/telemetry"
	"github.com/mcpready/mcpready/agent/validate"
	"github.com/mcpready/mcpready/agent/workflow"
	"github.com/mcpready/mcpready/artifact"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/internal/loopback"
	"github.com/mcpready/mcpready/nodelabel"
	"github.com/mcpready/mcpready/readiness"
	"github.com/mcpready/mcpready/sign"
)

// Version is the agent software version recorded in receipts.
const Version = "0.1.0"

// DefaultListen is the default address of the MCP front.
const DefaultListen = "127.0.0.1:7480"

// ErrNotLoopback is returned for a non-loopback Listen without AllowNonLoopback.
var ErrNotLoopback = errors.New("agent: refusing to listen on a non-loopback address")

// ErrPlaintextControlPlane is returned for a control plane that is not on
// loopback and would be reached without TLS.
var ErrPlaintextControlPlane = errors.New("agent: refusing plaintext to a non-loopback control plane")

// Options configures an Agent. Zero values are documented per field.
type Options struct {
	// ControlPlane is the control plane's gRPC address; "" runs from the
	// last known good configuration only.
	ControlPlane string
	// ControlPlaneCreds secures the connection to the control plane; nil
	// means plaintext, which is refused (ErrPlaintextControlPlane) unless
	// ControlPlane is a loopback address.
	ControlPlaneCreds credentials.TransportCredentials
	// Root is the pinned root public key. Required.
	Root crypto.PublicKey
	// NodeID identifies this agent (and names its receipt chain). Required.
	NodeID string
	// Labels scope what the control plane sends (keys in package
	// nodelabel); nodelabel.Region is also this host's region in decisions.
	Labels map[string]string
	// Listen is the front's address; "" means DefaultListen. Non-loopback
	// addresses are refused unless AllowNonLoopback.
	Listen           string
	AllowNonLoopback bool
	// Socket, when set, is the path of a Unix-domain socket also serving
	// the front, whose clients are the principals their peer credentials
	// map to (config socketPrincipals); "" serves none.
	Socket string
	// DataDir holds the last known good configuration (lkg.json), the receipt
	// spool (spool/) and a generated agent key (agent.key). Required.
	DataDir string
	// Config is the parsed agent configuration (principals, upstreams; see
	// config.Load); nil is the empty configuration (every request refused).
	Config *config.Config
	// AgentKey signs receipt batches and drift reports; nil loads or
	// creates DataDir/agent.key (written atomically, mode 0600, encrypted
	// with AgentKeyPassword).
	AgentKey crypto.Signer
	// AgentKeyPassword encrypts (and decrypts) DataDir/agent.key; nil
	// leaves it unencrypted.
	AgentKeyPassword []byte
	// Logger; nil discards.
	Logger *slog.Logger
	// Metrics receives the agent's metrics and is served on /metrics; nil
	// uses a new registry.
	Metrics *prometheus.Registry
	// SyncMode selects the Discovery variant (incremental by default).
	SyncMode subscribe.Mode
	// Telemetry traces MCP requests and upstream attempts; nil is off.
	Telemetry *telemetry.Telemetry
	// MaxStaleness, when positive, refuses every call (configuration_stale)
	// while the TrustPolicy or a Policy the agent holds was signed
	// (provenance.issuedAt) longer ago; zero is no limit.
	MaxStaleness time.Duration
	// ReceiptDigestKey keys the receipts' argument and result digests
	// (HMAC-SHA256, receipt.KeyedDigest): the organisation's key, which
	// compliance holds to check a guessed value. Nil leaves them plain
	// SHA-256, which a low-entropy argument can be guessed from (a warning
	// is logged).
	ReceiptDigestKey []byte
	// PolicyName is the Policy this agent decides under; "" means
	// "default". No other Policy is ever used in its place.
	PolicyName string
	// Workflows bounds the workflow tracking of calls and reports
	// (agent/workflow: open workflows per principal and overall, calls
	// listed per workflow, idle timeout); a zero field takes the
	// configuration's limits.workflows value, else the package's default.
	// Workflows are always tracked.
	Workflows workflow.Options
}

// Agent is a configured host agent. Run it once.
type Agent struct {
	opts  Options
	cfg   *config.Config
	sync  *subscribe.Client
	front *front.Front
	spool *spool.Spool
	rw    *spool.Writer
	keys  *idempotency.Store
	conn  *grpc.ClientConn
	lis   net.Listener
	sock  net.Listener // Options.Socket, nil without
	mu    sync.Mutex
	prev  *front.State
	prevP *mcpreadyv1.Policy
	// installed is the generation of the last snapshot handed to the front.
	installed atomic.Uint64
	// stale: the installed snapshot was refused as stale.
	stale atomic.Bool
}

// New validates opts, loads the configuration file and the last known good
// configuration, opens the spool and binds the listener.
func New(opts Options) (*Agent, error) {
	if opts.Root == nil || opts.NodeID == "" || opts.DataDir == "" {
		return nil, errors.New("agent: Root, NodeID and DataDir are required")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Listen == "" {
		opts.Listen = DefaultListen
	}
	if opts.PolicyName == "" {
		opts.PolicyName = "default"
	}
	if opts.Metrics == nil {
		opts.Metrics = prometheus.NewRegistry()
		opts.Metrics.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	if err := checkLoopback(opts.Listen, opts.AllowNonLoopback); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(opts.DataDir, 0o700); err != nil {
		return nil, err
	}
	cfg, err := opts.Config, error(nil)
	if cfg == nil {
		if cfg, err = config.Parse(nil); err != nil {
			return nil, err
		}
	}
	if opts.AgentKey == nil {
		if opts.AgentKey, err = loadOrCreateKey(filepath.Join(opts.DataDir, "agent.key"), opts.AgentKeyPassword); err != nil {
			return nil, err
		}
	}
	if kid, err := sign.KeyID(opts.AgentKey.Public()); err == nil {
		opts.Logger.Info("agent: receipt batches are signed by the agent key; the TrustPolicy must grant it kinds ReceiptBatch and DriftReport for scope "+opts.NodeID+"/*",
			"key_id", kid)
	}
	if len(opts.ReceiptDigestKey) == 0 {
		opts.Logger.Warn("agent: receipt argument and result digests are unkeyed SHA-256; a low-entropy argument can be recovered by guessing: configure a receipt digest key")
	}
	a := &Agent{opts: opts, cfg: cfg}
	node := &mcpreadyv1.Node{Id: opts.NodeID, Labels: opts.Labels, AgentVersion: Version}
	if opts.ControlPlane != "" {
		creds := opts.ControlPlaneCreds
		if creds == nil {
			creds = insecure.NewCredentials()
		}
		if creds.Info().SecurityProtocol == "insecure" && !loopback.Is(opts.ControlPlane) {
			return nil, fmt.Errorf("%w: %q (configure TLS to it)", ErrPlaintextControlPlane, opts.ControlPlane)
		}
		a.conn, err = grpc.NewClient(opts.ControlPlane, grpc.WithTransportCredentials(creds))
		if err != nil {
			return nil, fmt.Errorf("agent: control plane address: %w", err)
		}
	}
	sopts := subscribe.Options{Root: opts.Root, Node: node, LKGPath: filepath.Join(opts.DataDir, "lkg.json"),
		Logger: opts.Logger, Mode: opts.SyncMode, Registerer: opts.Metrics}
	if a.conn != nil {
		sopts.Conn = a.conn
	}
	if a.sync, err = subscribe.New(sopts); err != nil {
		return nil, err
	}
	if dropped, err := a.sync.Load(); err != nil {
		opts.Logger.Warn("agent: last known good configuration unreadable; starting empty", "err", err)
	} else if dropped > 0 {
		opts.Logger.Warn("agent: dropped stored resources that no longer verify", "count", dropped)
	}
	a.spool, err = spool.Open(filepath.Join(opts.DataDir, "spool"), spool.Options{AgentID: opts.NodeID, Signer: opts.AgentKey,
		Registry: opts.Metrics, Logger: opts.Logger})
	if err != nil {
		return nil, err
	}
	a.rw = spool.NewWriter(a.spool, spool.WriterOptions{ContinueReadOnly: cfg.ContinueReadOnly(), Logger: opts.Logger})
	l := cfg.Limits()
	if a.keys, err = idempotency.Open(filepath.Join(opts.DataDir, "idempotency"),
		idempotency.Options{MaxKeys: l.IdempotencyKeys, MaxKeysPerCaller: l.IdempotencyKeysPerCaller}); err != nil {
		a.spool.Close()
		return nil, err
	}
	fopts := front.Options{Config: cfg, Keys: a.keys, Region: opts.Labels[string(nodelabel.Region)], NodeID: opts.NodeID, Logger: opts.Logger,
		Builder:             receipt.Builder{EmitterID: opts.NodeID, EmitterVersion: Version, Redaction: receipt.Redaction{DigestKey: opts.ReceiptDigestKey}},
		Ledger:              a.rw,
		AnswerBeforeReceipt: true, // read-only receipts are appended in the background: they need not hold the answer
		Registerer:          opts.Metrics,
		Telemetry:           opts.Telemetry,
	}
	withLimits(&fopts, &opts.Workflows, l)
	fopts.Workflows = &opts.Workflows
	if a.conn != nil {
		admin := mcpreadyv1.NewAdminServiceClient(a.conn)
		fopts.ReportDrift = func(ctx context.Context, req *mcpreadyv1.ReportDriftRequest) error {
			signed, err := a.signDrift(req)
			if err != nil {
				return err
			}
			_, err = admin.ReportDrift(ctx, signed)
			return err
		}
	}
	a.front = front.New(fopts)
	a.install(a.sync.Snapshot())
	if a.lis, err = net.Listen("tcp", opts.Listen); err != nil {
		a.spool.Close()
		a.keys.Close()
		return nil, err
	}
	if err := a.listenSocket(); err != nil {
		_ = a.lis.Close()
		a.spool.Close()
		a.keys.Close()
		return nil, err
	}
	return a, nil
}

// withLimits applies the configuration's limits to the front's options
// and to the workflow options' zero fields (a zero limit keeps the
// front's or the tracker's default).
func withLimits(f *front.Options, w *workflow.Options, l config.Limits) {
	f.MaxSessions, f.MaxSessionsPerPrincipal = l.Sessions, l.SessionsPerPrincipal
	f.MaxCallsInProgress, f.MaxCallsInProgressPerPrincipal = l.CallsInProgress, l.CallsInProgressPerPrincipal
	f.MaxUpstreamSessions, f.MaxUpstreamSessionsPerPrincipal = l.UpstreamSessions, l.UpstreamSessionsPerPrincipal
	f.MaxHeldCalls, f.MaxHeldCallsPerPrincipal = l.HeldCalls, l.HeldCallsPerPrincipal
	f.MaxPendingRounds, f.MaxPendingRoundsPerPrincipal = l.PendingRounds, l.PendingRoundsPerPrincipal
	f.ReadHeaderTimeout, f.IdleTimeout, f.BodyTimeout = time.Duration(l.ReadHeaderTimeout), time.Duration(l.IdleTimeout), time.Duration(l.BodyTimeout)
	f.SessionIdleTimeout, f.ColdAfter, f.RelistInterval = time.Duration(l.SessionIdleTimeout), time.Duration(l.ColdAfter), time.Duration(l.RelistInterval)
	for _, v := range []struct {
		dst *int
		src int
	}{{&w.MaxOpen, l.Workflows.Open}, {&w.MaxOpenPerPrincipal, l.Workflows.OpenPerPrincipal},
		{&w.MaxCalls, l.Workflows.CallsPerWorkflow}, {&w.MaxCallsTotal, l.Workflows.Calls}} {
		if *v.dst == 0 {
			*v.dst = v.src
		}
	}
	if w.IdleTimeout == 0 {
		w.IdleTimeout = time.Duration(l.Workflows.IdleTimeout)
	}
}

// signDrift turns the front's drift report into the signed form the
// control plane acts on: a DriftReport signed by the agent key (which the
// TrustPolicy must grant DriftReport for "<node id>/*"), naming the digest
// of the entry bundle this agent holds.
func (a *Agent) signDrift(req *mcpreadyv1.ReportDriftRequest) (*mcpreadyv1.ReportDriftRequest, error) {
	held := a.sync.Snapshot().Get(artifact.KindRegistryEntry, req.GetEntryName())
	if held == nil {
		return nil, fmt.Errorf("agent: drift report for %q, which this agent does not hold", req.GetEntryName())
	}
	dr := &mcpreadyv1.DriftReport{Provenance: &mcpreadyv1.Provenance{Issuer: a.opts.NodeID, IssuedAt: timestamppb.Now()},
		NodeId: a.opts.NodeID, EntryName: req.GetEntryName(), EntryDigest: artifact.Digest(held.Bundle),
		Labels: req.GetLabels(), Observed: req.GetObserved(), Detail: req.GetDetail()}
	b, _, err := sign.Sign(artifact.New(artifact.KindDriftReport, a.opts.NodeID+"/"+req.GetEntryName(), dr), a.opts.AgentKey)
	if err != nil {
		return nil, fmt.Errorf("agent: signing the drift report: %w", err)
	}
	return &mcpreadyv1.ReportDriftRequest{Node: &mcpreadyv1.Node{Id: a.opts.NodeID, Labels: a.opts.Labels, AgentVersion: Version}, Report: b}, nil
}

// Addr is the front's bound address.
func (a *Agent) Addr() string { return a.lis.Addr().String() }

// Front is the MCP front (for tests and embedding).
func (a *Agent) Front() *front.Front { return a.front }

// Sync is the Discovery client.
func (a *Agent) Sync() *subscribe.Client { return a.sync }

func checkLoopback(addr string, allow bool) error {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return fmt.Errorf("agent: listen address %q: %w", addr, err)
	}
	if !allow && !loopback.Is(addr) {
		return fmt.Errorf("%w: %q (allow it explicitly)", ErrNotLoopback, addr)
	}
	return nil
}

func loadOrCreateKey(path string, password []byte) (crypto.Signer, error) {
	k, err := sign.ReadPrivateKeyFile(path, password)
	if !errors.Is(err, os.ErrNotExist) {
		return k, err
	}
	// written atomically, never over an existing file; encrypted when a
	// password is configured
	return sign.WriteKeyPair(strings.TrimSuffix(path, ".key"), sign.AlgorithmECDSAP256, password)
}

// install builds the decision state of a verified snapshot and hands it
// to the front; a stale snapshot (Options.MaxStaleness) refuses every
// call instead.
func (a *Agent) install(s *subscribe.Snapshot) {
	st, pol, err := buildState(s, a.opts.PolicyName, a.prev, a.prevP)
	if err != nil {
		a.opts.Logger.Warn("agent: configuration not usable; keeping the previous one", "err", err)
		return
	}
	stale := s.Stale(time.Now(), a.opts.MaxStaleness)
	a.stale.Store(stale != nil)
	if stale != nil {
		a.opts.Logger.Error("agent: refusing every call until a freshly signed configuration arrives", "err", stale)
		st.Refusal = &decide.RefusalError{Step: readiness.StepEligibility, Code: readiness.CodeConfigurationStale, Reason: stale.Error()}
	}
	if st.Decide != nil {
		for _, w := range st.Decide.Warnings() {
			a.opts.Logger.Warn("agent: policy input not understood", "detail", w)
		}
	}
	a.mu.Lock()
	a.prev, a.prevP = st, pol
	a.mu.Unlock()
	a.front.SetState(st)
	a.installed.Store(s.Generation)
}

// Installed is the generation of the configuration the front uses now.
func (a *Agent) Installed() uint64 { return a.installed.Load() }

// buildState converts verified resources into the decision core's inputs.
// The policy is the one named policy, and only that one: when it is not
// held, every call is refused (no_policy, naming it), never decided under
// another Policy the agent happens to hold.
func buildState(s *subscribe.Snapshot, policy string, prev *front.State, prevPolicy *mcpreadyv1.Policy) (*front.State, *mcpreadyv1.Policy, error) {
	entries := map[string]*mcpreadyv1.RegistryEntry{}
	for _, r := range s.List(artifact.KindRegistryEntry) {
		entries[r.Name] = r.Verified.Object.Spec.(*mcpreadyv1.RegistryEntry)
	}
	pr := s.Get(artifact.KindPolicy, policy)
	if pr == nil {
		reason := fmt.Sprintf("policy %q is not installed on this host (no other Policy is used in its place)", policy)
		if why := s.Withheld(artifact.KindPolicy, policy); why != "" {
			reason = fmt.Sprintf("policy %q is not used: %s (no other Policy is used in its place)", policy, why)
		}
		return &front.State{Entries: entries, Refusal: &decide.RefusalError{Step: readiness.StepEligibility, Code: readiness.CodeNoPolicy, Reason: reason}}, nil, nil
	}
	pol := pr.Verified.Object.Spec.(*mcpreadyv1.Policy)
	in := decide.Inputs{PolicyName: pr.Name, PolicyVersion: pr.Verified.Digest, Policy: pol,
		Entries: entries, Declarations: map[string]*mcpreadyv1.Declaration{},
		Evidence: map[string]*mcpreadyv1.Evidence{}}
	for _, r := range s.List(artifact.KindDeclaration) {
		in.Declarations[r.Name] = r.Verified.Object.Spec.(*mcpreadyv1.Declaration)
	}
	for _, r := range s.List(artifact.KindEvidence) {
		in.Evidence[r.Name] = r.Verified.Object.Spec.(*mcpreadyv1.Evidence)
	}
	if prev != nil {
		in.Previous = prev.Decide
	}
	snap, err := decide.NewSnapshot(in)
	if err != nil {
		return nil, nil, err
	}
	rules := validate.RulesFromPolicy(pol.GetResults())
	if rules.Semantic, err = validate.CompileSemantic(pol.GetSemanticValidation(), pol.GetResults().GetOnSemanticFailure()); err != nil {
		return nil, nil, err
	}
	st := &front.State{Decide: snap, Entries: in.Entries, Declarations: in.Declarations, Checker: validate.NewChecker(rules)}
	switch {
	case prev == nil || prev.Circuits == nil:
		st.Circuits = circuit.NewSet(circuit.ConfigFromPolicy(pol.GetCircuit()))
	case prevPolicy != nil && proto.Equal(prevPolicy.GetCircuit(), pol.GetCircuit()):
		st.Circuits = prev.Circuits
	default:
		// New thresholds apply to the breakers we have: their state is kept.
		prev.Circuits.SetConfig(circuit.ConfigFromPolicy(pol.GetCircuit()))
		st.Circuits = prev.Circuits
	}
	if prev != nil && prevPolicy != nil && proto.Equal(prevPolicy.GetRetry(), pol.GetRetry()) && prev.Budget != nil {
		st.Budget = prev.Budget
	} else {
		st.Budget = invoke.BudgetFromPolicy(pol.GetRetry())
	}
	return st, pol, nil
}

// Handler is the agent's HTTP handler: /mcp, /mcp/servers/<name>,
// /workflows/report, /metrics, /healthz.
func (a *Agent) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/mcp", a.front)
	mux.Handle("/mcp/", a.front)
	mux.Handle("/workflows/report", a.front.WorkflowReports())
	mux.Handle("/metrics", a.front.Guard(promhttp.HandlerFor(a.opts.Metrics, promhttp.HandlerOpts{})))
	mux.Handle("/healthz", a.front.Guard(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		s := a.sync.Snapshot()
		kinds := map[string]int{}
		for _, k := range append([]artifact.Kind{artifact.KindTrustPolicy}, subscribe.DefaultKinds...) {
			kinds[string(k)] = len(s.List(k))
		}
		names := make([]string, 0, len(kinds))
		for k := range kinds {
			names = append(names, k)
		}
		sort.Strings(names)
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintf(w, "ok\ncontrol_plane_connected %v\nconfig_generation %d\n", a.sync.Connected(), s.Generation)
		for _, k := range names {
			fmt.Fprintf(w, "resources{kind=%q} %d\n", k, kinds[k])
		}
	})))
	return mux
}

// Run serves until ctx ends, then shuts down: it follows the control plane,
// ships receipts and serves the front.
func (a *Agent) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
		a.front.Close()
		a.rw.Drain()
		_ = a.spool.Flush()
		_ = a.spool.Close()
		_ = a.keys.Close()
		if a.conn != nil {
			_ = a.conn.Close()
		}
	}()
	wg.Add(3)
	go func() { defer wg.Done(); a.rw.Run(ctx) }()
	go func() { defer wg.Done(); a.follow(ctx) }()
	go func() { defer wg.Done(); a.front.Workflows().Run(ctx) }()
	if a.conn != nil {
		wg.Add(2)
		go func() { defer wg.Done(); _ = a.sync.Run(ctx) }()
		go func() {
			defer wg.Done()
			_ = shipper.Run(ctx, a.conn, a.spool, shipper.Options{Node: &mcpreadyv1.Node{Id: a.opts.NodeID, Labels: a.opts.Labels},
				Registry: a.opts.Metrics, Logger: a.opts.Logger})
		}()
	}
	srv := a.front.HTTPServer(a.Handler()) // header, idle and body timeouts against slow clients
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(a.lis) }()
	stopSocket := a.serveSocket(errc)
	defer stopSocket()
	a.opts.Logger.Info("agent: serving", "addr", a.Addr(), "node", a.opts.NodeID, "control_plane", a.opts.ControlPlane)
	select {
	case <-ctx.Done():
	case err := <-errc:
		return err
	}
	sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer scancel()
	_ = srv.Shutdown(sctx)
	return nil
}

// follow installs every new verified snapshot, and re-checks the
// installed one's staleness as time passes.
func (a *Agent) follow(ctx context.Context) {
	var tick <-chan time.Time
	if a.opts.MaxStaleness > 0 {
		t := time.NewTicker(min(max(a.opts.MaxStaleness/20, time.Second), time.Minute))
		defer t.Stop()
		tick = t.C
	}
	for {
		ch := a.sync.Changed()
		if s := a.sync.Snapshot(); s.Generation != a.installed.Load() {
			a.install(s)
		}
		select {
		case <-ctx.Done():
			return
		case <-ch:
		case <-tick:
			if s := a.sync.Snapshot(); !a.stale.Load() && s.Stale(time.Now(), a.opts.MaxStaleness) != nil {
				a.install(s)
			}
		}
	}
}
