package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/mcpready/mcpready/artifact"
	"github.com/mcpready/mcpready/internal/atomicfile"
	"github.com/mcpready/mcpready/sign"
)

var signFlags struct {
	key  string
	kind string
	file string
	out  string
}

var signCmd = &cobra.Command{
	Use:   "sign --key NAME.key --kind KIND -f ARTIFACT.yaml [-o ARTIFACT.bundle.json]",
	Short: "Sign an artifact into a Sigstore bundle (DSSE over an in-toto statement)",
	Long: `Sign an artifact (YAML or JSON) with a private key. Writes the Sigstore
bundle (-o, default <file without extension>.bundle.json) and, next to it,
<bundle without .bundle.json>.payload.json: the artifact's canonical JSON,
which is the in-toto predicate and the blob whose SHA-256 is the statement
subject digest (what cosign verify-blob-attestation takes as its blob).

--kind must match the file's kind. The key password is read as for keygen.`,
	Args: noArgs,
	RunE: func(cmd *cobra.Command, _ []string) error {
		f := signFlags
		defer resetFlags(cmd)
		if f.key == "" || f.kind == "" || f.file == "" {
			return withCode(exitUsage, errors.New("sign: --key, --kind and -f are required"))
		}
		kind, err := artifact.ParseKind(f.kind)
		if err != nil {
			return withCode(exitUsage, fmt.Errorf("sign: --kind: %w", err))
		}
		data, err := os.ReadFile(f.file)
		if err != nil {
			return err
		}
		obj, err := artifact.Parse(data)
		if err != nil {
			return fmt.Errorf("%s: %w", f.file, err)
		}
		if obj.Kind != kind {
			return fmt.Errorf("%s: file holds a %s, but --kind is %s", f.file, obj.Kind, kind)
		}
		key, err := loadSigningKey(cmd, f.key)
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
		out := f.out
		if out == "" {
			out = strings.TrimSuffix(f.file, filepath.Ext(f.file)) + ".bundle.json"
		}
		payloadPath := payloadPathFor(out)
		if err := atomicfile.WriteFile(payloadPath, predicate, 0o644); err != nil {
			return err
		}
		if err := atomicfile.WriteFile(out, bundle, 0o644); err != nil {
			return err
		}
		id, err := sign.KeyID(key.Public())
		if err != nil {
			return err
		}
		fmt.Fprintf(cmd.OutOrStdout(), "bundle:  %s\npayload: %s\nkind:    %s\nname:    %s\nkey id:  %s\ndigest:  %s\n",
			out, payloadPath, obj.Kind, obj.Metadata.Name, id, artifact.Digest(predicate))
		return nil
	},
}

func init() {
	fl := signCmd.Flags()
	fl.StringVar(&signFlags.key, "key", "", "private key file (NAME.key, required)")
	fl.StringVar(&signFlags.kind, "kind", "", "artifact kind, must match the file (required)")
	fl.StringVarP(&signFlags.file, "file", "f", "", "artifact file, YAML or JSON (required)")
	fl.StringVarP(&signFlags.out, "output", "o", "", "bundle file to write (default <file>.bundle.json)")
	signCmd.SetFlagErrorFunc(usageError)
	root.AddCommand(signCmd)
}

// payloadPathFor returns where sign writes the canonical payload for the
// bundle path out: out without ".bundle.json" (or ".json"), plus
// ".payload.json".
func payloadPathFor(out string) string {
	base, ok := strings.CutSuffix(out, ".bundle.json")
	if !ok {
		base = strings.TrimSuffix(out, ".json")
	}
	return base + ".payload.json"
}
