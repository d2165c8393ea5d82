package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/mcpready/mcpready/explain"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/ledger"
	"github.com/mcpready/mcpready/ledger/export"
	"github.com/mcpready/mcpready/sign"
)

func newReceiptsCmd() *cobra.Command {
	return newGroupCmd("receipts", "Tail, get, export and verify signed execution receipts",
		newReceiptsTailCmd(), newReceiptsGetCmd(), newReceiptsExportCmd(), newReceiptsVerifyCmd(), newReceiptsMigrateCmd())
}

func receiptsClient(so *serverOptions) (mcpreadyv1.ReceiptsServiceClient, func(), error) {
	conn, err := so.dial()
	if err != nil {
		return nil, nil, err
	}
	return mcpreadyv1.NewReceiptsServiceClient(conn), func() { conn.Close() }, nil
}

// receiptsTailOptions are the flags of receipts tail.
type receiptsTailOptions struct {
	serverOptions
	output string
	n      int
	follow bool
}

func newReceiptsTailCmd() *cobra.Command {
	o := &receiptsTailOptions{}
	cmd := &cobra.Command{
		Use:   "tail [-n N] [--follow] [-o table|json|yaml]",
		Short: "Print the newest receipts, and with --follow new ones as they are stored",
		Args:  noArgs,
		RunE:  func(cmd *cobra.Command, args []string) error { return o.run(cmd, args) },
	}
	addOutputFlag(cmd, &o.output)
	cmd.Flags().IntVarP(&o.n, "tail", "n", 10, "how many of the newest receipts to print first (at least 1)")
	cmd.Flags().BoolVar(&o.follow, "follow", false, "keep printing new receipts until interrupted")
	o.serverOptions.addFlags(cmd)
	return cmd
}

func (o *receiptsTailOptions) run(cmd *cobra.Command, _ []string) error {
	f := o
	if err := checkOutput(cmd, f.output); err != nil {
		return err
	}
	if f.n < 1 {
		return usagef("tail: -n must be at least 1")
	}
	client, closeConn, err := receiptsClient(&f.serverOptions)
	if err != nil {
		return err
	}
	defer closeConn()
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt)
	defer stop()
	if !f.follow {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, rpcTimeout)
		defer cancel()
	}
	stream, err := client.TailReceipts(ctx, &mcpreadyv1.TailReceiptsRequest{N: int32(f.n), Follow: f.follow})
	if err != nil {
		return rpcError(err)
	}
	out := cmd.OutOrStdout()
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	if f.output == "table" {
		fmt.Fprintln(tw, "ENDED\tRECEIPT\tAGENT\tREQUESTED\tSELECTED\tOUTCOME\tLATENCY")
	}
	for {
		m, err := stream.Recv()
		if err == io.EOF || (err != nil && ctx.Err() != nil) {
			return tw.Flush()
		}
		if err != nil {
			return rpcError(err)
		}
		if f.output != "table" {
			if err := printStreamItem(out, f.output, m.GetReceipt()); err != nil {
				return err
			}
			continue
		}
		receiptRow(tw, m.GetReceipt())
		if f.follow {
			tw.Flush()
		}
	}
}

func receiptRow(tw *tabwriter.Writer, sr *mcpreadyv1.StoredReceipt) {
	r := sr.GetReceipt()
	sel := "-"
	if s := r.GetSelected(); s.GetToolName() != "" {
		sel = s.GetServerName() + "/" + s.GetToolName()
	}
	ended := "-"
	if t := r.GetEndedAt(); t != nil {
		ended = t.AsTime().UTC().Format(time.RFC3339)
	}
	fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", ended, r.GetReceiptId(), sr.GetAgentId(), r.GetRequested(), sel,
		explain.OutcomeWord(r.GetOutcome()), r.GetLatency().AsDuration().Round(time.Microsecond))
}

// getReceipt fetches one stored receipt by id.
func getReceipt(ctx context.Context, so *serverOptions, id string) (*mcpreadyv1.StoredReceipt, error) {
	client, closeConn, err := receiptsClient(so)
	if err != nil {
		return nil, err
	}
	defer closeConn()
	ctx, cancel := context.WithTimeout(ctx, rpcTimeout)
	defer cancel()
	resp, err := client.QueryReceipts(ctx, &mcpreadyv1.QueryReceiptsRequest{ReceiptId: id, Limit: 1})
	if err != nil {
		return nil, rpcError(err)
	}
	if len(resp.GetReceipts()) == 0 {
		return nil, notFound("receipt %s not found", id)
	}
	return resp.GetReceipts()[0], nil
}

// receiptsGetOptions are the flags of receipts get.
type receiptsGetOptions struct {
	serverOptions
	output string
}

func newReceiptsGetCmd() *cobra.Command {
	o := &receiptsGetOptions{}
	cmd := &cobra.Command{
		Use:   "get RECEIPT_ID [-o table|json|yaml]",
		Short: "Print one receipt",
		Args:  oneArg,
		RunE:  func(cmd *cobra.Command, args []string) error { return o.run(cmd, args) },
	}
	addOutputFlag(cmd, &o.output)
	o.serverOptions.addFlags(cmd)
	return cmd
}

func (o *receiptsGetOptions) run(cmd *cobra.Command, args []string) error {
	f := o
	if err := checkOutput(cmd, f.output); err != nil {
		return err
	}
	sr, err := getReceipt(cmd.Context(), &f.serverOptions, args[0])
	if err != nil {
		return err
	}
	return printOutput(cmd.OutOrStdout(), f.output, sr, func(tw *tabwriter.Writer) {
		r := sr.GetReceipt()
		row := func(k string, v any) { fmt.Fprintf(tw, "%s:\t%v\n", k, v) }
		row("Receipt", r.GetReceiptId())
		row("Agent", sr.GetAgentId())
		row("Batch", sr.GetBatchId())
		row("Digest", sr.GetDigest())
		row("Request", r.GetRequestId())
		row("Workflow", r.GetWorkflowId())
		row("Requested", r.GetRequested())
		row("Principal/tenant/region", r.GetPrincipalClass()+" / "+r.GetTenantClass()+" / "+r.GetRegion())
		if s := r.GetSelected(); s != nil {
			row("Selected", fmt.Sprintf("%s@%s %s at %s (protocol %s)", s.GetServerName(), s.GetServerVersion(), s.GetToolName(), s.GetEndpoint(), s.GetProtocolVersion()))
		}
		row("Policy version", r.GetPolicyVersion())
		row("Outcome", explain.OutcomeWord(r.GetOutcome()))
		row("Attempts", r.GetAttemptCount())
		row("Latency", r.GetLatency().AsDuration())
		row("Arguments digest", r.GetArgumentsDigest())
		row("Result digest", r.GetResultDigest())
	})
}

// parseSince accepts RFC 3339 or a duration back from now ("24h"). An
// instant must fit the export request's Timestamp (years 0001 to 9999 in
// UTC).
func parseSince(s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		if timestamppb.New(t).CheckValid() != nil {
			return time.Time{}, withCode(exitUsage, fmt.Errorf("--since %q: want an instant from 0001-01-01T00:00:00Z to 9999-12-31T23:59:59Z", s))
		}
		return t, nil
	}
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, withCode(exitUsage, fmt.Errorf("--since %q: want RFC 3339 (2026-11-29T10:00:00Z) or a duration (24h)", s))
}

// receiptsExportOptions are the flags of receipts export.
type receiptsExportOptions struct {
	serverOptions
	since, agent, out string
}

func newReceiptsExportCmd() *cobra.Command {
	o := &receiptsExportOptions{}
	cmd := &cobra.Command{
		Use:   "export [--since T] [--agent ID] [--output-file FILE]",
		Short: "Write stored receipt batches, exactly as signed, as JSON lines",
		Long: `Write the stored receipt batches received since T (RFC 3339, or a duration
such as 24h meaning that long ago) as JSON lines: one batch per line with its
Sigstore bundle embedded byte for byte, to --output-file FILE (written
atomically) or to standard output. Check the file offline with
"mcpready receipts verify".`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return o.run(cmd, args) },
	}
	ef := cmd.Flags()
	ef.StringVar(&o.since, "since", "", "only batches received since T (RFC 3339 in years 0001–9999, or a non-negative duration such as 24h); anything else exits 2")
	ef.StringVar(&o.agent, "agent", "", "only this agent's batches")
	ef.StringVar(&o.out, "output-file", "", "file to write (default: standard output)")
	o.serverOptions.addFlags(cmd)
	return cmd
}

func (o *receiptsExportOptions) run(cmd *cobra.Command, _ []string) (err error) {
	f := o
	since, err := parseSince(f.since, time.Now())
	if err != nil {
		return err
	}
	client, closeConn, err := receiptsClient(&f.serverOptions)
	if err != nil {
		return err
	}
	defer closeConn()
	req := &mcpreadyv1.ExportBatchesRequest{AgentId: f.agent}
	if !since.IsZero() {
		req.Since = timestamppb.New(since)
	}
	stream, err := client.ExportBatches(cmd.Context(), req)
	if err != nil {
		return rpcError(err)
	}
	w := cmd.OutOrStdout()
	var tmp *os.File
	if f.out != "" && f.out != "-" {
		if tmp, err = os.CreateTemp(dirOf(f.out), ".export-*"); err != nil {
			return err
		}
		defer func() {
			if err != nil {
				tmp.Close()
				os.Remove(tmp.Name())
			}
		}()
		w = tmp
	}
	n := 0
	for {
		m, err := stream.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			return rpcError(err)
		}
		if err := export.Write(w, ledger.FromExport(m)); err != nil {
			return err
		}
		n++
	}
	if tmp != nil {
		if err := tmp.Sync(); err != nil {
			return err
		}
		if err := tmp.Close(); err != nil {
			return err
		}
		if err := os.Rename(tmp.Name(), f.out); err != nil {
			return err
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "exported %d batch(es) to %s\n", n, f.out)
	}
	return nil
}

func dirOf(path string) string {
	if i := strings.LastIndexByte(path, '/'); i >= 0 {
		return path[:i+1]
	}
	return "."
}

// receiptsVerifyOptions are the flags of receipts verify.
type receiptsVerifyOptions struct {
	key, root, trust, at, output string
	files                        []string
}

func newReceiptsVerifyCmd() *cobra.Command {
	o := &receiptsVerifyOptions{}
	cmd := &cobra.Command{
		Use:   "verify (-f FILE | FILE)... (--key AGENT.pub | --root ROOT.pub --trust TRUST.bundle.json) [--at T] [-o table|json|yaml]",
		Short: "Verify a receipt export offline: signatures, digests and hash chains",
		Long: `Verify an export made by "mcpready receipts export", offline: every batch's
signature (by one agent key with --key, or under a TrustPolicy signed by the
root key with --root and --trust, evaluated at --at, default now), every
receipt against its listed digest, and each agent's hash chain (no gap, fork,
reordering or replay). An export that starts mid-chain is checked from its
first batch.

Several files are verified together as one set of chains: export from
every control-plane replica (each stores the batches it received) and pass
all the files; a batch found in more than one counts once.

Exit status: 0 verified, 3 verification failed (the file, line and batch are
named on standard error), 2 usage error, 1 any other error.`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.run(cmd, append(append([]string{}, o.files...), args...))
		},
	}
	vf := cmd.Flags()
	vf.StringArrayVarP(&o.files, "filename", "f", nil, "export file to verify (repeatable; files may also be given as arguments)")
	vf.StringVar(&o.key, "key", "", "the agent's public key")
	vf.StringVar(&o.root, "root", "", "the organisation's root public key (with --trust)")
	vf.StringVar(&o.trust, "trust", "", "TrustPolicy bundle signed by the root key (with --root)")
	vf.StringVar(&o.at, "at", "", "evaluate key grants at this RFC 3339 time (default now)")
	addOutputFlag(cmd, &o.output)
	return cmd
}

func (o *receiptsVerifyOptions) run(cmd *cobra.Command, args []string) error {
	f := o
	if len(args) == 0 {
		return usagef("verify: give at least one export file")
	}
	if err := checkOutput(cmd, f.output); err != nil {
		return err
	}
	byKey, byTrust := f.key != "", f.root != "" || f.trust != ""
	if byKey == byTrust || (byTrust && (f.root == "" || f.trust == "")) {
		return withCode(exitUsage, errors.New("verify: give either --key, or both --root and --trust"))
	}
	at := time.Now()
	if f.at != "" {
		t, err := time.Parse(time.RFC3339, f.at)
		if err != nil {
			return withCode(exitUsage, fmt.Errorf("--at %q: want RFC 3339", f.at))
		}
		at = t
	}
	var verify export.Verifier
	if byKey {
		pub, err := sign.ReadPublicKeyFile(f.key)
		if err != nil {
			return err
		}
		verify = func(b []byte) (*sign.Verified, error) { return sign.VerifyWithKey(b, pub) }
	} else {
		rootKey, err := sign.ReadPublicKeyFile(f.root)
		if err != nil {
			return err
		}
		tp, err := os.ReadFile(f.trust)
		if err != nil {
			return err
		}
		trust, err := sign.NewTrust(tp, rootKey, at)
		if err != nil {
			return verifyFailure(f.trust, err)
		}
		verify = func(b []byte) (*sign.Verified, error) { return trust.Verify(b, at) }
	}
	inputs := make([]export.Input, 0, len(args))
	for _, name := range args {
		file, err := os.Open(name)
		if err != nil {
			return err
		}
		defer file.Close()
		inputs = append(inputs, export.Input{Name: name, R: file})
	}
	sum, err := export.VerifyAll(inputs, verify)
	var fail *export.Failure
	if errors.As(err, &fail) {
		return withCode(exitVerify, err)
	}
	if errors.Is(err, export.ErrFormat) {
		return withCode(exitVerify, fmt.Errorf("%s: %w", strings.Join(args, ", "), err))
	}
	if err != nil {
		return err
	}
	if f.output != "table" {
		return printOutput(cmd.OutOrStdout(), f.output, sum, nil)
	}
	tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "AGENT\tBATCHES\tRECEIPTS\tSEQUENCES\tHEAD")
	for _, s := range sum {
		seqs := fmt.Sprintf("%d-%d", s.FirstSeq, s.LastSeq)
		if s.StartsMidChain {
			seqs += " (starts mid-chain)"
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\n", s.AgentID, s.Batches, s.Receipts, seqs, s.HeadDigest)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(cmd.OutOrStdout(), "verified: %d agent chain(s), every signature, digest and link\n", len(sum))
	return nil
}
