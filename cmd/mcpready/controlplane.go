package main

import (
	"crypto"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/mcpready/mcpready/controlplane"
	"github.com/mcpready/mcpready/controlplane/authz"
	"github.com/mcpready/mcpready/sign"
)

// controlPlaneOptions are the flags of controlplane (a server: its TLS
// flags are the server's certificate and the CA of client certificates).
type controlPlaneOptions struct {
	data, root, listen, metrics, etcd   string
	tlsCert, tlsKey, tlsCA, observerKey string
	etcdCA, etcdCert, etcdKey           string
	etcdUser, etcdPasswordFile          string
	roles, nodeLabels                   []string
	retention, evidenceWindow           time.Duration
	receiptsStore, trustMark            string

	agentReceiptsRate, agentReceiptsBurst int
}

func newControlPlaneCmd() *cobra.Command {
	o := &controlPlaneOptions{}
	cmd := &cobra.Command{
		Use:   "controlplane --data DIR --root ROOT.pub [flags]",
		Short: "Run the control plane: Admin, Discovery and Receipts over gRPC, state in etcd",
		Long: `Run one control-plane replica. Artifacts live in etcd: an embedded
single-node etcd in DIR/etcd by default, or an external cluster with
--etcd-endpoints (any number of replicas may share it). Receipts are kept in
DIR/receipts, or with --receipts-store postgres://… in a PostgreSQL database
shared by every replica (TLS required off loopback). Every write is verified against the active TrustPolicy; the
TrustPolicy itself against --root.

Plaintext is refused off loopback: give --tls-cert and --tls-key (and
--tls-ca to require client certificates). --observer-key is the control
plane's own key for lifecycle changes (grant it Evidence and RegistryEntry in
the TrustPolicy); its password is read as for keygen. /metrics, /healthz and
the read-only web console (/console/, reader role) are served on
--metrics-listen; off loopback that listener needs --tls-ca, and /metrics
there is served only over TLS to a reader or admin certificate (/healthz
stays plaintext for probes). SIGINT/SIGTERM shut down cleanly.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd) },
	}
	fl := cmd.Flags()
	fl.StringVar(&o.data, "data", "", "data directory (embedded etcd, receipts)")
	fl.StringVar(&o.root, "root", "", "root public key (PEM) that signs TrustPolicies")
	fl.StringVar(&o.listen, "listen", controlplane.DefaultListen, "gRPC listen address")
	fl.StringVar(&o.metrics, "metrics-listen", controlplane.DefaultMetricsListen, `/metrics, /healthz and /console/ address ("off" disables; off loopback: needs --tls-ca, /metrics only to reader certificates)`)
	fl.StringVar(&o.etcd, "etcd-endpoints", "", "external etcd endpoints, comma-separated (empty: embedded etcd)")
	fl.StringVar(&o.etcdCA, "etcd-ca", "", "CA certificate (PEM) that verifies the external etcd's server certificate; required for etcd off loopback")
	fl.StringVar(&o.etcdCert, "etcd-cert", "", "client certificate (PEM) for etcd's client-certificate auth")
	fl.StringVar(&o.etcdKey, "etcd-key", "", "key of --etcd-cert")
	fl.StringVar(&o.etcdUser, "etcd-user", "", "etcd user (etcd's own authentication)")
	fl.StringVar(&o.etcdPasswordFile, "etcd-password-file", "", "file holding the password of --etcd-user")
	fl.StringVar(&o.tlsCert, "tls-cert", "", "server certificate (PEM)")
	fl.StringVar(&o.tlsKey, "tls-key", "", "server private key (PEM)")
	fl.StringVar(&o.tlsCA, "tls-ca", "", "CA that client certificates must chain to (enables mTLS)")
	fl.StringArrayVar(&o.nodeLabels, "node-labels", nil, `node labels the agents matching PATTERN may claim besides those their certificates carry (URI SANs urn:mcpready:node-label:KEY:VALUE): PATTERN=region:eu-west|eu-north;tenant-class:gold;host:h1, repeatable; under mTLS any other claimed label is refused`)
	fl.StringArrayVar(&o.roles, "role", nil, `grant a role to client-certificate identities: PATTERN=admin|agent|reader, repeatable (required with --tls-ca); PATTERN matches the certificate's first URI SAN, else DNS SAN, else CN ("*" within one "/" segment)`)
	fl.StringVar(&o.trustMark, "trust-mark", "", "TrustPolicy bundle (root-signed, e.g. the chain head you applied) taken as this replica's TrustPolicy high-water mark when it holds none or an older one, so that a new replica refuses an etcd that holds an older TrustPolicy")
	fl.StringVar(&o.observerKey, "observer-key", "", "control plane's own signing key for lifecycle changes and passive Evidence")
	fl.DurationVar(&o.retention, "receipt-retention", 0, "drop receipt segments (database: whole days) older than this (0 keeps everything)")
	addReceiptsStoreFlag(fl, &o.receiptsStore)
	fl.DurationVar(&o.evidenceWindow, "evidence-window", 0, "window over which receipts are folded into passive Evidence (0: 5m)")
	fl.IntVar(&o.agentReceiptsRate, "agent-receipts-per-second", 0, "most receipts one agent may upload per second, sustained, to this replica; a batch over it is refused unverified as agent-rate-limited and resent by the agent later (0: 5000; negative: no bound)")
	fl.IntVar(&o.agentReceiptsBurst, "agent-receipts-burst", 0, "most receipts one agent may upload at once after a quiet spell, e.g. its backlog after an outage (0: 300000, about a full agent spool)")
	return cmd
}

func (o *controlPlaneOptions) run(cmd *cobra.Command) error {
	f := o
	if f.data == "" || f.root == "" {
		return usagef("controlplane: --data and --root are required")
	}
	rootKey, err := sign.ReadPublicKeyFile(f.root)
	if err != nil {
		return usagef("controlplane: --root: %w", err)
	}
	var observer crypto.Signer
	if f.observerKey != "" {
		if observer, err = loadSigningKey(cmd, f.observerKey); err != nil {
			return usagef("controlplane: --observer-key: %w", err)
		}
	}
	var endpoints []string
	for e := range strings.SplitSeq(f.etcd, ",") {
		if e = strings.TrimSpace(e); e != "" {
			endpoints = append(endpoints, e)
		}
	}
	if err := os.MkdirAll(f.data, 0o700); err != nil {
		return err
	}
	tlsCfg, err := serverTLS(f.tlsCert, f.tlsKey, f.tlsCA)
	if err != nil {
		return usagef("controlplane: %w", err)
	}
	var roles []authz.Rule
	for _, r := range f.roles {
		rule, err := authz.ParseRule(r)
		if err != nil {
			return usagef("controlplane: --role: %w", err)
		}
		roles = append(roles, rule)
	}
	var etcdTLS *tls.Config
	if (f.etcdCA != "" || f.etcdCert != "" || f.etcdKey != "" || f.etcdUser != "") && len(endpoints) == 0 {
		return usagef("controlplane: --etcd-ca, --etcd-cert, --etcd-key and --etcd-user are for an external etcd (--etcd-endpoints)")
	}
	if f.etcdCA != "" || f.etcdCert != "" || f.etcdKey != "" {
		if etcdTLS, err = controlplane.EtcdClientTLS(f.etcdCA, f.etcdCert, f.etcdKey); err != nil {
			return usagef("controlplane: --etcd-ca/--etcd-cert/--etcd-key: %w", err)
		}
	}
	var etcdPassword string
	if f.etcdPasswordFile != "" {
		b, err := os.ReadFile(f.etcdPasswordFile)
		if err != nil {
			return usagef("controlplane: --etcd-password-file: %w", err)
		}
		etcdPassword = strings.TrimSpace(string(b))
	}
	if (f.etcdUser == "") != (f.etcdPasswordFile == "") {
		return usagef("controlplane: --etcd-user and --etcd-password-file go together")
	}
	var nodeLabels []authz.LabelRule
	for _, r := range f.nodeLabels {
		lr, err := authz.ParseLabelRule(r)
		if err != nil {
			return usagef("controlplane: --node-labels: %w", err)
		}
		nodeLabels = append(nodeLabels, lr)
	}
	var trustSeed []byte
	if f.trustMark != "" {
		if trustSeed, err = os.ReadFile(f.trustMark); err != nil {
			return usagef("controlplane: --trust-mark: %w", err)
		}
	}
	opts := controlplane.Options{Listen: f.listen, NodeLabels: nodeLabels, MetricsListen: f.metrics, DataDir: f.data, EtcdEndpoints: endpoints, Root: rootKey,
		EtcdTLS: etcdTLS, EtcdUsername: f.etcdUser, EtcdPassword: etcdPassword, TrustSeed: trustSeed,
		TLS: tlsCfg, Roles: roles, ObserverKey: observer, Logger: logger(cmd.ErrOrStderr()),
		Receipts: &controlplane.ReceiptOptions{Retention: f.retention, EvidenceWindow: f.evidenceWindow, Store: receiptsStore(f.receiptsStore),
			AgentReceiptsPerSecond: f.agentReceiptsRate, AgentReceiptsBurst: f.agentReceiptsBurst}}
	opts.Registry = prometheus.NewRegistry()
	opts.Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	srv, err := controlplane.New(opts)
	if err != nil {
		return withCode(exitUsage, err)
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return srv.Run(ctx)
}

// serverTLS reads the control plane's TLS files: nil without a
// certificate (plaintext); mTLS when caFile is given.
func serverTLS(certFile, keyFile, caFile string) (*tls.Config, error) {
	if (certFile == "") != (keyFile == "") || (caFile != "" && certFile == "") {
		return nil, errors.New("--tls-cert and --tls-key go together, and --tls-ca needs both")
	}
	if certFile == "" {
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("server certificate: %w", err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if caFile != "" {
		if cfg.ClientCAs, err = readCAPool(caFile, "client CA"); err != nil {
			return nil, err
		}
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}

// receiptsStoreEnv names the environment variable that sets
// --receipts-store, so a connection string with a password can come from
// a Secret instead of the command line.
const receiptsStoreEnv = "MCPREADY_RECEIPTS_STORE"

// addReceiptsStoreFlag adds --receipts-store (controlplane and up).
func addReceiptsStoreFlag(fl *pflag.FlagSet, p *string) {
	fl.StringVar(p, "receipts-store", "",
		`receipt store: empty for segments in the data directory, or a postgres:// URL shared by every replica (sslmode=verify-full or require off loopback; default $`+receiptsStoreEnv+`)`)
}

// receiptsStore is the flag's value, else the environment's (never shown
// as a flag default: it may hold a password).
func receiptsStore(flag string) string {
	if flag != "" {
		return flag
	}
	return os.Getenv(receiptsStoreEnv)
}
