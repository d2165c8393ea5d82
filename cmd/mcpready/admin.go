package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/mcpready/mcpready/artifact"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/internal/atomicfile"
	"github.com/mcpready/mcpready/sign"
)

// rpcTimeout bounds one admin call.
const rpcTimeout = 30 * time.Second

// rpcError maps a gRPC failure to an exit code: writes refused on
// verification are verification failures (3), everything else is 1. The
// returned error wraps err, so status.Code still sees the gRPC status.
func rpcError(err error) error {
	switch status.Code(err) {
	case codes.PermissionDenied, codes.InvalidArgument, codes.FailedPrecondition:
		return withCode(exitVerify, fmt.Errorf("%s: %w", status.Convert(err).Message(), errRPC{err}))
	}
	return withCode(exitError, fmt.Errorf("%s: %w", status.Convert(err).Message(), errRPC{err}))
}

// errRPC keeps a gRPC error in a chain without repeating its text.
type errRPC struct{ err error }

func (e errRPC) Error() string              { return "control plane " + status.Code(e.err).String() }
func (e errRPC) Unwrap() error              { return e.err }
func (e errRPC) GRPCStatus() *status.Status { return status.Convert(e.err) }

// adminCall dials the control plane, runs one call with a bounded context
// and maps its error to an exit code.
func adminCall[T any](cmd *cobra.Command, so *serverOptions, call func(context.Context, mcpreadyv1.AdminServiceClient) (T, error)) (T, error) {
	var zero T
	conn, err := so.dial()
	if err != nil {
		return zero, err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(cmd.Context(), rpcTimeout)
	defer cancel()
	r, err := call(ctx, mcpreadyv1.NewAdminServiceClient(conn))
	if err != nil {
		return zero, rpcError(err)
	}
	return r, nil
}

// applyOptions are the flags of apply.
type applyOptions struct {
	serverOptions
	files []string
}

func newApplyCmd() *cobra.Command {
	o := &applyOptions{}
	cmd := &cobra.Command{
		Use:   "apply -f BUNDLE [-f BUNDLE...] [BUNDLE...]",
		Short: "Store signed bundles in the control plane (each is verified first)",
		Long: `Send signed bundles to the control plane. Each is verified against the
active TrustPolicy (a TrustPolicy against the root key) before it is stored;
a rejected bundle stores nothing. Prints kind, name and revision per bundle
("unchanged" when the same bytes are already the latest revision).

A stored artifact that sets fields mcpready does not enforce yet (see the
enforcement tables in docs/reference.md) is stored, and a warning naming
each such field is printed on standard error; the exit status stays 0. A
TrustPolicy whose key may sign Evidence without evidenceIssuer or
independence is rejected (evidence-grant-unbound).
Exits 3 if any bundle was rejected.`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return o.run(cmd, args) },
	}
	cmd.Flags().StringArrayVarP(&o.files, "filename", "f", nil, "signed bundle file (repeatable)")
	o.serverOptions.addFlags(cmd)
	return cmd
}

func (o *applyOptions) run(cmd *cobra.Command, args []string) error {
	files := append(append([]string{}, o.files...), args...)
	if len(files) == 0 {
		return usagef("apply: give at least one bundle with -f")
	}
	conn, err := o.dial()
	if err != nil {
		return err
	}
	defer conn.Close()
	cli := mcpreadyv1.NewAdminServiceClient(conn)
	var failed []string
	var worst error
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			fmt.Fprintf(cmd.ErrOrStderr(), "%s: %v\n", file, err)
			failed, worst = append(failed, file), err
			continue
		}
		ctx, cancel := context.WithTimeout(cmd.Context(), rpcTimeout)
		r, err := cli.Apply(ctx, &mcpreadyv1.ApplyRequest{Bundle: b})
		cancel()
		if err != nil {
			err = rpcError(err)
			fmt.Fprintf(cmd.ErrOrStderr(), "%s: %v\n", file, err)
			failed, worst = append(failed, file), err
			continue
		}
		state := "stored"
		if r.Unchanged {
			state = "unchanged"
		}
		fmt.Fprintf(cmd.OutOrStdout(), "%s/%s revision %d %s\n", r.Kind, r.Name, r.Revision, state)
		warnUnenforced(cmd.ErrOrStderr(), file, b)
	}
	if len(failed) > 0 {
		var ce *codedError
		code := exitError
		if errors.As(worst, &ce) {
			code = ce.code
		}
		return withCode(code, fmt.Errorf("apply: %d of %d bundles not stored: %s: %w", len(failed), len(files), strings.Join(failed, ", "), worst))
	}
	return nil
}

// warnUnenforced prints a warning on w for each field the bundle's
// artifact sets that mcpready does not enforce (artifact.Unenforced), and
// for each semantic advisory (artifact.Advise).
func warnUnenforced(w io.Writer, file string, bundle []byte) {
	obj, err := sign.Peek(bundle)
	if err != nil {
		return
	}
	for _, path := range artifact.Unenforced(obj) {
		note := ""
		if r, _ := artifact.RuleFor(obj.Kind, path); r.Note != "" {
			note = " (" + r.Note + ")"
		}
		fmt.Fprintf(w, "warning: %s: %s/%s sets spec.%s, which is not enforced%s\n", file, obj.Kind, obj.Metadata.Name, path, note)
	}
	for _, a := range artifact.Advise(obj) {
		fmt.Fprintf(w, "warning: %s: %s/%s %s\n", file, obj.Kind, obj.Metadata.Name, a)
	}
}

// shownArtifact is one stored artifact as get and history print it.
type shownArtifact struct {
	Kind     string          `json:"kind"`
	Name     string          `json:"name"`
	Revision int64           `json:"revision"`
	Signer   string          `json:"signerKeyId"`
	StoredAt time.Time       `json:"storedAt"`
	Digest   string          `json:"digest"`
	Deleted  bool            `json:"deleted,omitempty"`
	Object   json.RawMessage `json:"object"`
}

func showArtifacts(arts []*mcpreadyv1.StoredArtifact) []shownArtifact {
	out := make([]shownArtifact, 0, len(arts))
	for _, a := range arts {
		s := shownArtifact{Kind: a.Kind, Name: a.Name, Revision: a.Revision, Signer: a.SignerKeyId, StoredAt: a.StoredAt.AsTime(), Digest: a.Digest, Deleted: a.Deleted}
		if obj, err := sign.Peek(a.Bundle); err == nil {
			s.Object, _ = obj.CanonicalJSON()
		}
		if s.Object == nil {
			s.Object = json.RawMessage("null")
		}
		out = append(out, s)
	}
	return out
}

func shortKey(id string) string {
	if len(id) > 12 {
		return id[:12] + "…"
	}
	return id
}

func age(t time.Time) string {
	d := time.Since(t)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

// getOptions are the flags of get.
type getOptions struct {
	serverOptions
	output         string
	bundles        string
	includeDeleted bool
}

func newGetCmd() *cobra.Command {
	o := &getOptions{}
	cmd := &cobra.Command{
		Use:   "get KIND [NAME] [-o table|json|yaml]",
		Short: "Show the latest revision of stored artifacts",
		Long: `Show the latest revision of every artifact of KIND (or of one NAME).
KIND is case-insensitive and may be plural ("policies"). The table shows
KIND NAME REVISION SIGNER AGE; json and yaml show the decoded objects with
their store metadata. get does not verify signatures: use "mcpready verify".
With --bundles DIR, each artifact's stored Sigstore bundle (the exact bytes
that were applied and verified) is also written to DIR as
<Kind>_<name>.bundle.json ("/" in names as "%2F"), for offline
verification with "mcpready verify" or cosign.`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error { return o.run(cmd, args) },
	}
	addOutputFlag(cmd, &o.output)
	cmd.Flags().BoolVar(&o.includeDeleted, "include-deleted", false, "also show deleted artifacts")
	cmd.Flags().StringVar(&o.bundles, "bundles", "", "also write each stored bundle, exactly as applied, to this directory")
	o.serverOptions.addFlags(cmd)
	return cmd
}

func (o *getOptions) run(cmd *cobra.Command, args []string) error {
	kind, err := kindAndOutput(cmd, args[0], o.output)
	if err != nil {
		return err
	}
	req := &mcpreadyv1.GetRequest{Kind: string(kind), IncludeDeleted: o.includeDeleted}
	if len(args) == 2 {
		req.Name = args[1]
	}
	r, err := adminCall(cmd, &o.serverOptions, func(ctx context.Context, cli mcpreadyv1.AdminServiceClient) (*mcpreadyv1.GetResponse, error) {
		return cli.Get(ctx, req)
	})
	if err != nil {
		return err
	}
	if err := writeBundles(cmd, o.bundles, r.Artifacts, false); err != nil {
		return err
	}
	shown := showArtifacts(r.Artifacts)
	var v any = shown
	if req.Name != "" && len(shown) == 1 {
		v = shown[0]
	}
	return printOutput(cmd.OutOrStdout(), o.output, v, func(tw *tabwriter.Writer) {
		fmt.Fprintln(tw, "KIND\tNAME\tREVISION\tSIGNER\tAGE")
		for _, a := range shown {
			name := a.Name
			if a.Deleted {
				name += " (deleted)"
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", a.Kind, name, a.Revision, shortKey(a.Signer), age(a.StoredAt))
		}
	})
}

// historyOptions are the flags of history.
type historyOptions struct {
	serverOptions
	output  string
	bundles string
}

func newHistoryCmd() *cobra.Command {
	o := &historyOptions{}
	cmd := &cobra.Command{
		Use:   "history KIND NAME [-o table|json|yaml]",
		Short: "Show every stored revision of one artifact, oldest first",
		Long: `Show every stored revision of one artifact, oldest first. With
--bundles DIR, each revision's stored Sigstore bundle (exactly as applied)
is also written to DIR as <Kind>_<name>.r<revision>.bundle.json.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error { return o.run(cmd, args) },
	}
	addOutputFlag(cmd, &o.output)
	cmd.Flags().StringVar(&o.bundles, "bundles", "", "also write each revision's stored bundle, exactly as applied, to this directory")
	o.serverOptions.addFlags(cmd)
	return cmd
}

func (o *historyOptions) run(cmd *cobra.Command, args []string) error {
	kind, err := kindAndOutput(cmd, args[0], o.output)
	if err != nil {
		return err
	}
	r, err := adminCall(cmd, &o.serverOptions, func(ctx context.Context, cli mcpreadyv1.AdminServiceClient) (*mcpreadyv1.HistoryResponse, error) {
		return cli.History(ctx, &mcpreadyv1.HistoryRequest{Kind: string(kind), Name: args[1]})
	})
	if err != nil {
		return err
	}
	if err := writeBundles(cmd, o.bundles, r.Revisions, true); err != nil {
		return err
	}
	shown := showArtifacts(r.Revisions)
	return printOutput(cmd.OutOrStdout(), o.output, shown, func(tw *tabwriter.Writer) {
		fmt.Fprintln(tw, "REVISION\tSTORED\tSIGNER\tDIGEST\tDELETED")
		for _, a := range shown {
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%v\n", a.Revision, a.StoredAt.Format(time.RFC3339), shortKey(a.Signer), a.Digest, a.Deleted)
		}
	})
}

// deleteOptions are the flags of delete.
type deleteOptions struct {
	serverOptions
	key, reason string
}

func newDeleteCmd() *cobra.Command {
	o := &deleteOptions{}
	cmd := &cobra.Command{
		Use:   "delete KIND NAME --key NAME.key [--reason TEXT]",
		Short: "Delete an artifact with a signed Tombstone (history is kept)",
		Long: `Sign a Tombstone for KIND/NAME with the key and send it. The key must be
granted the Tombstone kind and KIND, with NAME in its scopes. The key
password is read as for keygen.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error { return o.run(cmd, args) },
	}
	cmd.Flags().StringVar(&o.key, "key", "", "private key that signs the tombstone")
	cmd.Flags().StringVar(&o.reason, "reason", "", "reason recorded in the tombstone")
	o.serverOptions.addFlags(cmd)
	return cmd
}

func (o *deleteOptions) run(cmd *cobra.Command, args []string) error {
	if o.key == "" {
		return usagef("delete: --key is required")
	}
	kind, err := artifact.ParseKind(args[0])
	if err != nil {
		return withCode(exitUsage, err)
	}
	key, err := loadSigningKey(cmd, o.key)
	if err != nil {
		return err
	}
	// The tombstone names the exact version it deletes.
	cur, err := adminCall(cmd, &o.serverOptions, func(ctx context.Context, cli mcpreadyv1.AdminServiceClient) (*mcpreadyv1.GetResponse, error) {
		return cli.Get(ctx, &mcpreadyv1.GetRequest{Kind: string(kind), Name: args[1]})
	})
	if err != nil {
		return err
	}
	if len(cur.GetArtifacts()) != 1 {
		return fmt.Errorf("delete: %s %q is not stored", kind, args[1])
	}
	target, err := sign.Peek(cur.GetArtifacts()[0].GetBundle())
	if err != nil {
		return err
	}
	obj := artifact.New(artifact.KindTombstone, args[1], &mcpreadyv1.Tombstone{TargetKind: string(kind), TargetName: args[1], Reason: o.reason,
		TargetVersion: target.Version(), TargetDigest: artifact.Digest(cur.GetArtifacts()[0].GetBundle())})
	bundle, _, err := sign.Sign(obj, key)
	if err != nil {
		return err
	}
	r, err := adminCall(cmd, &o.serverOptions, func(ctx context.Context, cli mcpreadyv1.AdminServiceClient) (*mcpreadyv1.DeleteResponse, error) {
		return cli.Delete(ctx, &mcpreadyv1.DeleteRequest{Tombstone: bundle})
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(cmd.OutOrStdout(), "%s/%s deleted at revision %d\n", r.Kind, r.Name, r.Revision)
	return nil
}

// kindAndOutput checks the -o value and parses the KIND argument of get
// and history (both usage errors).
func kindAndOutput(cmd *cobra.Command, kindArg, output string) (artifact.Kind, error) {
	if err := checkOutput(cmd, output); err != nil {
		return "", err
	}
	kind, err := artifact.ParseKind(kindArg)
	if err != nil {
		return "", withCode(exitUsage, err)
	}
	return kind, nil
}

// writeBundles writes each artifact's stored bundle to dir (nothing when
// dir is ""), named by kind and name (and revision when perRevision), and
// says how many on standard error.
func writeBundles(cmd *cobra.Command, dir string, arts []*mcpreadyv1.StoredArtifact, perRevision bool) error {
	if dir == "" {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	n := 0
	for _, a := range arts {
		if len(a.GetBundle()) == 0 {
			continue
		}
		name := a.GetKind() + "_" + strings.ReplaceAll(a.GetName(), "/", "%2F")
		if perRevision {
			name += fmt.Sprintf(".r%d", a.GetRevision())
		}
		if err := atomicfile.WriteFile(filepath.Join(dir, name+".bundle.json"), a.GetBundle(), 0o644); err != nil {
			return err
		}
		n++
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "wrote %d bundle(s) to %s\n", n, dir)
	return nil
}
