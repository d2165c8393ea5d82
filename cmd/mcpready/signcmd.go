package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/mcpready/mcpready/artifact"
	"github.com/mcpready/mcpready/internal/atomicfile"
	"github.com/mcpready/mcpready/internal/retrieve"
	"github.com/mcpready/mcpready/sign"
)

// signOptions are the flags of sign.
type signOptions struct {
	key, kind, file string
	source          string
	bundle, payload string
}

func newSignCmd() *cobra.Command {
	o := &signOptions{}
	cmd := &cobra.Command{
		Use:   "sign --key NAME.key --kind KIND (-f ARTIFACT.yaml | --source URL) [--bundle ARTIFACT.bundle.json] [--payload ARTIFACT.payload.json]",
		Short: "Sign an artifact into a Sigstore bundle (DSSE over an in-toto statement)",
		Long: `Sign an artifact (YAML or JSON) with a private key into a Sigstore bundle.
The bundle is written to --bundle FILE, or to standard output without it.
--payload FILE also writes the artifact's canonical JSON: the in-toto
predicate and the blob whose SHA-256 is the statement subject digest (what
cosign verify-blob-attestation takes as its blob). Nothing else is written.
With --bundle, a summary (files, kind, name, key id, digest) is printed on
standard output.

--source URL fetches the artifact where it is published instead of -f
(https, or plain http on a loopback address; at most 4 MiB; redirects
within its origin only) and records in its provenance where it came from
(sourceUri) and the SHA-256 of the bytes fetched (retrievalDigest), under
the signature; "mcpready verify --source" later checks that the source
still serves those bytes. An artifact that already names another source or
digest is refused.

--kind must match the file's kind. The key password is read as for keygen.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd) },
	}
	fl := cmd.Flags()
	fl.StringVar(&o.key, "key", "", "private key file (NAME.key, required)")
	fl.StringVar(&o.kind, "kind", "", "artifact kind, must match the file (required)")
	fl.StringVarP(&o.file, "filename", "f", "", "artifact file, YAML or JSON (this or --source)")
	fl.StringVar(&o.source, "source", "", "fetch the artifact from this URL and record the source and its digest in the provenance (this or -f)")
	fl.StringVar(&o.bundle, "bundle", "", "write the bundle to this file (default: standard output)")
	fl.StringVar(&o.payload, "payload", "", "also write the canonical payload (the blob cosign verifies) to this file")
	return cmd
}

func (o *signOptions) run(cmd *cobra.Command) error {
	if o.key == "" || o.kind == "" || (o.file == "") == (o.source == "") {
		return usagef("sign: --key, --kind and one of -f and --source are required")
	}
	kind, err := artifact.ParseKind(o.kind)
	if err != nil {
		return usagef("sign: --kind: %w", err)
	}
	from, data, digest := o.file, []byte(nil), ""
	if o.source != "" {
		from = o.source
		if data, digest, err = retrieve.Fetch(cmd.Context(), o.source, retrieve.Options{}); errors.Is(err, retrieve.ErrURL) {
			return usagef("sign: --source: %w", err)
		}
	} else {
		data, err = os.ReadFile(o.file)
	}
	if err != nil {
		return err
	}
	obj, err := artifact.Parse(data)
	if err != nil {
		return fmt.Errorf("%s: %w", from, err)
	}
	if obj.Kind != kind {
		return fmt.Errorf("%s: file holds a %s, but --kind is %s", from, obj.Kind, kind)
	}
	if o.source != "" {
		if err := obj.RecordRetrieval(o.source, digest); err != nil {
			return fmt.Errorf("%s: %w", from, err)
		}
	}
	key, err := loadSigningKey(cmd, o.key)
	if err != nil {
		return err
	}
	bundle, _, err := sign.Sign(obj, key)
	if err != nil {
		return err
	}
	predicate, err := obj.CanonicalJSON()
	if err != nil {
		return err
	}
	if o.payload != "" {
		if err := atomicfile.WriteFile(o.payload, predicate, 0o644); err != nil {
			return err
		}
	}
	if o.bundle == "" {
		_, err := cmd.OutOrStdout().Write(append(bundle, '\n'))
		return err
	}
	if err := atomicfile.WriteFile(o.bundle, bundle, 0o644); err != nil {
		return err
	}
	id, err := sign.KeyID(key.Public())
	if err != nil {
		return err
	}
	fmt.Fprintf(cmd.OutOrStdout(), "bundle:  %s\npayload: %s\nkind:    %s\nname:    %s\nkey id:  %s\ndigest:  %s\n",
		o.bundle, orDash(o.payload), obj.Kind, obj.Metadata.Name, id, artifact.Digest(predicate))
	return nil
}
