// Package controlplane wires the control plane together: etcd (embedded
// single node by default, or an external cluster), the artifact store, the
// Admin, Discovery and (optionally) Receipts gRPC services, the registry
// lifecycle sweep, gRPC health and Prometheus metrics.
//
// Construction goes one way: the store, then the one verified write path
// (package writer), then the registry lifecycle (which writes through the
// writer and learns of revisions from the store watch), then the Admin
// service (which writes through the writer and asks the lifecycle).
//
// Artifacts, lifecycle state and agents' receipt chain heads live in etcd,
// so any number of replicas may share one etcd cluster; only the receipt
// batches a replica received stay in its own data directory (queries answer
// from those). Plaintext is only allowed on loopback; anything else needs
// Options.TLS (mTLS when it requires client certificates).
//
// The package must not read configuration or key files (the CLI parses
// them and passes the result), and must not verify or store artifacts
// itself: only the writer does.
package controlplane

import (
	"context"
	"crypto"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/keepalive"

	"github.com/mcpready/mcpready/controlplane/admin"
	"github.com/mcpready/mcpready/controlplane/authz"
	"github.com/mcpready/mcpready/controlplane/console"
	"github.com/mcpready/mcpready/controlplane/discovery"
	"github.com/mcpready/mcpready/controlplane/etcdembed"
	"github.com/mcpready/mcpready/controlplane/leader"
	"github.com/mcpready/mcpready/controlplane/lifecycle"
	"github.com/mcpready/mcpready/controlplane/store"
	"github.com/mcpready/mcpready/controlplane/writer"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/internal/loopback"
	"github.com/mcpready/mcpready/internal/tlssniff"
	"github.com/mcpready/mcpready/sign"
)

// Defaults.
const (
	DefaultListen        = "127.0.0.1:7443"
	DefaultMetricsListen = "127.0.0.1:7444"
	// TrustMarkFile is the TrustPolicy high-water mark's file in DataDir.
	TrustMarkFile = "trust-highwater.json"
	// DefaultStreamsPerConnection is Options.StreamsPerConnection's
	// default: an agent holds a few streams (Discovery, receipt upload,
	// drift reports), an admin client one per command.
	DefaultStreamsPerConnection = 128
	// DefaultHandshakeTimeout is Options.HandshakeTimeout's default.
	DefaultHandshakeTimeout = 10 * time.Second
)

// Errors.
var (
	ErrConfig          = errors.New("invalid control plane configuration")
	ErrEtcdUnreachable = errors.New("etcd unreachable")
)

// Options configures a Server. Zero values take the documented defaults.
type Options struct {
	// Listen is the gRPC address; "" means DefaultListen.
	Listen string
	// MetricsListen serves /metrics, /healthz and the read-only web
	// console under /console/ (package console), in plaintext and, when
	// TLS is set, also in TLS on the same port (client certificates
	// verified when given, never required: probes present none); "" means
	// DefaultMetricsListen, "off" disables it. A non-loopback address
	// needs mTLS (TLS with a client CA), and there /metrics is served only
	// over TLS to a client certificate with the reader or admin role;
	// /healthz stays plaintext for kubelet probes on any address.
	MetricsListen string
	// DataDir holds the embedded etcd in <DataDir>/etcd; required unless
	// EtcdEndpoints is set. It also keeps, outside etcd, the newest
	// TrustPolicy this replica accepted (TrustMarkFile in DataDir,
	// controlplane/writer's high-water mark), so that an etcd that holds an
	// older one again cannot make the write path trust a revoked key, also
	// after a restart; without DataDir the mark lasts as long as the process.
	DataDir string
	// TrustSeed is a root-signed TrustPolicy bundle (the chain head the
	// operator applied) this replica takes as its high-water mark when it
	// holds none or an older one (writer.Options.TrustSeed): a replica that
	// starts without its mark then refuses an etcd holding an older
	// TrustPolicy from its first write. Nil seeds nothing; a seed that does
	// not verify fails New.
	TrustSeed []byte
	// EtcdEndpoints selects an external etcd cluster instead of the
	// embedded one.
	EtcdEndpoints []string
	// EtcdTLS is the TLS client configuration for an external etcd (its
	// CA in RootCAs, a client certificate for client-cert auth); nil is
	// plaintext, which New refuses for an endpoint off loopback.
	EtcdTLS *tls.Config
	// EtcdUsername and EtcdPassword authenticate to etcd's own auth
	// (etcd users and roles); empty is none.
	EtcdUsername, EtcdPassword string
	// Root is the organisation's root public key; required.
	Root crypto.PublicKey
	// TLS is the gRPC listener's TLS configuration: a server certificate
	// and, for mTLS, ClientCAs with ClientAuth set to
	// tls.RequireAndVerifyClientCert. It is cloned, and a MinVersion below
	// TLS 1.2 is raised to 1.2. Nil means plaintext, which is only allowed
	// on a loopback address.
	TLS *tls.Config
	// Roles map verified client-certificate identities to roles (see
	// package authz): admin writes, agent runs Discovery, receipt upload
	// and drift reports for its own node id, reader queries. They are
	// required with mTLS, which is required off loopback. Without client
	// certificates (plaintext, or TLS without ClientCAs, both loopback
	// only) every loopback caller holds every role: the single-machine
	// quickstart. Zero: no certificate holds a role.
	Roles []authz.Rule
	// NodeLabels grants node labels to agents' certificate identities
	// beyond those their certificates carry (authz.Options.NodeLabels).
	// Under mTLS an agent may claim only labels bound to its identity
	// either way; nil: only its certificate's. Without client
	// certificates (the loopback quickstart) labels are self-asserted,
	// and New logs so.
	NodeLabels []authz.LabelRule
	// ObserverKey is the control plane's own signing key, used for
	// lifecycle state changes (see package lifecycle); nil means state
	// changes are recorded but not distributed.
	ObserverKey crypto.Signer
	// Receipts, if set, runs the receipt pipeline: the ReceiptsService,
	// the on-disk receipt store and passive-evidence aggregation.
	Receipts *ReceiptOptions
	// Registry receives the metrics; nil means a new registry.
	Registry *prometheus.Registry
	// Debounce of discovery pushes; 0 means 100ms.
	Debounce time.Duration
	// StreamsPerConnection is the most RPC streams one client connection
	// may have open at once (HTTP/2 MAX_CONCURRENT_STREAMS): a further one
	// waits until one ends. 0 means DefaultStreamsPerConnection.
	StreamsPerConnection uint32
	// HandshakeTimeout bounds a new connection's set-up (TLS and HTTP/2):
	// a peer that has not completed it by then is disconnected. 0 means
	// DefaultHandshakeTimeout.
	HandshakeTimeout time.Duration
	// SweepInterval of the lifecycle's evidence-expiry sweep; 0 means 1m.
	SweepInterval time.Duration
	// MaxArtifactBytes; 0 means store.DefaultMaxBytes (1 MiB).
	MaxArtifactBytes int
	// EtcdWait bounds how long Run waits for etcd at start, retrying with
	// backoff; 0 means 30s.
	EtcdWait time.Duration
	// Logger; nil discards.
	Logger *slog.Logger
}

// Server is one control-plane replica.
type Server struct {
	o    Options
	lis  net.Listener
	mlis net.Listener
	mtls bool // mlis also serves TLS
	// scrapeTLS: mlis is not on loopback, so /metrics needs TLS and a
	// reader or admin client certificate.
	scrapeTLS bool
	// scrapeRefused counts refused /metrics requests by reason.
	scrapeRefused *prometheus.CounterVec
	creds         credentials.TransportCredentials
	authz         *authz.Authorizer
	reg           *prometheus.Registry
	etcdErr       prometheus.Counter
	ready         chan struct{}

	mu     sync.Mutex
	writer *writer.Writer
}

// New validates o and binds the listeners; Run serves.
func New(o Options) (*Server, error) {
	if o.Listen == "" {
		o.Listen = DefaultListen
	}
	if o.MetricsListen == "" {
		o.MetricsListen = DefaultMetricsListen
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.SweepInterval <= 0 {
		o.SweepInterval = time.Minute
	}
	if o.EtcdWait <= 0 {
		o.EtcdWait = 30 * time.Second
	}
	if o.StreamsPerConnection == 0 {
		o.StreamsPerConnection = DefaultStreamsPerConnection
	}
	if o.HandshakeTimeout <= 0 {
		o.HandshakeTimeout = DefaultHandshakeTimeout
	}
	if o.Root == nil {
		return nil, fmt.Errorf("%w: the root public key is required", ErrConfig)
	}
	if o.DataDir == "" && len(o.EtcdEndpoints) == 0 {
		return nil, fmt.Errorf("%w: a data directory or etcd endpoints are required", ErrConfig)
	}
	if o.Receipts != nil {
		if err := CheckReceiptStore(o.Receipts.Store); err != nil {
			return nil, err
		}
	}
	if len(o.TrustSeed) > 0 { // checked again, against the mark, when Run opens the write path
		if _, err := sign.NewTrust(o.TrustSeed, o.Root, time.Now()); err != nil {
			return nil, fmt.Errorf("%w: TrustPolicy seed: %w", ErrConfig, err)
		}
	}
	for _, e := range o.EtcdEndpoints {
		if o.EtcdTLS == nil && !loopback.Is(etcdHostPort(e)) {
			return nil, fmt.Errorf("%w: refusing plaintext to etcd at %q, off loopback; configure etcd TLS (CA, client certificate and key)", ErrConfig, e)
		}
	}
	s := &Server{o: o, ready: make(chan struct{}), reg: o.Registry}
	if s.reg == nil {
		s.reg = prometheus.NewRegistry()
		s.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	s.etcdErr = prometheus.NewCounter(prometheus.CounterOpts{Name: "mcpready_etcd_errors_total", Help: "Failed etcd operations."})
	s.reg.MustRegister(s.etcdErr)
	s.scrapeRefused = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "mcpready_metrics_scrapes_refused_total",
		Help: "Refused /metrics requests on a non-loopback listener, by reason (plaintext, unauthenticated, forbidden)."}, []string{"reason"})
	s.reg.MustRegister(s.scrapeRefused)
	if o.TLS != nil {
		if len(o.TLS.Certificates) == 0 && o.TLS.GetCertificate == nil && o.TLS.GetConfigForClient == nil {
			return nil, fmt.Errorf("%w: the TLS configuration has no server certificate", ErrConfig)
		}
		cfg := o.TLS.Clone()
		cfg.MinVersion = max(cfg.MinVersion, tls.VersionTLS12)
		s.creds = credentials.NewTLS(cfg)
	} else if !loopback.Is(o.Listen) {
		return nil, fmt.Errorf("%w: refusing plaintext on non-loopback address %q; configure TLS", ErrConfig, o.Listen)
	}
	mtls := o.TLS != nil && o.TLS.ClientAuth == tls.RequireAndVerifyClientCert && o.TLS.ClientCAs != nil
	switch {
	case !mtls && !loopback.Is(o.Listen):
		return nil, fmt.Errorf("%w: off loopback (%q) the control plane needs client certificates: give a client CA (mTLS)", ErrConfig, o.Listen)
	case mtls && len(o.Roles) == 0:
		return nil, fmt.Errorf("%w: mTLS without role rules authorises nobody: map certificate identities to admin, agent and reader", ErrConfig)
	}
	az, err := authz.New(authz.Options{Rules: o.Roles, NodeLabels: o.NodeLabels, LocalPlaintext: !mtls, Logger: o.Logger, Registerer: s.reg})
	if !mtls {
		o.Logger.Warn("loopback quickstart: callers without a client certificate hold every role and agents' node labels (region, tenant classes, host) are self-asserted; give a client CA (mTLS) to bind them to certificate identities")
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	s.authz = az
	lis, err := net.Listen("tcp", o.Listen)
	if err != nil {
		return nil, fmt.Errorf("%w: listen %s: %w", ErrConfig, o.Listen, err)
	}
	s.lis = lis
	if o.MetricsListen != "off" {
		if s.scrapeTLS = !loopback.Is(o.MetricsListen); s.scrapeTLS && !mtls {
			lis.Close()
			return nil, fmt.Errorf("%w: refusing non-loopback metrics address %q without mTLS (TLS with a client CA): /metrics off loopback is served only to reader certificates", ErrConfig, o.MetricsListen)
		}
		if s.mlis, err = net.Listen("tcp", o.MetricsListen); err != nil {
			lis.Close()
			return nil, fmt.Errorf("%w: listen %s: %w", ErrConfig, o.MetricsListen, err)
		}
		if o.TLS != nil {
			// TLS beside plaintext on the same port: probes and scrapes stay
			// plaintext, the console is reached with a client certificate.
			hcfg := o.TLS.Clone()
			hcfg.MinVersion = max(hcfg.MinVersion, tls.VersionTLS12)
			hcfg.NextProtos = []string{"http/1.1"}
			if hcfg.ClientAuth == tls.RequireAndVerifyClientCert {
				hcfg.ClientAuth = tls.VerifyClientCertIfGiven
			}
			s.mlis, s.mtls = tlssniff.New(s.mlis, hcfg, 0), true
		}
	}
	return s, nil
}

// Addr is the bound gRPC address.
func (s *Server) Addr() string { return s.lis.Addr().String() }

// MetricsAddr is the bound metrics address, or "" when disabled.
func (s *Server) MetricsAddr() string {
	if s.mlis == nil {
		return ""
	}
	return s.mlis.Addr().String()
}

// ConsoleURL is the web console's address on the HTTP listener (https
// when the Server has TLS: the listener then also speaks TLS, and the
// console needs a client certificate under mTLS), or "" when that
// listener is disabled.
func (s *Server) ConsoleURL() string {
	if s.mlis == nil {
		return ""
	}
	scheme := "http://"
	if s.mtls {
		scheme = "https://"
	}
	return scheme + s.mlis.Addr().String() + console.Prefix
}

// Registry is the metrics registry (for services such as Receipts to
// register on before Run).
func (s *Server) Registry() *prometheus.Registry { return s.reg }

// Ready is closed once etcd is reachable and every service is serving.
func (s *Server) Ready() <-chan struct{} { return s.ready }

// Trust returns the active verified TrustPolicy, or nil before one is
// stored or before Run has connected to etcd. Safe for concurrent use.
func (s *Server) Trust() *sign.Trust {
	s.mu.Lock()
	w := s.writer
	s.mu.Unlock()
	if w == nil {
		return nil
	}
	return w.Current()
}

// etcdHostPort is the host:port of an etcd endpoint ("https://h:p", "h:p").
func etcdHostPort(endpoint string) string {
	if _, rest, ok := strings.Cut(endpoint, "://"); ok {
		return rest
	}
	return endpoint
}

// Run starts etcd (embedded unless endpoints were given), waits for it,
// serves until ctx ends, then shuts down cleanly. It returns an error
// wrapping ErrEtcdUnreachable if etcd cannot be reached within EtcdWait.
func (s *Server) Run(ctx context.Context) error {
	defer s.lis.Close()
	if s.mlis != nil {
		defer s.mlis.Close()
	}
	endpoints := s.o.EtcdEndpoints
	if len(endpoints) == 0 {
		dir := filepath.Join(s.o.DataDir, "etcd")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return err
		}
		// etcd logs only fatal conditions: its error level is noisy on every clean shutdown.
		m, err := etcdembed.StartSingle(etcdembed.Options{Dir: dir, ProgressNotifyInterval: 5 * time.Second, LogLevel: "fatal"})
		if err != nil {
			return err
		}
		defer m.Close()
		endpoints = []string{m.ClientURL}
		s.o.Logger.Info("embedded etcd started", "dir", dir, "client", m.ClientURL)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		TLS: s.o.EtcdTLS, Username: s.o.EtcdUsername, Password: s.o.EtcdPassword})
	if err != nil {
		return fmt.Errorf("%w: %w", ErrEtcdUnreachable, err)
	}
	defer cli.Close()
	if err := s.waitEtcd(ctx, cli, endpoints); err != nil {
		return err
	}

	st := store.New(cli, store.Options{MaxBytes: s.o.MaxArtifactBytes, OnError: func(error) { s.etcdErr.Inc() }})
	markPath := ""
	if s.o.DataDir != "" {
		markPath = filepath.Join(s.o.DataDir, TrustMarkFile)
	}
	w, err := writer.New(writer.Options{Store: st, Root: s.o.Root, Logger: s.o.Logger, Registerer: s.reg, TrustMarkPath: markPath, TrustSeed: s.o.TrustSeed})
	if err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	lc, err := lifecycle.New(lifecycle.Options{Writer: w, Signer: s.o.ObserverKey, Logger: s.o.Logger, Registerer: s.reg})
	if err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	adm := admin.New(admin.Options{Writer: w, Lifecycle: lc})
	s.mu.Lock()
	s.writer = w
	s.mu.Unlock()
	var receipts *receiptPipeline
	if s.o.Receipts != nil {
		if receipts, err = s.openReceipts(ctx, w, st, cli); err != nil {
			return err
		}
		defer receipts.close()
	}
	ds := discovery.New(st, discovery.Options{Debounce: s.o.Debounce, Metrics: discovery.NewMetrics(s.reg), Logger: s.o.Logger})

	opts := []grpc.ServerOption{
		grpc.ConnectionTimeout(s.o.HandshakeTimeout),
		grpc.MaxConcurrentStreams(s.o.StreamsPerConnection),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 5 * time.Second, PermitWithoutStream: true}),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: 30 * time.Second, Timeout: 10 * time.Second}),
		grpc.UnaryInterceptor(s.authz.UnaryInterceptor()),
		grpc.StreamInterceptor(s.authz.StreamInterceptor()),
	}
	if s.creds != nil {
		opts = append(opts, grpc.Creds(s.creds))
	}
	gs := grpc.NewServer(opts...)
	hs := health.NewServer()
	hs.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	healthpb.RegisterHealthServer(gs, hs)
	mcpreadyv1.RegisterAdminServiceServer(gs, adm)
	mcpreadyv1.RegisterDiscoveryServiceServer(gs, ds)
	if receipts != nil {
		receipts.register(gs)
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errc := make(chan error, 3)
	wg.Go(func() {
		if err := ds.Run(ctx); err != nil && ctx.Err() == nil {
			errc <- err
		}
	})
	wg.Go(func() { s.sweepWhenElected(ctx, cli, lc) })
	wg.Go(func() { w.Refresh(ctx, time.Second) })
	if receipts != nil {
		receipts.run(ctx, s, &wg)
	}
	wg.Go(func() {
		if err := gs.Serve(s.lis); err != nil && ctx.Err() == nil {
			errc <- err
		}
	})
	var hsrv *http.Server
	if s.mlis != nil {
		cons, err := s.console(st, lc, receipts, ds)
		if err != nil {
			return err
		}
		mux := http.NewServeMux()
		mux.Handle(console.Prefix, cons)
		mux.Handle("/metrics", s.scrapers(promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{Registry: s.reg})))
		// /healthz mirrors the gRPC health state for probes that cannot
		// speak gRPC or present a client certificate.
		mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
			hr, err := hs.Check(r.Context(), &healthpb.HealthCheckRequest{})
			if err != nil || hr.GetStatus() != healthpb.HealthCheckResponse_SERVING {
				http.Error(w, "not serving", http.StatusServiceUnavailable)
				return
			}
			fmt.Fprintln(w, "ok")
		})
		hsrv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		wg.Go(func() {
			if err := hsrv.Serve(s.mlis); err != nil && !errors.Is(err, http.ErrServerClosed) && ctx.Err() == nil {
				errc <- err
			}
		})
	}
	hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	for _, svc := range []string{mcpreadyv1.AdminService_ServiceDesc.ServiceName, mcpreadyv1.DiscoveryService_ServiceDesc.ServiceName} {
		hs.SetServingStatus(svc, healthpb.HealthCheckResponse_SERVING)
	}
	close(s.ready)
	s.o.Logger.Info("control plane serving", "addr", s.Addr(), "metrics", s.MetricsAddr(), "tls", s.creds != nil, "etcd", endpoints)

	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-errc:
	}
	hs.Shutdown()
	cancel()
	stopped := make(chan struct{})
	go func() { gs.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		gs.Stop() // streams are long-lived; do not wait for agents to hang up
	}
	if hsrv != nil {
		sctx, c := context.WithTimeout(context.Background(), 2*time.Second)
		hsrv.Shutdown(sctx)
		c()
	}
	wg.Wait()
	s.o.Logger.Info("control plane stopped")
	return runErr
}

// scrapers guards /metrics: on a loopback listener anyone who reaches it
// may scrape; off loopback only a TLS request whose verified client
// certificate holds the reader or admin role (console.Reader). Refusals
// are logged and counted by reason.
func (s *Server) scrapers(h http.Handler) http.Handler {
	if !s.scrapeTLS {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil {
			s.scrapeRefused.WithLabelValues("plaintext").Inc()
			s.o.Logger.Warn("metrics scrape refused", "reason", "plaintext", "remote", r.RemoteAddr)
			http.Error(w, "/metrics off loopback is served only over TLS with a reader certificate", http.StatusUnauthorized)
			return
		}
		if ref := console.Reader(s.authz, r); ref != nil {
			s.scrapeRefused.WithLabelValues(ref.Reason).Inc()
			s.o.Logger.Warn("metrics scrape refused", "reason", ref.Reason, "identity", ref.Identity, "remote", r.RemoteAddr)
			http.Error(w, ref.Error(), ref.Code())
			return
		}
		h.ServeHTTP(w, r)
	})
}

// console builds the read-only web console over the running services.
func (s *Server) console(st *store.Store, lc *lifecycle.Manager, receipts *receiptPipeline, ds *discovery.Server) (*console.Console, error) {
	o := console.Options{Registry: lc, Artifacts: st, Fleet: ds, Authorizer: s.authz, Logger: s.o.Logger}
	if receipts != nil {
		o.Receipts = receipts.q
	}
	c, err := console.New(o)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	return c, nil
}

// sweepWhenElected runs the lifecycle (its store watch and its sweep) on
// one replica at a time: the winner of an etcd election, re-campaigning if
// its session is lost.
func (s *Server) sweepWhenElected(ctx context.Context, cli *clientv3.Client, lc *lifecycle.Manager) {
	leader.Run(ctx, cli, "/mcpready/v1/elections/lifecycle-sweep", s.Addr(), leader.Options{OnError: func(error) { s.etcdErr.Inc() }, Logger: s.o.Logger},
		func(ctx context.Context) { lc.Run(ctx, s.o.SweepInterval) })
}

// waitEtcd retries until one endpoint answers, with exponential backoff.
func (s *Server) waitEtcd(ctx context.Context, cli *clientv3.Client, endpoints []string) error {
	deadline := time.Now().Add(s.o.EtcdWait)
	delay := 200 * time.Millisecond
	for attempt := 1; ; attempt++ {
		actx, c := context.WithTimeout(ctx, 3*time.Second)
		_, err := cli.Get(actx, "/mcpready/v1/", clientv3.WithCountOnly())
		c()
		if err == nil {
			return nil
		}
		s.etcdErr.Inc()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if time.Now().Add(delay).After(deadline) {
			return fmt.Errorf("%w: %v not reachable after %d attempts over %s: %w", ErrEtcdUnreachable, endpoints, attempt, s.o.EtcdWait, err)
		}
		s.o.Logger.Warn("etcd not reachable yet; retrying", "endpoints", endpoints, "attempt", attempt, "retry_in", delay, "err", err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(delay):
		}
		delay = min(delay*2, 5*time.Second)
	}
}
