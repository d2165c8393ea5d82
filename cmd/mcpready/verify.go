package main

import (
	"errors"
	"fmt"
	"os"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/mcpready/mcpready/internal/retrieve"
	"github.com/mcpready/mcpready/sign"
)

// verifyOptions are the flags of verify.
type verifyOptions struct {
	file, key, root, trust, output string
	source                         bool
}

// verifyResult is what verify prints on success.
type verifyResult struct {
	Kind   string `json:"kind"`
	Name   string `json:"name"`
	KeyID  string `json:"keyId"`
	Digest string `json:"digest"`
	// Source is the --source check's result: "unchanged" (the recorded
	// source still serves the bytes retrieved); "" without --source.
	Source string `json:"source,omitempty"`
}

func newVerifyCmd() *cobra.Command {
	o := &verifyOptions{}
	cmd := &cobra.Command{
		Use:   "verify -f BUNDLE (--key NAME.pub | --root ROOT.pub --trust TRUSTPOLICY.bundle.json) [--source] [-o table|json|yaml]",
		Short: "Verify a signed artifact bundle offline",
		Long: `Verify a Sigstore bundle made by "mcpready sign", offline.

With --key, the bundle must be signed by that public key. With --root and
--trust, the trust policy bundle must be signed by the root key, and the
bundle's key must be the root key or be granted, now, the artifact's kind
and name by the trust policy.

--source also fetches the source the signed artifact records
(provenance.sourceUri, see "mcpready sign --source") and checks that it
still serves the bytes retrieved (provenance.retrievalDigest): the only
step that leaves the machine. A source that now serves other bytes fails
verification; one that cannot be read, or an artifact that records no
source and digest, is an error.

Exit status: 0 verified, 3 verification failed (the reason is printed on
standard error), 2 usage error, 1 any other error.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd) },
	}
	fl := cmd.Flags()
	fl.StringVarP(&o.file, "filename", "f", "", "bundle to verify (required)")
	fl.StringVar(&o.key, "key", "", "public key the bundle must be signed with")
	fl.StringVar(&o.root, "root", "", "the organisation's root public key (with --trust)")
	fl.StringVar(&o.trust, "trust", "", "TrustPolicy bundle signed by the root key (with --root)")
	fl.BoolVar(&o.source, "source", false, "also check that the artifact's recorded source still serves the bytes retrieved (fetches it)")
	addOutputFlag(cmd, &o.output)
	return cmd
}

func (o *verifyOptions) run(cmd *cobra.Command) error {
	if o.file == "" {
		return usagef("verify: -f BUNDLE is required")
	}
	byKey := o.key != ""
	byTrust := o.root != "" || o.trust != ""
	if byKey == byTrust || (byTrust && (o.root == "" || o.trust == "")) {
		return usagef("verify: give either --key, or both --root and --trust")
	}
	if err := checkOutput(cmd, o.output); err != nil {
		return err
	}
	bundle, err := os.ReadFile(o.file)
	if err != nil {
		return err
	}
	var v *sign.Verified
	if byKey {
		pub, err := sign.ReadPublicKeyFile(o.key)
		if err != nil {
			return err
		}
		v, err = sign.VerifyWithKey(bundle, pub)
		if err != nil {
			return verifyFailure(o.file, err)
		}
	} else {
		rootKey, err := sign.ReadPublicKeyFile(o.root)
		if err != nil {
			return err
		}
		tpBundle, err := os.ReadFile(o.trust)
		if err != nil {
			return err
		}
		now := time.Now()
		trust, err := sign.NewTrust(tpBundle, rootKey, now)
		if err != nil {
			return verifyFailure(o.trust, err)
		}
		if v, err = trust.Verify(bundle, now); err != nil {
			return verifyFailure(o.file, err)
		}
	}
	r := verifyResult{Kind: string(v.Object.Kind), Name: v.Object.Metadata.Name, KeyID: v.KeyID, Digest: v.Digest}
	if o.source {
		switch err := retrieve.Check(cmd.Context(), v.Object, retrieve.Options{}); {
		case errors.Is(err, retrieve.ErrChanged):
			return withCode(exitVerify, fmt.Errorf("%s: %w", o.file, err))
		case err != nil:
			return fmt.Errorf("%s: --source: %w", o.file, err)
		}
		r.Source = "unchanged"
	}
	return printVerified(cmd, o.output, r)
}

// verifyFailure gives a verification failure the verify exit code.
func verifyFailure(file string, err error) error {
	if sign.ReasonOf(err) != "" {
		return withCode(exitVerify, fmt.Errorf("%s: %w", file, err))
	}
	return fmt.Errorf("%s: %w", file, err)
}

func printVerified(cmd *cobra.Command, format string, r verifyResult) error {
	return printOutput(cmd.OutOrStdout(), format, r, func(tw *tabwriter.Writer) {
		if r.Source == "" {
			fmt.Fprintln(tw, "KIND\tNAME\tKEY ID\tDIGEST")
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.Kind, r.Name, r.KeyID, r.Digest)
			return
		}
		fmt.Fprintln(tw, "KIND\tNAME\tKEY ID\tDIGEST\tSOURCE")
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.Kind, r.Name, r.KeyID, r.Digest, r.Source)
	})
}
