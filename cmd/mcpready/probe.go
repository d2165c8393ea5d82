package main

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/mcpready/mcpready/agent/access"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/internal/atomicfile"
	"github.com/mcpready/mcpready/probe"
	"github.com/mcpready/mcpready/prober"
	"github.com/mcpready/mcpready/sign"
)

// probeOptions are the flags of probe.
type probeOptions struct {
	url, name, tokenFile, oauth, ca, output string
	// arguments: a file of the canary call's arguments (a JSON object);
	// inputClass: the input class they are in.
	arguments, inputClass string
	readOnly, issuers     []string
	timeout               time.Duration
	maxPages              int
	// Evidence: --sign KEY turns the run into signed SYNTHETIC Evidence,
	// written with --bundle and applied with --apply.
	signKey, observer, region, bundle string
	ttl                               time.Duration
	apply                             bool
	serverOptions
}

func newProbeCmd() *cobra.Command {
	o := &probeOptions{}
	cmd := &cobra.Command{
		Use:   "probe --url URL [--name SERVER] [--read-only TOOL,...] [-o table|json|yaml]",
		Short: "Run the layered readiness funnel against one MCP endpoint",
		Long: `Probe one endpoint layer by layer: reachability (DNS, connect, TLS identity,
HTTP), protocol compatibility in both eras separately (server/discover for
2026-07-28, initialize for 2025-11-25), access (a 401's RFC 9728 metadata is
fetched and checked; 402 is billing; an unexpected issuer is foreign),
listing (every page), a canary call of one tool you classify read-only
(--read-only; nothing else is ever called), result validity, and cold and
warm latency. Each layer has its own status and reason; nothing is
collapsed into a score, and a keyless probe says nothing about authorised
use.

A token, when needed, is read from --token-file or $MCPREADY_PROBE_TOKEN,
never from a flag value. With --oauth FILE (an agent configuration's oauth
block; grant client_credentials, jwt_bearer or id_jag) it is obtained as
the agent obtains it, $MCPREADY_PROBE_TOKEN is not read, and the Evidence's
auth class is oauth:<grant>. Exit 0 when every measured layer is ready, 1
when one is not (the report is printed either way), 2 for usage errors.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd) },
	}
	fl := cmd.Flags()
	fl.StringVar(&o.url, "url", "", "endpoint URL (http or https)")
	fl.StringVar(&o.name, "name", "", "expected server name (reported)")
	fl.StringSliceVar(&o.readOnly, "read-only", nil, "tools you classify read-only: only these may be called")
	fl.StringSliceVar(&o.issuers, "expected-issuer", nil, "authorization servers you accept (others are foreign)")
	fl.StringVar(&o.tokenFile, "token-file", "", "file holding a bearer token to present (else $MCPREADY_PROBE_TOKEN; else keyless)")
	fl.StringVar(&o.oauth, "oauth", "", "file holding the OAuth settings to get a token with: an agent configuration's oauth block (YAML or JSON)")
	fl.DurationVar(&o.timeout, "timeout", 10*time.Second, "budget of each network step")
	fl.IntVar(&o.maxPages, "max-pages", 100, "most tools/list pages to read")
	fl.StringVar(&o.arguments, "arguments", "", "file holding the canary call's arguments, a JSON object (default: the smallest input the tool's schema allows)")
	fl.StringVar(&o.inputClass, "input-class", "", "the Policy input class those arguments are in, stated in the Evidence so that it counts for calls in that class (needs --arguments)")
	fl.StringVar(&o.signKey, "sign", "", "sign the run as SYNTHETIC Evidence with this key (cosign format; password as for keygen)")
	fl.StringVar(&o.observer, "observer", "", "observer id recorded in the Evidence (required with --sign; the TrustPolicy must grant the key Evidence)")
	fl.StringVar(&o.region, "region", "", "region the probe runs from, recorded in the Evidence: it then counts only for agents with that region label")
	fl.DurationVar(&o.ttl, "ttl", 24*time.Hour, "how long the Evidence stays fresh")
	fl.StringVar(&o.bundle, "bundle", "", "write the signed Evidence bundle to this file")
	fl.BoolVar(&o.apply, "apply", false, "apply the signed Evidence to the control plane (--server, --tls-*); its registry then answers the registry layer for --name at --url, and the Evidence names the probed tool's registry record version")
	o.serverOptions.addFlags(cmd)
	fl.StringVar(&o.ca, "ca", "", "CA certificates (PEM) the endpoint's certificate must chain to (default: the system roots); with --oauth, also trusted beside the system roots for the authorization server")
	addOutputFlag(cmd, &o.output)
	cmd.AddCommand(newProbeAnalyzeCmd())
	return cmd
}

func (o *probeOptions) run(cmd *cobra.Command) error {
	if err := checkOutput(cmd, o.output); err != nil {
		return err
	}
	if o.url == "" {
		return usagef("probe: --url is required")
	}
	if o.timeout <= 0 || o.maxPages <= 0 {
		return usagef("probe: --timeout and --max-pages must be positive")
	}
	if o.signKey == "" && (o.bundle != "" || o.apply || o.observer != "") {
		return usagef("probe: --bundle, --apply and --observer need --sign")
	}
	if o.signKey != "" && (o.observer == "" || (o.bundle == "" && !o.apply)) {
		return usagef("probe: --sign needs --observer, and --bundle or --apply")
	}
	if o.tokenFile != "" && o.oauth != "" {
		return usagef("probe: set --token-file or --oauth, not both")
	}
	popts := probe.Options{Server: o.name, ReadOnly: o.readOnly, ExpectedIssuers: o.issuers,
		StepTimeout: o.timeout, MaxPages: o.maxPages, InputClass: o.inputClass}
	switch { // the token: the file's, else the environment's unless OAuth gets one
	case o.tokenFile != "":
		var err error
		if popts.Token, err = probe.ReadToken(o.tokenFile); err != nil {
			return usagef("probe: --token-file: %w", err)
		}
	case o.oauth == "":
		popts.Token = os.Getenv("MCPREADY_PROBE_TOKEN")
	}
	var caPEM []byte
	if o.ca != "" {
		var err error
		if caPEM, err = readCAPEM(o.ca, "--ca"); err != nil {
			return usagef("probe: %w", err)
		}
		popts.TLS = &tls.Config{RootCAs: caPool(x509.NewCertPool(), caPEM), MinVersion: tls.VersionTLS12}
	}
	if o.oauth != "" {
		oa, err := readOAuth(o.oauth)
		if err != nil {
			return usagef("probe: --oauth %s: %w", o.oauth, err)
		}
		var asHTTP *http.Client // the authorization server's: the system roots, and --ca's
		if caPEM != nil {
			asHTTP = clientTrusting(caPool(systemRoots(), caPEM))
		}
		popts.Credential, err = prober.OAuthCredential(cmd.Context(), access.New(access.Options{HTTP: asHTTP}), o.name, o.url, oa)
		if errors.Is(err, probe.ErrURL) {
			return usagef("probe: %w", err)
		} else if err != nil {
			return fmt.Errorf("probe: --oauth: no token: %w", err)
		}
	}
	if o.arguments != "" {
		args, err := readArguments(o.arguments)
		if err != nil {
			return usagef("probe: --arguments: %w", err)
		}
		popts.Arguments = args
	}
	var admin mcpreadyv1.AdminServiceClient
	if o.apply { // the control plane's registry answers the registry layer
		conn, err := o.dial()
		if err != nil {
			return err
		}
		defer conn.Close()
		admin = mcpreadyv1.NewAdminServiceClient(conn)
		if o.name != "" {
			entries, err := registryEntries(cmd.Context(), admin)
			if err != nil {
				return fmt.Errorf("probe: reading the registry: %w", err)
			}
			registration(entries, &popts, o.url)
		}
	}
	r, err := probe.Run(cmd.Context(), o.url, popts)
	if errors.Is(err, probe.ErrURL) || errors.Is(err, probe.ErrInputClass) {
		return usagef("probe: %w", err)
	} else if err != nil {
		return err
	}
	if err := printOutput(cmd.OutOrStdout(), o.output, r, func(tw *tabwriter.Writer) { probeTable(tw, r) }); err != nil {
		return err
	}
	if o.signKey != "" {
		if err := o.evidence(cmd, r, admin); err != nil {
			return err
		}
	}
	if !r.Ready() {
		return withCode(exitError, fmt.Errorf("probe: %s is not ready", o.url))
	}
	return nil
}

// maxArgumentsFile bounds the --arguments file (and the prober's --canaries).
const maxArgumentsFile = 1 << 20

// readArguments reads a canary call's arguments: a JSON object, at most
// maxArgumentsFile bytes. Its content is never printed.
func readArguments(path string) (map[string]any, error) {
	b, err := readBounded(path, maxArgumentsFile)
	if err != nil {
		return nil, err
	}
	var args map[string]any
	if err := json.Unmarshal(b, &args); err != nil || args == nil {
		return nil, fmt.Errorf("%s is not a JSON object", path)
	}
	return args, nil
}

// readBounded reads the file at path, refusing one over limit bytes.
func readBounded(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s is over %d bytes", path, limit)
	}
	return b, nil
}

func probeTable(tw *tabwriter.Writer, r *probe.Report) {
	fmt.Fprintln(tw, "LAYER\tSTATUS\tREASON\tDETAIL")
	for _, l := range r.Layers {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", l.Layer, l.Status, orDash(l.Reason), orDash(l.Detail))
	}
	fmt.Fprintln(tw)
	for _, e := range r.Eras {
		state := "ok " + e.Negotiated
		if !e.OK {
			state = "no (" + e.Reason + ")"
		}
		fmt.Fprintf(tw, "era %s:\t%s\n", e.Requested, state)
	}
	fmt.Fprintf(tw, "tools:\t%d on %d page(s)%s\n", r.Tools, r.Pages, map[bool]string{true: ", partial"}[r.Partial])
	fmt.Fprintf(tw, "auth class:\t%s\n", r.AuthClass)
	if r.RegistryRecordVersion != "" {
		fmt.Fprintf(tw, "registry record:\t%s version %s\n", r.ProbedTool, r.RegistryRecordVersion)
	}
	if r.InputClass != "" {
		fmt.Fprintf(tw, "input class:\t%s\n", r.InputClass)
	}
	if r.Cold > 0 {
		fmt.Fprintf(tw, "latency:\tcold %s, warm %s\n", r.Cold.Round(time.Microsecond), r.Warm.Round(time.Microsecond))
	}
	for _, b := range r.BlindSpots {
		fmt.Fprintf(tw, "blind spot:\t%s\n", b)
	}
}

// evidence signs the run as SYNTHETIC Evidence, writes it, and applies it
// through admin when that is not nil.
func (o *probeOptions) evidence(cmd *cobra.Command, r *probe.Report, admin mcpreadyv1.AdminServiceClient) error {
	key, err := loadSigningKey(cmd, o.signKey)
	if err != nil {
		return usagef("probe: --sign: %w", err)
	}
	obj, err := probe.Evidence(r, probe.EvidenceOptions{Observer: o.observer, Software: "mcpready/probe " + buildVersion().Version,
		Region: o.region, TTL: o.ttl})
	if err != nil {
		return usagef("%w", err)
	}
	bundle, _, err := sign.Sign(obj, key)
	if err != nil {
		return err
	}
	if o.bundle != "" {
		if err := atomicfile.WriteFile(o.bundle, bundle, 0o644); err != nil {
			return err
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "evidence %s written to %s\n", obj.Metadata.Name, o.bundle)
	}
	if admin == nil {
		return nil
	}
	resp, err := admin.Apply(cmd.Context(), &mcpreadyv1.ApplyRequest{Bundle: bundle})
	if err != nil {
		return fmt.Errorf("probe: applying %s: %w", obj.Metadata.Name, rpcError(err))
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "evidence %s applied (revision %d)\n", obj.Metadata.Name, resp.GetRevision())
	return nil
}
