package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/mcpready/mcpready/agent"
	"github.com/mcpready/mcpready/agent/config"
	"github.com/mcpready/mcpready/controlplane"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/internal/atomicfile"
)

// AgentNodeID is the node id of the demo's host agent.
const AgentNodeID = "demo-agent"

// StackOptions configures StartStack. Zero values take the defaults.
type StackOptions struct {
	// DataDir holds everything (keys, artifacts, etcd, receipts, agent
	// state); required.
	DataDir string
	// ControlPlaneListen, MetricsListen and AgentListen are loopback
	// addresses; "" means controlplane.DefaultListen,
	// controlplane.DefaultMetricsListen and agent.DefaultListen. Port 0
	// picks a free port.
	ControlPlaneListen, MetricsListen, AgentListen string
	// Logger receives the control plane's and the stack's logs; nil discards.
	Logger *slog.Logger
	// AgentLogger receives the agent's logs; nil discards.
	AgentLogger *slog.Logger
	// ReadyTimeout bounds each wait for the agent; 0 means 90s.
	ReadyTimeout time.Duration
	// EvidenceWindow is the window over which the control plane folds
	// receipts into passive Evidence; 0 means the aggregator's default.
	EvidenceWindow time.Duration
	// ReceiptsStore is "" (receipt segments in DataDir) or a postgres://
	// URL of a receipt database (controlplane.ReceiptOptions.Store).
	ReceiptsStore string
	// AgentConfig is the agent's configuration file; "" means AgentConfig.
	AgentConfig string
}

// Stack is the whole demo running in this process: the demo servers, a
// control plane with its embedded etcd and receipt store, and one host
// agent holding the verified demo configuration.
type Stack struct {
	// AgentURL is the agent's aggregate MCP endpoint.
	AgentURL string
	// ControlPlane is the control plane's gRPC address.
	ControlPlane string
	// Console is the URL of the control plane's read-only web console
	// ("" when its HTTP listener is off).
	Console string
	// KeysDir and DataDir are absolute paths.
	KeysDir, DataDir string
	Servers          *Servers

	admin mcpreadyv1.AdminServiceClient
	done  chan error
	stops []func() // run in reverse order by Close
}

// Errors of StartStack.
var (
	// ErrStopped reports a component of the stack that stopped on its own.
	ErrStopped = errors.New("demo: component stopped")
	// ErrDataInUse reports a data directory another stack is running from.
	ErrDataInUse = errors.New("demo: another mcpready up is using the data directory")
)

// StartStack starts the demo on loopback: it loads or creates the demo keys
// in DATA/keys, starts the demo servers (on the previous run's ports when
// free), signs the demo artifacts into DATA/artifacts (reusing unchanged
// bundles), starts the control plane in DATA/controlplane, applies the
// artifacts (the trust policy first), starts the agent in DATA/agent and
// waits until it lists the docs_lookup capability, i.e. holds the verified
// demo configuration. Close stops everything; the data is kept.
func StartStack(ctx context.Context, o StackOptions) (st *Stack, err error) {
	if o.DataDir == "" {
		return nil, fmt.Errorf("%w: DataDir is required", ErrParams)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.AgentLogger == nil {
		o.AgentLogger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.ReadyTimeout <= 0 {
		o.ReadyTimeout = 90 * time.Second
	}
	data, err := filepath.Abs(o.DataDir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(data, 0o700); err != nil {
		return nil, err
	}
	st = &Stack{DataDir: data, KeysDir: filepath.Join(data, "keys"), done: make(chan error, 2)}
	defer func() {
		if err != nil {
			st.Close()
			st = nil
		}
	}()
	unlock, err := lockDir(data)
	if err != nil {
		return st, err
	}
	st.stops = append(st.stops, unlock)
	keys, err := LoadOrCreateKeys(st.KeysDir)
	if err != nil {
		return st, err
	}
	signed, err := st.startServers(ctx, keys, o.Logger)
	if err != nil {
		return st, err
	}
	if err := st.startControlPlane(ctx, o, keys); err != nil {
		return st, err
	}
	if err := apply(ctx, st.admin, signed); err != nil {
		return st, err
	}
	if err := st.startAgent(o, keys); err != nil {
		return st, err
	}
	lists := func() (bool, error) { return listsTool(ctx, st.AgentURL, CapabilityDocsLookup) }
	if err := st.waitUntil(ctx, o.ReadyTimeout, "the agent to list "+CapabilityDocsLookup, lists); err != nil {
		return st, err
	}
	return st, nil
}

// startServers starts the demo servers and signs the artifacts naming them.
func (st *Stack) startServers(ctx context.Context, keys Keys, log *slog.Logger) ([]Signed, error) {
	statePath := filepath.Join(st.DataDir, "demo.json")
	state, err := LoadState(statePath)
	if err != nil {
		return nil, err
	}
	state = state.Fresh(time.Now())
	servers, err := StartServers(ServersOptions{Ports: state.Ports})
	if err != nil && len(state.Ports) > 0 {
		log.Info("the demo servers' previous ports are taken; using new ones", "err", err)
		servers, err = StartServers(ServersOptions{})
	}
	if err != nil {
		return nil, err
	}
	st.Servers = servers
	st.stops = append(st.stops, func() {
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		servers.Close(sctx)
	})
	state.Ports = map[string]int{}
	var listed []Listed
	for _, u := range servers.Upstreams() {
		p, err := url.Parse(u.URL)
		if err != nil {
			return nil, err
		}
		state.Ports[u.Name], _ = strconv.Atoi(p.Port())
		ls, err := ListTools(ctx, u.URL)
		if err != nil {
			return nil, err
		}
		listed = append(listed, Listed{Upstream: u, Server: ls})
	}
	if err := state.Save(statePath); err != nil {
		return nil, err
	}
	items, err := Build(Params{Keys: keys, AgentID: AgentNodeID, Servers: listed, Now: state.IssuedAt})
	if err != nil {
		return nil, err
	}
	return SignOrReuse(filepath.Join(st.DataDir, "artifacts"), items, keys)
}

// startControlPlane runs a control plane under DATA/controlplane with its
// receipt pipeline (store, ingest, and passive Evidence signed with the
// observer key).
func (st *Stack) startControlPlane(ctx context.Context, o StackOptions, keys Keys) error {
	dir := filepath.Join(st.DataDir, "controlplane")
	cp, err := controlplane.New(controlplane.Options{
		Listen: o.ControlPlaneListen, MetricsListen: o.MetricsListen, DataDir: dir,
		Root: keys[KeyRoot].Public(), ObserverKey: keys[KeyObserver],
		Receipts: &controlplane.ReceiptOptions{EvidenceWindow: o.EvidenceWindow, Store: o.ReceiptsStore}, Logger: o.Logger,
	})
	if err != nil {
		return err
	}
	st.run("control plane", cp.Run, o.Logger)
	conn, err := grpc.NewClient(cp.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	st.stops = append(st.stops, func() { conn.Close() })
	st.admin = mcpreadyv1.NewAdminServiceClient(conn)
	select {
	case <-cp.Ready():
		st.ControlPlane, st.Console = cp.Addr(), cp.ConsoleURL()
		return nil
	case err := <-st.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// startAgent runs the host agent under DATA/agent with the demo's agent
// configuration: requests without a token act as the demo principal.
func (st *Stack) startAgent(o StackOptions, keys Keys) error {
	dir := filepath.Join(st.DataDir, "agent")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	// The configuration is written beside the agent's data for the user to
	// read; the agent takes it parsed.
	text := AgentConfig
	if o.AgentConfig != "" {
		text = o.AgentConfig
	}
	if err := atomicfile.WriteFile(filepath.Join(dir, "config.yaml"), []byte(text), 0o600); err != nil {
		return err
	}
	cfg, err := config.Parse([]byte(text))
	if err != nil {
		return err
	}
	a, err := agent.New(agent.Options{
		ControlPlane: st.ControlPlane,
		Root:         keys[KeyRoot].Public(),
		NodeID:       AgentNodeID,
		Labels:       map[string]string{"region": RegionAgent, "tenant-classes": TenantClass, "host": hostname()},
		Listen:       o.AgentListen,
		DataDir:      dir,
		Config:       cfg,
		AgentKey:     keys[KeyAgent],
		Logger:       o.AgentLogger,
	})
	if err != nil {
		return err
	}
	st.AgentURL = "http://" + a.Addr() + "/mcp"
	st.run("agent", a.Run, o.Logger)
	return nil
}

// AgentConfig is the demo agent's configuration file.
var AgentConfig = fmt.Sprintf(`# Written by mcpready up: requests without a bearer token act as this principal.
defaultPrincipal:
  name: local
  principalClass: %s
  tenantClass: %s
`, PrincipalClass, TenantClass)

// run starts a component; Close cancels it and waits (bounded) for it.
// If it stops on its own, Done reports it.
func (st *Stack) run(name string, run func(context.Context) error, log *slog.Logger) {
	ctx, cancel := context.WithCancel(context.Background())
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		err := run(ctx)
		if ctx.Err() == nil {
			select {
			case st.done <- fmt.Errorf("%w: %s: %v", ErrStopped, name, err):
			default:
			}
		}
	}()
	st.stops = append(st.stops, func() {
		cancel()
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			log.Warn("component did not stop in time", "component", name)
		}
	})
}

// waitUntil polls ready every 200ms until it reports true, a component
// stops, ctx ends or timeout passes.
func (st *Stack) waitUntil(ctx context.Context, timeout time.Duration, what string, ready func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	for {
		ok, err := ready()
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("demo: waited %s for %s (last: %v)", timeout, what, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-st.done:
			return err
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Done reports a component that stopped on its own (not by Close).
func (st *Stack) Done() <-chan error { return st.done }

// Close stops the agent, the control plane and the servers, in that order.
// The data directory is kept.
func (st *Stack) Close() {
	for i := len(st.stops) - 1; i >= 0; i-- {
		st.stops[i]()
	}
	st.stops = nil
}

// apply applies signed artifacts in order; a bundle already stored byte for
// byte is reported unchanged by the control plane and not stored again.
func apply(ctx context.Context, admin mcpreadyv1.AdminServiceClient, signed []Signed) error {
	for _, s := range signed {
		actx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := admin.Apply(actx, &mcpreadyv1.ApplyRequest{Bundle: s.Bundle})
		cancel()
		if err != nil {
			return fmt.Errorf("demo: apply %s %s: %w", s.Object.Kind, s.Object.Metadata.Name, err)
		}
	}
	return nil
}

// listsTool reports whether the MCP endpoint lists the named tool.
func listsTool(ctx context.Context, endpoint, name string) (bool, error) {
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	c := mcp.NewClient(&mcp.Implementation{Name: "mcpready-up", Version: ServerVersion}, nil)
	cs, err := c.Connect(lctx, &mcp.StreamableClientTransport{Endpoint: endpoint, DisableStandaloneSSE: true, MaxRetries: -1}, nil)
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
	return false, fmt.Errorf("%s is not listed yet", name)
}

func hostname() string {
	h, err := os.Hostname()
	if err != nil {
		return "localhost"
	}
	return h
}
