package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/mcpready/mcpready/sign"
)

var verifyFlags struct {
	file   string
	key    string
	root   string
	trust  string
	output string
}

// verifyResult is what verify prints on success.
type verifyResult struct {
	Kind   string `json:"kind"`
	Name   string `json:"name"`
	KeyID  string `json:"keyId"`
	Digest string `json:"digest"`
}

var verifyCmd = &cobra.Command{
	Use:   "verify -f BUNDLE (--key NAME.pub | --root ROOT.pub --trust TRUSTPOLICY.bundle.json) [-o table|json|yaml]",
	Short: "Verify a signed artifact bundle offline",
	Long: `Verify a Sigstore bundle made by "mcpready sign", offline.

With --key, the bundle must be signed by that public key. With --root and
--trust, the trust policy bundle must be signed by the root key, and the
bundle's key must be the root key or be granted, now, the artifact's kind
and name by the trust policy.

Exit status: 0 verified, 3 verification failed (the reason is printed on
standard error), 2 usage error, 1 any other error.`,
	Args: noArgs,
	RunE: func(cmd *cobra.Command, _ []string) error {
		f := verifyFlags
		defer resetFlags(cmd)
		if f.file == "" {
			return withCode(exitUsage, errors.New("verify: -f BUNDLE is required"))
		}
		byKey := f.key != ""
		byTrust := f.root != "" || f.trust != ""
		if byKey == byTrust || (byTrust && (f.root == "" || f.trust == "")) {
			return withCode(exitUsage, errors.New("verify: give either --key, or both --root and --trust"))
		}
		switch f.output {
		case "table", "json", "yaml":
		default:
			return withCode(exitUsage, fmt.Errorf("verify: -o %q (want table, json or yaml)", f.output))
		}
		bundle, err := os.ReadFile(f.file)
		if err != nil {
			return err
		}
		var v *sign.Verified
		if byKey {
			pub, err := sign.ReadPublicKeyFile(f.key)
			if err != nil {
				return err
			}
			v, err = sign.VerifyWithKey(bundle, pub)
			if err != nil {
				return verifyFailure(f.file, err)
			}
		} else {
			rootKey, err := sign.ReadPublicKeyFile(f.root)
			if err != nil {
				return err
			}
			tpBundle, err := os.ReadFile(f.trust)
			if err != nil {
				return err
			}
			now := time.Now()
			trust, err := sign.NewTrust(tpBundle, rootKey, now)
			if err != nil {
				return verifyFailure(f.trust, err)
			}
			if v, err = trust.Verify(bundle, now); err != nil {
				return verifyFailure(f.file, err)
			}
		}
		return printVerified(cmd, f.output, verifyResult{
			Kind: string(v.Object.Kind), Name: v.Object.Metadata.Name, KeyID: v.KeyID, Digest: v.Digest,
		})
	},
}

func init() {
	fl := verifyCmd.Flags()
	fl.StringVarP(&verifyFlags.file, "file", "f", "", "bundle to verify (required)")
	fl.StringVar(&verifyFlags.key, "key", "", "public key the bundle must be signed with")
	fl.StringVar(&verifyFlags.root, "root", "", "the organisation's root public key (with --trust)")
	fl.StringVar(&verifyFlags.trust, "trust", "", "TrustPolicy bundle signed by the root key (with --root)")
	fl.StringVarP(&verifyFlags.output, "output", "o", "table", "output format: table, json or yaml")
	verifyCmd.SetFlagErrorFunc(usageError)
	root.AddCommand(verifyCmd)
}

// verifyFailure gives a verification failure the verify exit code.
func verifyFailure(file string, err error) error {
	if sign.ReasonOf(err) != "" {
		return withCode(exitVerify, fmt.Errorf("%s: %w", file, err))
	}
	return fmt.Errorf("%s: %w", file, err)
}

func printVerified(cmd *cobra.Command, format string, r verifyResult) error {
	out := cmd.OutOrStdout()
	switch format {
	case "json", "yaml":
		b, err := json.MarshalIndent(r, "", "  ")
		if err != nil {
			return err
		}
		if format == "yaml" {
			if b, err = yaml.JSONToYAML(b); err != nil {
				return err
			}
			_, err = out.Write(b)
			return err
		}
		_, err = fmt.Fprintf(out, "%s\n", b)
		return err
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KIND\tNAME\tKEY ID\tDIGEST")
	fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.Kind, r.Name, r.KeyID, r.Digest)
	return tw.Flush()
}
