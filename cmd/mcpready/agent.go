package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/mcpready/mcpready/agent"
	"github.com/mcpready/mcpready/agent/config"
	"github.com/mcpready/mcpready/agent/subscribe"
	"github.com/mcpready/mcpready/agent/telemetry"
	"github.com/mcpready/mcpready/sign"
)

// agentOptions are the flags of agent.
type agentOptions struct {
	controlPlane, root, nodeID, labels, listen, socket, data, config, key string
	policy, digestKey                                                     string
	tls                                                                   tlsOptions
	allowNonLoopback, sotw                                                bool
	maxStaleness                                                          time.Duration
	otel                                                                  telemetry.Options
}

func newAgentCmd() *cobra.Command {
	o := &agentOptions{}
	cmd := &cobra.Command{
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
bearer token or identity-provider JWT (requests without a token are refused
unless the file sets a default principal), upstream endpoints with their
credentials (token files or environment variables, or OAuth client
settings), and the limits on sessions, held calls, input rounds, HTTP and
session timeouts, the cold threshold and workflows (docs/operator.md,
"Limits"). The agent key (--key, password from $MCPREADY_PASSWORD) signs
receipt batches and drift reports; without it a key is created in
--data/agent.key (atomically; encrypted with $MCPREADY_PASSWORD when set).

OpenTelemetry traces and metrics (semantic conventions for MCP) are off
unless an OTLP endpoint is named: --otel-endpoint, or the standard
OTEL_EXPORTER_OTLP_ENDPOINT (and the other OTEL_* variables the OTLP
exporters read; OTEL_SDK_DISABLED=true turns them off).`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd) },
	}
	fl := cmd.Flags()
	fl.StringVar(&o.controlPlane, "controlplane", "", "control plane gRPC address (empty: run from the last known good configuration)")
	fl.StringVar(&o.root, "root", "", "pinned root public key (PEM)")
	fl.StringVar(&o.nodeID, "node-id", "", "node id (default: host name)")
	fl.StringVar(&o.labels, "labels", "", "scoping labels k=v,... (region, tenant-classes, host); an item without `=` is another value of the label before it (`tenant-classes=a,b`); a label given twice is refused")
	fl.StringVar(&o.listen, "listen", agent.DefaultListen, "front address (loopback only unless --allow-non-loopback)")
	fl.BoolVar(&o.allowNonLoopback, "allow-non-loopback", false, "allow a non-loopback --listen address")
	fl.StringVar(&o.socket, "socket", "", "also serve the front on this Unix-domain socket; a client is the principal its uid/gid maps to (config socketPrincipals)")
	fl.StringVar(&o.data, "data", "", "data directory (last known good configuration, receipt spool)")
	fl.StringVar(&o.config, "config", "", "agent configuration file (principals, upstreams)")
	fl.StringVar(&o.key, "key", "", "agent signing key for receipt batches")
	o.tls.addFlags(cmd)
	fl.StringVar(&o.otel.Endpoint, "otel-endpoint", "", "OTLP endpoint URL for traces and metrics (default $OTEL_EXPORTER_OTLP_ENDPOINT; empty: off)")
	fl.StringVar(&o.otel.Protocol, "otel-protocol", "", "OTLP protocol: grpc or http/protobuf (default $OTEL_EXPORTER_OTLP_PROTOCOL, else http/protobuf)")
	fl.BoolVar(&o.sotw, "sotw", false, "use the state-of-the-world Discovery variant instead of the incremental one")
	fl.StringVar(&o.digestKey, "receipt-digest-key", "", "file holding the organisation's key for receipt argument and result digests (HMAC-SHA256; at least 32 bytes)")
	fl.StringVar(&o.policy, "policy", "default", "the Policy this agent decides under; while it is not installed every call is refused, never decided under another")
	fl.DurationVar(&o.maxStaleness, "max-staleness", 0, "refuse every call (configuration_stale) while the TrustPolicy or a Policy was signed (issuedAt) longer ago than this; 0 is no limit, negative is refused")
	return cmd
}

// parseLabels parses "k=v,k2=v2"; spaces around items, keys and values
// are not part of them, and a key may be given once. An item without "="
// continues the value before it, so a label may list several values
// ("tenant-classes=a,b,region=eu": tenant-classes is "a,b").
func parseLabels(s string) (map[string]string, error) {
	out := map[string]string{}
	last := ""
	for _, kv := range strings.Split(s, ",") {
		kv = strings.TrimSpace(kv)
		if kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		k = strings.TrimSpace(k)
		if !ok && last != "" {
			out[last] += "," + kv
			continue
		}
		if !ok || k == "" {
			return nil, fmt.Errorf("label %q is not k=v", kv)
		}
		if _, dup := out[k]; dup {
			return nil, fmt.Errorf("label %q: %s given twice", kv, k)
		}
		out[k], last = strings.TrimSpace(v), k
	}
	return out, nil
}

func (o *agentOptions) run(cmd *cobra.Command) error {
	f := o
	if f.root == "" || f.data == "" {
		return usagef("agent: --root and --data are required")
	}
	labels, err := parseLabels(f.labels)
	if err != nil {
		return usagef("agent: --labels: %w", err)
	}
	rootKey, err := sign.ReadPublicKeyFile(f.root)
	if err != nil {
		return usagef("agent: --root: %w", err)
	}
	if f.nodeID == "" {
		if f.nodeID, err = os.Hostname(); err != nil {
			return usagef("agent: --node-id: %w", err)
		}
	}
	if f.maxStaleness < 0 {
		return usagef("agent: --max-staleness %s: want 0 (no limit) or a positive duration", f.maxStaleness)
	}
	creds, err := f.tls.credentials()
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	cfg, err := config.Load(f.config)
	if err != nil {
		return fmt.Errorf("agent: --config: %w", err)
	}
	opts := agent.Options{ControlPlane: f.controlPlane, ControlPlaneCreds: creds, Root: rootKey, NodeID: f.nodeID, Labels: labels, Listen: f.listen, Socket: f.socket,
		AllowNonLoopback: f.allowNonLoopback, DataDir: f.data, Config: cfg, Logger: logger(cmd.ErrOrStderr()), MaxStaleness: f.maxStaleness, PolicyName: f.policy}
	if f.sotw {
		opts.SyncMode = subscribe.ModeStateOfTheWorld
	}
	if f.key != "" {
		if opts.AgentKey, err = loadSigningKey(cmd, f.key); err != nil {
			return usagef("agent: --key: %w", err)
		}
	} else if pw, ok := os.LookupEnv("MCPREADY_PASSWORD"); ok && pw != "" {
		opts.AgentKeyPassword = []byte(pw) // --data/agent.key encrypted at rest
	}
	if f.digestKey != "" {
		k, err := os.ReadFile(f.digestKey)
		if err != nil {
			return usagef("agent: --receipt-digest-key: %w", err)
		}
		if k = bytes.TrimSpace(k); len(k) < 32 {
			return usagef("agent: --receipt-digest-key: %s holds %d bytes, want at least 32", f.digestKey, len(k))
		}
		opts.ReceiptDigestKey = k
	}
	f.otel.ServiceVersion = agent.Version
	if opts.Telemetry, err = telemetry.New(cmd.Context(), f.otel); err != nil {
		return usagef("agent: %w", err)
	}
	a, err := agent.New(opts)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = opts.Telemetry.Shutdown(sctx) // flush what is buffered
	}()
	fmt.Fprintf(cmd.ErrOrStderr(), "mcpready agent listening on http://%s/mcp\n", a.Addr())
	return a.Run(ctx)
}
