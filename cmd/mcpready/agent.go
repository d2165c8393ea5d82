package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/mcpready/mcpready/agent"
	"github.com/mcpready/mcpready/agent/subscribe"
	"github.com/mcpready/mcpready/sign"
)

var agentFlags struct {
	controlPlane, root, nodeID, labels, listen, data, config, key string
	tlsCA, tlsCert, tlsKey                                        string
	allowNonLoopback, sotw                                        bool
}

var agentCmd = &cobra.Command{
	Use:   "agent --root ROOT.pub --data DIR [--controlplane ADDR] [--node-id ID] [--labels k=v,...] [--listen 127.0.0.1:PORT] [--config agent.yaml] [--key AGENT.key]",
	Short: "Run the host agent: the local MCP front that decides, routes, validates and records every tool call",
	Long: `Run the host agent.

It follows the control plane's Discovery stream, verifies every resource
against the pinned root key and the TrustPolicy, keeps the last known good
configuration in --data and keeps routing from it when the control plane is
unreachable. AI agents on this host talk MCP to it:

  /mcp                  every permitted capability and tool (<server>__<tool>)
  /mcp/servers/<name>   a transparent view of one upstream server
  /metrics, /healthz

--config names the agent configuration file (YAML): local principals by
bearer token, a default principal for requests without a token, and
upstream endpoints with their credentials (token files or environment
variables). The agent key (--key, password from $MCPREADY_PASSWORD) signs
receipt batches; without it a key is created in --data/agent.key.`,
	Args: noArgs,
	RunE: runAgent,
}

func init() {
	fl := agentCmd.Flags()
	fl.StringVar(&agentFlags.controlPlane, "controlplane", "", "control plane gRPC address (empty: run from the last known good configuration)")
	fl.StringVar(&agentFlags.root, "root", "", "pinned root public key (PEM)")
	fl.StringVar(&agentFlags.nodeID, "node-id", "", "node id (default: host name)")
	fl.StringVar(&agentFlags.labels, "labels", "", "scoping labels k=v,... (region, tenant-classes, host)")
	fl.StringVar(&agentFlags.listen, "listen", agent.DefaultListen, "front address (loopback only unless --allow-non-loopback)")
	fl.BoolVar(&agentFlags.allowNonLoopback, "allow-non-loopback", false, "allow a non-loopback --listen address")
	fl.StringVar(&agentFlags.data, "data", "", "data directory (last known good configuration, receipt spool)")
	fl.StringVar(&agentFlags.config, "config", "", "agent configuration file (principals, upstreams)")
	fl.StringVar(&agentFlags.key, "key", "", "agent signing key for receipt batches")
	fl.StringVar(&agentFlags.tlsCA, "tls-ca", os.Getenv("MCPREADY_CLIENT_CA"), "CA of the control plane's certificate: connect with TLS (env MCPREADY_CLIENT_CA)")
	fl.StringVar(&agentFlags.tlsCert, "tls-cert", os.Getenv("MCPREADY_CLIENT_CERT"), "client certificate for mTLS to the control plane (env MCPREADY_CLIENT_CERT)")
	fl.StringVar(&agentFlags.tlsKey, "tls-key", os.Getenv("MCPREADY_CLIENT_KEY"), "client key for mTLS to the control plane (env MCPREADY_CLIENT_KEY)")
	fl.BoolVar(&agentFlags.sotw, "sotw", false, "use the state-of-the-world Discovery variant instead of the incremental one")
	agentCmd.SetFlagErrorFunc(usageError)
	root.AddCommand(agentCmd)
}

// parseLabels parses "k=v,k2=v2".
func parseLabels(s string) (map[string]string, error) {
	out := map[string]string{}
	for _, kv := range strings.Split(s, ",") {
		kv = strings.TrimSpace(kv)
		if kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("label %q is not k=v", kv)
		}
		out[k] = v
	}
	return out, nil
}

func runAgent(cmd *cobra.Command, _ []string) error {
	defer resetFlags(cmd)
	f := agentFlags
	if f.root == "" || f.data == "" {
		return withCode(exitUsage, fmt.Errorf("agent: --root and --data are required"))
	}
	labels, err := parseLabels(f.labels)
	if err != nil {
		return withCode(exitUsage, fmt.Errorf("agent: --labels: %w", err))
	}
	rootKey, err := sign.ReadPublicKeyFile(f.root)
	if err != nil {
		return withCode(exitUsage, fmt.Errorf("agent: --root: %w", err))
	}
	if f.nodeID == "" {
		if f.nodeID, err = os.Hostname(); err != nil {
			return withCode(exitUsage, fmt.Errorf("agent: --node-id: %w", err))
		}
	}
	creds, err := clientTLS(f.tlsCA, f.tlsCert, f.tlsKey)
	if err != nil {
		return withCode(exitUsage, fmt.Errorf("agent: --tls-*: %w", err))
	}
	opts := agent.Options{ControlPlane: f.controlPlane, ControlPlaneCreds: creds, Root: rootKey, NodeID: f.nodeID, Labels: labels, Listen: f.listen,
		AllowNonLoopback: f.allowNonLoopback, DataDir: f.data, Config: f.config, Logger: logger()}
	if f.sotw {
		opts.SyncMode = subscribe.ModeStateOfTheWorld
	}
	if f.key != "" {
		if opts.AgentKey, err = loadSigningKey(cmd, f.key); err != nil {
			return withCode(exitUsage, fmt.Errorf("agent: --key: %w", err))
		}
	}
	a, err := agent.New(opts)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	fmt.Fprintf(cmd.ErrOrStderr(), "mcpready agent listening on http://%s/mcp\n", a.Addr())
	return a.Run(ctx)
}
