package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/mcpready/mcpready/agent"
	"github.com/mcpready/mcpready/controlplane"
	"github.com/mcpready/mcpready/internal/demo"
	"github.com/mcpready/mcpready/internal/loopback"
)

// upOptions are the flags of up.
type upOptions struct {
	data          string
	cpListen      string
	metricsListen string
	agentListen   string
	receiptsStore string
}

func newUpCmd() *cobra.Command {
	o := &upOptions{}
	cmd := &cobra.Command{
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

Then:  mcpready demo calls     (five calls that show each idea)
       mcpready receipts tail  (what the agent recorded)`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := controlplane.CheckReceiptStore(receiptsStore(o.receiptsStore)); err != nil {
				return usagef("up: --receipts-store: %w", err)
			}
			return runUp(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), demo.StackOptions{
				DataDir: o.data, ControlPlaneListen: o.cpListen, MetricsListen: o.metricsListen, AgentListen: o.agentListen,
				ReceiptsStore: receiptsStore(o.receiptsStore),
			})
		},
	}
	fl := cmd.Flags()
	def := os.Getenv("MCPREADY_DATA")
	if def == "" {
		def = ".mcpready"
	}
	fl.StringVar(&o.data, "data", def, "data directory: keys, artifacts, etcd, receipts, agent state (env MCPREADY_DATA)")
	fl.StringVar(&o.cpListen, "controlplane-listen", controlplane.DefaultListen, "control plane gRPC address (loopback; port 0 picks a free one)")
	fl.StringVar(&o.metricsListen, "metrics-listen", controlplane.DefaultMetricsListen, "control plane /metrics, /healthz and /console/ address (loopback)")
	addReceiptsStoreFlag(fl, &o.receiptsStore)
	fl.StringVar(&o.agentListen, "agent-listen", agent.DefaultListen, "agent MCP address (loopback)")
	return cmd
}

// errNotLoopback is returned for a listen address off loopback: up is a
// single-machine demo with plaintext everywhere.
var errNotLoopback = errors.New("up listens on loopback only")

func checkLoopback(flag, addr string) error {
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return usagef("--%s %q: %w", flag, addr, err)
	}
	if !loopback.Is(addr) {
		return usagef("--%s %q: %w", flag, addr, errNotLoopback)
	}
	return nil
}

func runUp(parent context.Context, out, errOut io.Writer, o demo.StackOptions) error {
	for _, a := range [][2]string{{"controlplane-listen", o.ControlPlaneListen}, {"metrics-listen", o.MetricsListen}, {"agent-listen", o.AgentListen}} {
		if err := checkLoopback(a[0], a[1]); err != nil {
			return err
		}
	}
	if parent == nil {
		parent = context.Background()
	}
	ctx, stop := signal.NotifyContext(parent, os.Interrupt, syscall.SIGTERM)
	defer stop()
	o.Logger = logger(errOut)
	// The agent logs warnings and errors only: up prints what matters.
	o.AgentLogger = slog.New(slog.NewTextHandler(errOut, &slog.HandlerOptions{Level: slog.LevelWarn}))
	st, err := demo.StartStack(ctx, o)
	if err != nil {
		if ctx.Err() != nil {
			return nil // interrupted while starting
		}
		return err
	}
	defer st.Close()

	fmt.Fprintf(out, "agent MCP endpoint: %s\n", st.AgentURL)
	fmt.Fprintf(out, "default principal: requests without a token act as principal class %s (quickstart only; shipped agent configurations set none)\n", demo.PrincipalClass)
	fmt.Fprintf(out, "control plane: %s\n", st.ControlPlane)
	if st.Console != "" {
		fmt.Fprintf(out, "console: %s\n", st.Console)
	}
	fmt.Fprintf(out, "keys: %s\n", st.KeysDir)
	fmt.Fprintf(out, "data: %s\n", st.DataDir)
	fmt.Fprintf(out, "try: mcpready demo calls --agent %s --server %s\n", st.AgentURL, st.ControlPlane)
	fmt.Fprintln(out, "stop: Ctrl-C (data is kept for the next start)")

	select {
	case <-ctx.Done():
		o.Logger.Info("shutting down")
		return nil
	case err := <-st.Done():
		return err
	}
}
