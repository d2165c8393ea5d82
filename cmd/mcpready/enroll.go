package main

import (
	"context"
	"crypto"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/mcpready/mcpready/agent/config"
	"github.com/mcpready/mcpready/agent/enroll"
	"github.com/mcpready/mcpready/artifact"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/internal/atomicfile"
	"github.com/mcpready/mcpready/sign"
)

// enrollOptions are the flags of enroll.
type enrollOptions struct {
	serverOptions
	url, name, key, bundles, tokenFile, issuer, output string
	qualificationTTL                                   time.Duration
	qualify, noApply                                   bool
	timeout                                            time.Duration
}

func newEnrollCmd() *cobra.Command {
	o := &enrollOptions{}
	cmd := &cobra.Command{
		Use:   "enroll --url URL --name NAME [--key ORG.key] [--qualify] [--bundles DIR] [--server CP]",
		Short: "Enroll an MCP server: pin its tools as signed RegistryEntries and apply them",
		Long: `Enroll a Streamable HTTP MCP server.

It lists the server's tools, computes each tool's exact identity (server
name and version, endpoint, protocol version, input/output schema digests and
the whole-definition digest, JCS + SHA-256) and signs one CANDIDATE
RegistryEntry per tool, named NAME/<tool>. With --qualify it first runs a
basic qualification: the listing, a safe call of every tool annotated
read-only with arguments generated from its input schema, and negative
fixtures (an empty-argument call must be rejected, an unknown tool must
error); tools that pass everything are recorded QUALIFIED with the
qualification block and the digest of the fixture transcript as evidence.
Unless --no-apply, the entries are applied through the control plane's Admin
API. The signed bundles are written to disk only with --bundles DIR (as
<NAME>_<tool>.bundle.json). The signing key is --key (default $MCPREADY_KEY;
password from $MCPREADY_PASSWORD).

An entry the control plane holds already is re-qualified as registry
qualify does: the same identity gets the next revision of its name; a
drifted one promotes its drift candidate; a failed fixture, or a new
identity no drift candidate pins, is refused (exit 3, nothing written).
Without --qualify an entry held already is refused (exit 2).`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd) },
	}
	fl := cmd.Flags()
	fl.StringVar(&o.url, "url", "", "Streamable HTTP endpoint of the server")
	fl.StringVar(&o.name, "name", "", "server name (registry entries are NAME/<tool>)")
	fl.StringVar(&o.key, "key", os.Getenv("MCPREADY_KEY"), "organisation signing key (env MCPREADY_KEY)")
	fl.StringVar(&o.tokenFile, "token-file", "", "bearer token for the server")
	fl.StringVar(&o.issuer, "issuer", "org", "issuer recorded in the entries' provenance")
	fl.StringVar(&o.bundles, "bundles", "", "also write the signed bundles to this directory")
	fl.BoolVar(&o.qualify, "qualify", false, "run the basic qualification, record QUALIFIED entries and their qualification Evidence")
	fl.DurationVar(&o.qualificationTTL, "qualification-ttl", enroll.DefaultQualificationTTL, "how long the qualification Evidence stays fresh (then the entry turns STALE)")
	fl.BoolVar(&o.noApply, "no-apply", false, "do not apply the entries (with --bundles: only write them)")
	fl.DurationVar(&o.timeout, "timeout", time.Minute, "overall time limit")
	addOutputFlag(cmd, &o.output)
	o.serverOptions.addFlags(cmd)
	return cmd
}

func (o *enrollOptions) run(cmd *cobra.Command) error {
	f := o
	if f.url == "" || f.name == "" {
		return usagef("enroll: --url and --name are required")
	}
	if err := checkOutput(cmd, f.output); err != nil {
		return err
	}
	if err := artifact.ValidateName(f.name + "/x"); err != nil || strings.ContainsAny(f.name, " ") {
		return usagef("enroll: --name %q is not a valid server name", f.name)
	}
	if f.key == "" {
		return usagef("enroll: --key is required (or set MCPREADY_KEY)")
	}
	key, err := loadSigningKey(cmd, f.key)
	if err != nil {
		return usagef("enroll: --key: %w", err)
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), f.timeout)
	defer cancel()
	srv, err := enroll.List(ctx, config.Upstream{Name: f.name, URL: f.url, TokenFile: f.tokenFile})
	if err != nil {
		return fmt.Errorf("enroll: listing %s: %w", f.url, err)
	}
	defer srv.Close()
	now := time.Now().UTC()
	entries, err := srv.Entries(f.issuer, now)
	if err != nil {
		return err
	}
	var admin mcpreadyv1.AdminServiceClient
	if !f.noApply {
		conn, err := f.dial()
		if err != nil {
			return err
		}
		defer conn.Close()
		admin = mcpreadyv1.NewAdminServiceClient(conn)
	}
	// An entry stored already is re-qualified (enroll.Place): the next
	// revision of its name, or its drift candidate promoted, or refused.
	var prior []*artifact.Object
	if admin != nil {
		for _, e := range entries {
			stored, err := enroll.Place(ctx, adminRegistry{admin}, e)
			if err != nil {
				return enrollError(err)
			}
			if stored && !f.qualify {
				return usagef("enroll: %s: %w; re-qualify it with --qualify or `mcpready registry qualify %s`", e.Metadata.Name, enroll.ErrEnrolled, e.Metadata.Name)
			}
			if stored {
				prior = append(prior, e)
			}
		}
	}
	var evidence []*artifact.Object
	if f.qualify {
		transcript, err := srv.Qualify(ctx, entries, now)
		if err != nil {
			return err
		}
		for _, e := range prior {
			if err := enroll.Refuse(e, transcript); err != nil {
				return enrollError(err)
			}
		}
		if evidence, err = enroll.Evidence(entries, transcript, f.issuer, now, f.qualificationTTL); err != nil {
			return err
		}
	}
	return signAndApply(ctx, cmd, key, admin, f.bundles, f.output, append(evidence, entries...))
}

// enrollError maps a re-qualification refusal to exit 3 (like any write
// the control plane refuses on verification).
func enrollError(err error) error {
	if errors.Is(err, enroll.ErrRequalifyFailed) || errors.Is(err, enroll.ErrIdentityChanged) {
		return withCode(exitVerify, err)
	}
	return err
}

// signAndApply signs objs (qualification Evidence first, so an entry never
// names evidence the control plane does not hold yet), writes each bundle
// to dir when dir is set, applies them through admin when it is not nil,
// and prints one row per object.
func signAndApply(ctx context.Context, cmd *cobra.Command, key crypto.Signer, admin mcpreadyv1.AdminServiceClient, dir, output string, objs []*artifact.Object) error {
	if dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	type row struct {
		Name, State, Definition, File string
		Revision                      int64
	}
	var rows []row
	for _, o := range objs {
		bundle, _, err := sign.Sign(o, key)
		if err != nil {
			return err
		}
		file := "-"
		if dir != "" {
			file = filepath.Join(dir, strings.ReplaceAll(o.Metadata.Name, "/", "_")+".bundle.json")
			if err := atomicfile.WriteFile(file, bundle, 0o644); err != nil {
				return err
			}
		}
		r := row{Name: o.Metadata.Name, State: "EVIDENCE", Definition: "-", File: file}
		if e, ok := o.Spec.(*mcpreadyv1.RegistryEntry); ok {
			r.State, r.Definition = strings.TrimPrefix(e.GetState().String(), "LIFECYCLE_STATE_"), e.GetIdentity().GetDefinitionDigest()
		}
		if admin != nil {
			resp, err := admin.Apply(ctx, &mcpreadyv1.ApplyRequest{Bundle: bundle})
			if err != nil {
				return fmt.Errorf("applying %s: %w", o.Metadata.Name, rpcError(err))
			}
			r.Revision = resp.GetRevision()
		}
		rows = append(rows, r)
	}
	return printOutput(cmd.OutOrStdout(), output, rows, func(tw *tabwriter.Writer) {
		fmt.Fprintln(tw, "ENTRY\tSTATE\tDEFINITION\tREVISION\tFILE")
		for _, r := range rows {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\n", r.Name, r.State, r.Definition, r.Revision, r.File)
		}
	})
}
