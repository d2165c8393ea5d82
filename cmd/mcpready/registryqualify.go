package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/mcpready/mcpready/agent/config"
	"github.com/mcpready/mcpready/agent/enroll"
	"github.com/mcpready/mcpready/artifact"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/sign"
)

// registryQualifyOptions are the flags of registry qualify.
type registryQualifyOptions struct {
	serverOptions
	key, tokenFile, issuer, output string
	qualificationTTL, timeout      time.Duration
}

func newRegistryQualifyCmd() *cobra.Command {
	o := &registryQualifyOptions{}
	cmd := &cobra.Command{
		Use:   "qualify NAME --key ORG.key [--token-file FILE] [--qualification-ttl 720h] [-o table|json|yaml]",
		Short: "Re-run the qualification suite against a registry entry's endpoint and write the result as Evidence",
		Long: `Re-qualify the registry entry NAME: list the tool at the endpoint its
identity pins, run the qualification suite of enroll --qualify (listing,
negative fixtures, a safe call if the tool is annotated read-only) and write
signed qualification Evidence (method SYNTHETIC, the suite, every fixture,
an expiry after --qualification-ttl) and a QUALIFIED revision of the entry.

If the server still serves the identity NAME pins, the result is the next
revision of NAME (this renews a STALE qualification). If it serves another
identity and an agent reported that drift, the drift candidate NAME's
status names (SUPERSEDED BY in registry status) is promoted: the
QUALIFIED entry is written under the candidate's name, superseding NAME,
which stays SUSPENDED. Anything else is refused with exit 3 and nothing is
written: a failed fixture (named in the error), or a new identity no drift
candidate pins.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return o.run(cmd, args[0]) },
	}
	fl := cmd.Flags()
	fl.StringVar(&o.key, "key", os.Getenv("MCPREADY_KEY"), "organisation signing key (env MCPREADY_KEY)")
	fl.StringVar(&o.tokenFile, "token-file", "", "bearer token for the server")
	fl.StringVar(&o.issuer, "issuer", "org", "issuer recorded in the entry's provenance and the Evidence")
	fl.DurationVar(&o.qualificationTTL, "qualification-ttl", enroll.DefaultQualificationTTL, "how long the qualification Evidence stays fresh (then the entry turns STALE)")
	fl.DurationVar(&o.timeout, "timeout", time.Minute, "overall time limit")
	addOutputFlag(cmd, &o.output)
	o.serverOptions.addFlags(cmd)
	return cmd
}

func (o *registryQualifyOptions) run(cmd *cobra.Command, name string) error {
	if err := checkOutput(cmd, o.output); err != nil {
		return err
	}
	if o.key == "" {
		return usagef("registry qualify: --key is required (or set MCPREADY_KEY)")
	}
	key, err := loadSigningKey(cmd, o.key)
	if err != nil {
		return usagef("registry qualify: --key: %w", err)
	}
	conn, err := o.dial()
	if err != nil {
		return err
	}
	defer conn.Close()
	admin := mcpreadyv1.NewAdminServiceClient(conn)
	reg := adminRegistry{admin}
	ctx, cancel := context.WithTimeout(cmd.Context(), o.timeout)
	defer cancel()
	cur, ok, err := reg.Entry(ctx, name)
	if err != nil {
		return err
	}
	if !ok {
		return notFound("registry qualify: no registry entry %q", name)
	}
	id := cur.Spec.GetIdentity()
	if id.GetEndpoint() == "" || id.GetServerName() == "" || id.GetToolName() == "" {
		return withCode(exitVerify, fmt.Errorf("registry qualify: %s pins no endpoint, server or tool name to qualify against", name))
	}
	srv, err := enroll.List(ctx, config.Upstream{Name: id.GetServerName(), URL: id.GetEndpoint(), TokenFile: o.tokenFile})
	if err != nil {
		return fmt.Errorf("registry qualify: listing %s: %w", id.GetEndpoint(), err)
	}
	defer srv.Close()
	one, ok := srv.Only(id.GetToolName())
	if !ok {
		return withCode(exitVerify, fmt.Errorf("registry qualify: %s no longer lists tool %q; nothing written", id.GetEndpoint(), id.GetToolName()))
	}
	now := time.Now().UTC()
	entries, err := one.Entries(o.issuer, now)
	if err != nil {
		return err
	}
	entries[0].Metadata.Name = name
	if _, err := enroll.Place(ctx, reg, entries[0]); err != nil {
		return enrollError(err)
	}
	transcript, err := one.Qualify(ctx, entries, now)
	if err != nil {
		return err
	}
	if err := enroll.Refuse(entries[0], transcript); err != nil {
		return enrollError(err)
	}
	evidence, err := enroll.Evidence(entries, transcript, o.issuer, now, o.qualificationTTL)
	if err != nil {
		return err
	}
	return signAndApply(ctx, cmd, key, admin, "", o.output, append(evidence, entries...))
}

// adminRegistry reads registry entries for enroll.Place over the Admin API.
type adminRegistry struct{ cli mcpreadyv1.AdminServiceClient }

func (r adminRegistry) Entry(ctx context.Context, name string) (enroll.Stored, bool, error) {
	got, err := r.cli.Get(ctx, &mcpreadyv1.GetRequest{Kind: string(artifact.KindRegistryEntry), Name: name})
	if status.Code(err) == codes.NotFound {
		return enroll.Stored{}, false, nil
	}
	if err != nil {
		return enroll.Stored{}, false, rpcError(err)
	}
	if len(got.GetArtifacts()) != 1 {
		return enroll.Stored{}, false, nil
	}
	obj, err := sign.Peek(got.GetArtifacts()[0].GetBundle())
	if err != nil {
		return enroll.Stored{}, false, err
	}
	spec, ok := obj.Spec.(*mcpreadyv1.RegistryEntry)
	if !ok {
		return enroll.Stored{}, false, fmt.Errorf("stored %s is not a RegistryEntry", name)
	}
	st, err := r.cli.RegistryStatus(ctx, &mcpreadyv1.RegistryStatusRequest{Name: name})
	if err != nil {
		return enroll.Stored{}, false, rpcError(err)
	}
	s := enroll.Stored{Spec: spec, Labels: obj.Metadata.Labels, Version: obj.Version()}
	if len(st.GetEntries()) == 1 {
		s.Status = st.GetEntries()[0]
	}
	return s, true, nil
}
