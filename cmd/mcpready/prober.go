package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/mcpready/mcpready/agent/config"
	"github.com/mcpready/mcpready/artifact"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/internal/loopback"
	"github.com/mcpready/mcpready/probe"
	"github.com/mcpready/mcpready/prober"
	"github.com/mcpready/mcpready/sign"
)

// proberOptions are the flags of prober.
type proberOptions struct {
	serverOptions
	signKey, observer, region, metrics string
	canaries, ca                       string
	tokenFiles, oauth                  []string
	concurrency                        int
	once                               bool
}

func newProberCmd() *cobra.Command {
	o := &proberOptions{}
	cmd := &cobra.Command{
		Use:   "prober --sign KEY --observer ID [--once] [--server ADDR]",
		Short: "Probe every registry entry's endpoint on a schedule and apply signed SYNTHETIC Evidence",
		Long: `Each round reads the RegistryEntries from the control plane, probes each
distinct endpoint once through the whole funnel (see mcpready probe) with at
most --concurrency funnels in flight, calling only tools whose entry is
classified READ_ONLY, and applies one signed SYNTHETIC Evidence per server
(probe/<server>). Rounds repeat every half of the shortest maximum evidence
age the Policies set (at least 1m; 1h when none is set), plus up to 10%
jitter. --canaries FILE adds calls with your own arguments: a YAML or JSON
list of {server, tool, inputClass, arguments}, each calling a tool the
registry classifies READ_ONLY with those arguments and applying Evidence
probe/<server>/input-class/<class>, which counts for calls in that input
class only. Probes are keyless unless --token-file SERVER=FILE names a
bearer token for a server's endpoints (read at every round, never logged;
the Evidence then counts for agents that call that server with a static
bearer token) or --oauth SERVER=FILE names the OAuth settings its probes
get tokens with: FILE holds an oauth block as an agent configuration's
upstream has it (grant client_credentials, jwt_bearer or id_jag: the
prober acts as itself), the tokens are obtained, cached and refreshed as the
agent does, and the Evidence counts for agents calling that server with
that grant. --ca FILE adds CA certificates, beside the system roots, for
the endpoints' and the authorization servers' TLS certificates (a private
PKI). --once runs one round and exits (1 if any Evidence was
refused).
The TrustPolicy must grant the key Evidence. Metrics
(mcpready_prober_*, among them mcpready_prober_evidence_age_seconds{subject},
the one to alert on) are served on --metrics-listen when given.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd) },
	}
	fl := cmd.Flags()
	fl.StringVar(&o.signKey, "sign", "", "signing key for the Evidence (cosign format; password as for keygen)")
	fl.StringVar(&o.observer, "observer", "", "observer id recorded in the Evidence")
	fl.StringVar(&o.region, "region", "", "region the prober runs from, recorded in its Evidence: it then counts only for agents with that region label")
	fl.IntVar(&o.concurrency, "concurrency", 16, "funnels in flight")
	fl.BoolVar(&o.once, "once", false, "run one round and exit")
	fl.StringArrayVar(&o.tokenFiles, "token-file", nil, "SERVER=FILE: present the bearer token in FILE to SERVER's endpoints (repeatable; read at every round)")
	fl.StringArrayVar(&o.oauth, "oauth", nil, "SERVER=FILE: get SERVER's tokens with the OAuth settings in FILE, an agent configuration's oauth block (YAML or JSON; repeatable)")
	fl.StringVar(&o.ca, "ca", "", "CA certificates (PEM) trusted beside the system roots for the endpoints and authorization servers")
	fl.StringVar(&o.canaries, "canaries", "", "file listing canary calls with your own arguments and their Policy input class (YAML or JSON; the arguments are never logged)")
	fl.StringVar(&o.metrics, "metrics-listen", "", `serve /metrics on this loopback address ("" disables)`)
	o.serverOptions.addFlags(cmd)
	return cmd
}

func (o *proberOptions) run(cmd *cobra.Command) error {
	if o.signKey == "" || o.observer == "" || o.concurrency <= 0 {
		return usagef("prober: --sign and --observer are required, --concurrency must be positive")
	}
	key, err := loadSigningKey(cmd, o.signKey)
	if err != nil {
		return usagef("prober: --sign: %w", err)
	}
	var canaries []prober.Canary
	if o.canaries != "" {
		b, err := readBounded(o.canaries, maxArgumentsFile)
		if err != nil {
			return usagef("prober: --canaries: %w", err)
		}
		if canaries, err = prober.ParseCanaries(b); err != nil {
			return usagef("prober: --canaries %s: %w", o.canaries, err)
		}
	}
	tokenFiles, err := serverFiles("--token-file", o.tokenFiles)
	if err != nil {
		return err
	}
	oauthFiles, err := serverFiles("--oauth", o.oauth)
	if err != nil {
		return err
	}
	oauth := map[string]config.OAuth{}
	for server, file := range oauthFiles {
		if oauth[server], err = readOAuth(file); err != nil {
			return usagef("prober: --oauth %s=%s: %w", server, file, err)
		}
	}
	var endpointTLS *tls.Config
	var oauthHTTP *http.Client
	if o.ca != "" {
		pem, err := readCAPEM(o.ca, "--ca")
		if err != nil {
			return usagef("prober: %w", err)
		}
		roots := caPool(systemRoots(), pem)
		endpointTLS = &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
		oauthHTTP = clientTrusting(roots)
	}
	log := logger(cmd.ErrOrStderr())
	conn, err := o.dial()
	if err != nil {
		return err
	}
	defer conn.Close()
	admin := mcpreadyv1.NewAdminServiceClient(conn)
	reg := prometheus.NewRegistry()
	p, err := prober.New(prober.Options{
		Targets: func(ctx context.Context) ([]probe.Target, error) {
			if len(canaries) > 0 {
				warnUndefinedClasses(ctx, admin, canaries, log)
			}
			targets, err := registryTargets(ctx, admin)
			for i := range targets {
				targets[i].Options.TLS = endpointTLS
			}
			return targets, err
		},
		Canaries: canaries, TokenFiles: tokenFiles, OAuth: oauth, OAuthHTTP: oauthHTTP,
		MaxAge: func(ctx context.Context) (map[string]*durationpb.Duration, error) { return policyMaxAge(ctx, admin) },
		Apply: func(ctx context.Context, b []byte) error {
			if _, err := admin.Apply(ctx, &mcpreadyv1.ApplyRequest{Bundle: b}); err != nil {
				return rpcError(err)
			}
			return nil
		},
		Signer: key, Observer: probe.EvidenceOptions{Observer: o.observer, Software: "mcpready/prober " + buildVersion().Version, Region: o.region},
		Concurrency: o.concurrency, Logger: log, Registerer: reg,
	})
	if err != nil {
		return usagef("%w", err)
	}
	if o.metrics != "" {
		lis, err := listenLoopback(o.metrics)
		if err != nil {
			return usagef("prober: --metrics-listen: %w", err)
		}
		srv := &http.Server{Handler: promhttp.HandlerFor(reg, promhttp.HandlerOpts{}), ReadHeaderTimeout: 5 * time.Second}
		go srv.Serve(lis)
		defer srv.Close()
	}
	if o.once {
		reports, err := p.Round(cmd.Context())
		fmt.Fprintf(cmd.ErrOrStderr(), "ran %d probe(s)\n", len(reports))
		return err
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := p.Run(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

func listenLoopback(addr string) (net.Listener, error) {
	if !loopback.Is(addr) {
		return nil, fmt.Errorf("%q is not a loopback host:port", addr)
	}
	return net.Listen("tcp", addr)
}

// registryTargets groups the stored RegistryEntries by endpoint: one target
// per http(s) endpoint, with the tools their entries classify READ_ONLY, the
// server found in the registry, and each tool's record version.
func registryTargets(ctx context.Context, admin mcpreadyv1.AdminServiceClient) ([]probe.Target, error) {
	entries, err := registryEntries(ctx, admin)
	if err != nil {
		return nil, err
	}
	by := map[string]*probe.Target{}
	for _, e := range entries {
		id := e.GetIdentity()
		if !(strings.HasPrefix(id.GetEndpoint(), "http://") || strings.HasPrefix(id.GetEndpoint(), "https://")) {
			continue
		}
		t := by[id.GetEndpoint()]
		if t == nil {
			t = &probe.Target{URL: id.GetEndpoint(), Options: probe.Options{Server: id.GetServerName()}}
			by[id.GetEndpoint()] = t
		}
		if e.GetSideEffect() == mcpreadyv1.SideEffectClass_SIDE_EFFECT_CLASS_READ_ONLY && id.GetToolName() != "" {
			t.Options.ReadOnly = append(t.Options.ReadOnly, id.GetToolName())
		}
	}
	out := make([]probe.Target, 0, len(by))
	for _, t := range by {
		sort.Strings(t.Options.ReadOnly)
		registration(entries, &t.Options, t.URL)
		out = append(out, *t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].URL < out[j].URL })
	return out, nil
}

// registryEntries reads the stored RegistryEntries.
func registryEntries(ctx context.Context, admin mcpreadyv1.AdminServiceClient) ([]*mcpreadyv1.RegistryEntry, error) {
	return stored[*mcpreadyv1.RegistryEntry](ctx, admin, artifact.KindRegistryEntry)
}

// stored reads the specs of the stored artifacts of kind (verified by the
// control plane when they were applied).
func stored[T any](ctx context.Context, admin mcpreadyv1.AdminServiceClient, kind artifact.Kind) ([]T, error) {
	resp, err := admin.Get(ctx, &mcpreadyv1.GetRequest{Kind: string(kind)})
	if err != nil {
		return nil, rpcError(err)
	}
	var out []T
	for _, a := range resp.GetArtifacts() {
		obj, err := sign.Peek(a.GetBundle())
		if err != nil {
			continue
		}
		if spec, ok := obj.Spec.(T); ok {
			out = append(out, spec)
		}
	}
	return out, nil
}

// serverFiles reads the SERVER=FILE values of a repeatable flag.
func serverFiles(flag string, kvs []string) (map[string]string, error) {
	files := map[string]string{}
	for _, kv := range kvs {
		server, file, ok := strings.Cut(kv, "=")
		if !ok || server == "" || file == "" {
			return nil, usagef("prober: %s %q: want SERVER=FILE", flag, kv)
		}
		if _, dup := files[server]; dup {
			return nil, usagef("prober: %s: server %s named twice", flag, server)
		}
		files[server] = file
	}
	return files, nil
}

// maxOAuthFile bounds an --oauth file.
const maxOAuthFile = 64 << 10

// readOAuth reads an --oauth file: one upstream's oauth block, with a
// grant in which a probe acts as itself.
func readOAuth(file string) (config.OAuth, error) {
	b, err := readBounded(file, maxOAuthFile)
	if err != nil {
		return config.OAuth{}, err
	}
	oa, err := config.ParseOAuth(b)
	if err != nil {
		return config.OAuth{}, err
	}
	return oa, prober.CheckGrant(oa)
}

// warnUndefinedClasses logs each canary whose input class no stored Policy
// defines: its Evidence would count for no call.
func warnUndefinedClasses(ctx context.Context, admin mcpreadyv1.AdminServiceClient, canaries []prober.Canary, log *slog.Logger) {
	policies, err := stored[*mcpreadyv1.Policy](ctx, admin, artifact.KindPolicy)
	if err != nil {
		log.Warn("policies not read: canaries' input classes not checked", "error", err)
		return
	}
	for _, c := range undefinedClasses(canaries, policies) {
		log.Warn("canary's input class is defined by no Policy: its Evidence counts for no call", "server", c.Server, "tool", c.Tool, "inputClass", c.InputClass)
	}
}

// undefinedClasses returns the canaries whose input class no policy's
// inputClasses names.
func undefinedClasses(canaries []prober.Canary, policies []*mcpreadyv1.Policy) []prober.Canary {
	defined := map[string]bool{}
	for _, p := range policies {
		for _, r := range p.GetInputClasses() {
			defined[r.GetName()] = true
		}
	}
	var out []prober.Canary
	for _, c := range canaries {
		if !defined[c.InputClass] {
			out = append(out, c)
		}
	}
	return out
}

// registration sets o's registry answers for o.Server at endpoint from
// entries: the server is registered when an entry names it at that
// endpoint, and each tool's record version is its entry's
// provenance.version (left out when two entries for the tool disagree, as
// the probe cannot tell which one it met).
func registration(entries []*mcpreadyv1.RegistryEntry, o *probe.Options, endpoint string) {
	present := false
	versions := map[string]string{}
	conflict := map[string]bool{}
	for _, e := range entries {
		id := e.GetIdentity()
		if id.GetServerName() != o.Server || id.GetEndpoint() != endpoint {
			continue
		}
		present = true
		tool, v := id.GetToolName(), e.GetProvenance().GetVersion()
		if tool == "" || v == "" {
			continue
		}
		if cur, ok := versions[tool]; ok && cur != v {
			conflict[tool] = true
		}
		versions[tool] = v
	}
	for tool := range conflict {
		delete(versions, tool)
	}
	o.Registered = func(context.Context, string) (bool, error) { return present, nil }
	o.RecordVersions = versions
}

// policyMaxAge merges every Policy's maximum evidence age per layer,
// keeping the shortest.
func policyMaxAge(ctx context.Context, admin mcpreadyv1.AdminServiceClient) (map[string]*durationpb.Duration, error) {
	policies, err := stored[*mcpreadyv1.Policy](ctx, admin, artifact.KindPolicy)
	if err != nil {
		return nil, err
	}
	out := map[string]*durationpb.Duration{}
	for _, p := range policies {
		for l, d := range p.GetEvidence().GetMaxAge() {
			if cur, ok := out[l]; !ok || d.AsDuration() < cur.AsDuration() {
				out[l] = d
			}
		}
	}
	return out, nil
}
