package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"

	"github.com/mcpready/mcpready/agent"
	"github.com/mcpready/mcpready/controlplane"
	"github.com/mcpready/mcpready/controlplane/ingest"
	"github.com/mcpready/mcpready/controlplane/receiptstore"
	"github.com/mcpready/mcpready/demo"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/sign"
)

// Demo agent identity: its node id and scoping labels.
const (
	demoNodeID = "demo-agent"
	// defaultAgentListen is the local agent's default address (other
	// commands, e.g. connect and demo calls, default to it).
	defaultAgentListen = "127.0.0.1:7480"
	// upReadyTimeout bounds the wait for the agent to hold the demo policy.
	upReadyTimeout = 90 * time.Second
	// upStopTimeout bounds a clean shutdown.
	upStopTimeout = 20 * time.Second
)

var upFlags struct {
	data          string
	cpListen      string
	metricsListen string
	agentListen   string
}

var upCmd = &cobra.Command{
	Use:   "up [--data DIR]",
	Short: "Start the whole system on this machine: control plane, one host agent and demo MCP servers",
	Long: `Start, on loopback only, the control plane (with an embedded etcd), one host
agent and four demo upstream MCP servers; generate the demo keys (root, org,
provider-a, provider-b, observer, agent) in DATA/keys with an empty password
(reused when present); sign the demo trust policy, declarations, evidence,
registry entries and policy into DATA/artifacts and apply them; wait until the
agent holds them; print the endpoints; run until interrupted (SIGINT or
SIGTERM), then shut down cleanly. Everything is kept in DATA for the next
start.

DATA is --data, else $MCPREADY_DATA, else ./.mcpready.

Try it:  mcpready demo calls     (five calls that show each idea)
         mcpready receipts tail  (what the agent recorded)`,
	Args: noArgs,
	RunE: func(cmd *cobra.Command, _ []string) error {
		f := upFlags
		defer resetFlags(cmd)
		return runUp(cmd.Context(), cmd.OutOrStdout(), f.data, f.cpListen, f.metricsListen, f.agentListen)
	},
}

func init() {
	fl := upCmd.Flags()
	def := os.Getenv("MCPREADY_DATA")
	if def == "" {
		def = ".mcpready"
	}
	fl.StringVar(&upFlags.data, "data", def, "data directory: keys, artifacts, etcd, receipts, agent state (env MCPREADY_DATA)")
	fl.StringVar(&upFlags.cpListen, "controlplane-listen", controlplane.DefaultListen, "control plane gRPC address (loopback; port 0 picks a free one)")
	fl.StringVar(&upFlags.metricsListen, "metrics-listen", controlplane.DefaultMetricsListen, "control plane /metrics address (loopback)")
	fl.StringVar(&upFlags.agentListen, "agent-listen", defaultAgentListen, "agent MCP address (loopback)")
	upCmd.SetFlagErrorFunc(usageError)
	root.AddCommand(upCmd)
}

// errNotLoopback is returned for a listen address off loopback: up is a
// single-machine demo with plaintext everywhere.
var errNotLoopback = errors.New("up listens on loopback only")

func checkLoopback(flag, addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return withCode(exitUsage, fmt.Errorf("--%s %q: %w", flag, addr, err))
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return withCode(exitUsage, fmt.Errorf("--%s %q: %w", flag, addr, errNotLoopback))
	}
	return nil
}

func runUp(parent context.Context, out io.Writer, dataFlag, cpListen, metricsListen, agentListen string) error {
	for _, a := range [][2]string{{"controlplane-listen", cpListen}, {"metrics-listen", metricsListen}, {"agent-listen", agentListen}} {
		if err := checkLoopback(a[0], a[1]); err != nil {
			return err
		}
	}
	if parent == nil {
		parent = context.Background()
	}
	ctx, stop := signal.NotifyContext(parent, os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := logger()

	data, err := filepath.Abs(dataFlag)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(data, 0o700); err != nil {
		return err
	}
	keysDir := filepath.Join(data, "keys")
	keys, err := demo.LoadOrCreateKeys(keysDir)
	if err != nil {
		return err
	}

	// Demo upstream servers, on the ports of the previous run when free so
	// the signed artifacts (which name the endpoints) stay the same.
	statePath := filepath.Join(data, "demo.json")
	state, err := demo.LoadState(statePath)
	if err != nil {
		return err
	}
	state = state.Fresh(time.Now())
	servers, err := demo.StartServers(demo.ServersOptions{Ports: state.Ports})
	if err != nil && len(state.Ports) > 0 {
		log.Info("demo server ports of the last run are taken; using new ones", "err", err)
		servers, err = demo.StartServers(demo.ServersOptions{})
	}
	if err != nil {
		return err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		servers.Close(sctx)
	}()
	state.Ports = map[string]int{}
	var listed []demo.Listed
	for _, u := range servers.Upstreams() {
		p, _ := url.Parse(u.URL)
		state.Ports[u.Name], _ = strconv.Atoi(p.Port())
		ls, err := demo.ListTools(ctx, u.URL)
		if err != nil {
			return err
		}
		listed = append(listed, demo.Listed{Upstream: u, Server: ls})
	}
	if err := state.Save(statePath); err != nil {
		return err
	}
	items, err := demo.Build(demo.Params{Keys: keys, AgentID: demoNodeID, Servers: listed, Now: state.IssuedAt})
	if err != nil {
		return err
	}
	signed, err := demo.SignOrReuse(filepath.Join(data, "artifacts"), items, keys)
	if err != nil {
		return err
	}

	// Control plane, with the receipts service on its own segment store.
	cp, cpDone, closeCP, err := startControlPlane(ctx, log, data, cpListen, metricsListen, keys)
	if err != nil {
		return interrupted(ctx, err)
	}
	defer closeCP()

	// One host agent. The trust policy goes first: the agent verifies
	// everything else against it.
	if err := applyDemo(ctx, cp.Addr(), signed[:1]); err != nil {
		return err
	}
	a, agentDone, closeAgent, err := startAgent(ctx, data, cp.Addr(), agentListen, keys)
	if err != nil {
		return err
	}
	defer closeAgent()
	agentURL := "http://" + a.Addr() + "/mcp"
	hasTrust := func() (bool, error) { return a.Sync().Snapshot().Trust != nil, errors.New("no trust policy yet") }
	if err := waitUntil(ctx, "the agent to verify the trust policy", hasTrust, agentDone, cpDone); err != nil {
		return interrupted(ctx, err)
	}
	if err := applyDemo(ctx, cp.Addr(), signed[1:]); err != nil {
		return err
	}
	listsDocs := func() (bool, error) { return listsCapability(ctx, agentURL, demo.CapabilityDocsLookup) }
	if err := waitUntil(ctx, "the agent to list "+demo.CapabilityDocsLookup, listsDocs, agentDone, cpDone); err != nil {
		return interrupted(ctx, err)
	}

	fmt.Fprintf(out, "agent MCP endpoint: %s\n", agentURL)
	fmt.Fprintf(out, "control plane: %s\n", cp.Addr())
	fmt.Fprintf(out, "keys: %s\n", keysDir)
	fmt.Fprintf(out, "data: %s\n", data)
	fmt.Fprintf(out, "try: mcpready demo calls --agent %s --server %s\n", agentURL, cp.Addr())
	fmt.Fprintln(out, "stop: Ctrl-C (data is kept for the next start)")

	select {
	case <-ctx.Done():
		log.Info("shutting down")
		return nil
	case err := <-cpDone:
		return fmt.Errorf("control plane stopped: %w", err)
	case err := <-agentDone:
		return fmt.Errorf("agent stopped: %w", err)
	}
}

// startControlPlane runs an in-process control plane with its embedded
// etcd and receipt store under DATA/controlplane. stop cancels it and
// waits (bounded) for a clean shutdown.
func startControlPlane(ctx context.Context, log *slog.Logger, data, listen, metrics string, keys demo.Keys) (*controlplane.Server, <-chan error, func(), error) {
	dir := filepath.Join(data, "controlplane")
	rs, err := receiptstore.Open(filepath.Join(dir, "receipts"), receiptstore.Options{Logger: log})
	if err != nil {
		return nil, nil, nil, err
	}
	var cp *controlplane.Server
	reg := prometheus.NewRegistry()
	svc, err := ingest.New(ingest.Options{Store: rs, Trust: func() *sign.Trust { return cp.Trust() }, Registry: reg, Logger: log})
	if err != nil {
		rs.Close()
		return nil, nil, nil, err
	}
	cp, err = controlplane.New(controlplane.Options{
		Listen: listen, MetricsListen: metrics, DataDir: dir,
		Root: keys[demo.KeyRoot].Public(), ObserverKey: keys[demo.KeyObserver],
		Receipts: svc, Registry: reg, Logger: log,
	})
	if err != nil {
		rs.Close()
		return nil, nil, nil, err
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan error, 1)
	go func() { done <- cp.Run(runCtx) }()
	stop := func() {
		cancel()
		select {
		case <-done:
		case <-time.After(upStopTimeout):
			log.Warn("control plane did not stop in time")
		}
		rs.Close()
	}
	select {
	case <-cp.Ready():
		return cp, done, stop, nil
	case err := <-done:
		rs.Close()
		return nil, nil, nil, fmt.Errorf("control plane: %w", err)
	case <-ctx.Done():
		stop()
		return nil, nil, nil, ctx.Err()
	}
}

// applyDemo applies the signed demo artifacts in order; a bundle already
// stored byte for byte is reported unchanged and not stored again.
func applyDemo(ctx context.Context, addr string, signed []demo.Signed) error {
	conn, err := dialServer(addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	admin := mcpreadyv1.NewAdminServiceClient(conn)
	for _, s := range signed {
		actx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := admin.Apply(actx, &mcpreadyv1.ApplyRequest{Bundle: s.Bundle})
		cancel()
		if err != nil {
			return fmt.Errorf("apply %s %s: %w", s.Object.Kind, s.Object.Metadata.Name, err)
		}
	}
	return nil
}

// writeDemoAgentConfig writes the demo agent's configuration: requests
// without a token act as the demo's default principal.
func writeDemoAgentConfig(path string) error {
	cfg := fmt.Sprintf(`# Written by mcpready up: requests without a bearer token act as this principal.
defaultPrincipal:
  name: local
  principalClass: %s
  tenantClass: %s
`, demo.PrincipalClass, demo.TenantClass)
	return os.WriteFile(path, []byte(cfg), 0o600)
}

// startAgent runs the in-process host agent under DATA/agent. It logs
// warnings and errors only: up prints what matters.
func startAgent(ctx context.Context, data, cpAddr, listen string, keys demo.Keys) (*agent.Agent, <-chan error, func(), error) {
	dir := filepath.Join(data, "agent")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, nil, err
	}
	cfgPath := filepath.Join(dir, "config.yaml")
	if err := writeDemoAgentConfig(cfgPath); err != nil {
		return nil, nil, nil, err
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	a, err := agent.New(agent.Options{
		ControlPlane: cpAddr,
		Root:         keys[demo.KeyRoot].Public(),
		NodeID:       demoNodeID,
		Labels:       map[string]string{"region": demo.RegionAgent, "tenant-classes": demo.TenantClass, "host": hostname()},
		Listen:       listen,
		DataDir:      dir,
		Config:       cfgPath,
		AgentKey:     keys[demo.KeyAgent],
		Logger:       log,
	})
	if err != nil {
		return nil, nil, nil, err
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan error, 1)
	go func() { done <- a.Run(runCtx) }()
	stop := func() {
		cancel()
		select {
		case <-done:
		case <-time.After(upStopTimeout):
			log.Warn("agent did not stop in time")
		}
	}
	return a, done, stop, nil
}

func hostname() string {
	h, err := os.Hostname()
	if err != nil {
		return "localhost"
	}
	return h
}

// waitUntil polls ready every 200ms until it reports true, a component
// stops, ctx ends or upReadyTimeout passes.
func waitUntil(ctx context.Context, what string, ready func() (bool, error), agentDone, cpDone <-chan error) error {
	deadline := time.Now().Add(upReadyTimeout)
	for {
		ok, err := ready()
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("waited %s for %s (last: %v)", upReadyTimeout, what, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-agentDone:
			return fmt.Errorf("agent stopped: %w", err)
		case err := <-cpDone:
			return fmt.Errorf("control plane stopped: %w", err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// interrupted turns the error of a wait cut short by SIGINT/SIGTERM into a
// clean exit.
func interrupted(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// listsCapability reports whether the agent's aggregate view lists the
// capability name: the agent then holds the verified demo configuration.
func listsCapability(ctx context.Context, agentURL, name string) (bool, error) {
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	c := mcp.NewClient(&mcp.Implementation{Name: "mcpready-up", Version: demo.ServerVersion}, nil)
	cs, err := c.Connect(lctx, &mcp.StreamableClientTransport{Endpoint: agentURL, DisableStandaloneSSE: true, MaxRetries: -1}, nil)
	if err != nil {
		return false, err
	}
	defer cs.Close()
	for t, err := range cs.Tools(lctx, nil) {
		if err != nil {
			return false, err
		}
		if t.Name == name {
			return true, nil
		}
	}
	return false, fmt.Errorf("%s not listed yet", name)
}
