package main

import (
	"bufio"
	"crypto"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/mcpready/mcpready/sign"
)

// keygenOptions are the flags of keygen.
type keygenOptions struct {
	out       string
	algorithm string
	force     bool
}

func newKeygenCmd() *cobra.Command {
	o := &keygenOptions{}
	cmd := &cobra.Command{
		Use:   "keygen --out DIR/NAME [--algorithm ecdsa-p256|ed25519]",
		Short: "Generate a signing key pair: NAME.key (encrypted, cosign format) and NAME.pub",
		Long: `Generate a signing key pair. NAME.key is the private key, encrypted with a
password in cosign's format (mode 0600); NAME.pub is the PEM public key.

The password comes from $MCPREADY_PASSWORD, else $COSIGN_PASSWORD (set to
empty for an empty password), else a prompt on the terminal, else one line
of standard input.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd) },
	}
	fl := cmd.Flags()
	fl.StringVar(&o.out, "out", "", "path prefix DIR/NAME of the key pair to write (required)")
	fl.StringVar(&o.algorithm, "algorithm", string(sign.AlgorithmECDSAP256), "key algorithm: ecdsa-p256 or ed25519")
	fl.BoolVar(&o.force, "force", false, "replace an existing key pair")
	return cmd
}

func (o *keygenOptions) run(cmd *cobra.Command) error {
	if o.out == "" {
		return usagef("keygen: --out DIR/NAME is required")
	}
	alg, err := sign.ParseAlgorithm(o.algorithm)
	if err != nil {
		return withCode(exitUsage, err)
	}
	prefix := strings.TrimSuffix(strings.TrimSuffix(o.out, ".key"), ".pub")
	if o.force {
		for _, p := range []string{prefix + ".key", prefix + ".pub"} {
			if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
		}
	}
	if err := os.MkdirAll(filepath.Dir(prefix), 0o755); err != nil {
		return err
	}
	pw, err := readPassword(cmd, true)
	if err != nil {
		return err
	}
	key, err := sign.WriteKeyPair(prefix, alg, pw)
	if errors.Is(err, sign.ErrKeyExists) {
		return fmt.Errorf("%w (use --force to replace the key pair)", err)
	}
	if err != nil {
		return err
	}
	id, err := sign.KeyID(key.Public())
	if err != nil {
		return err
	}
	fmt.Fprintf(cmd.OutOrStdout(), "private key: %s\npublic key:  %s\nkey id:      %s\n", prefix+".key", prefix+".pub", id)
	return nil
}

// readPassword returns the private key password: $MCPREADY_PASSWORD, else
// $COSIGN_PASSWORD (either may be set to empty), else a terminal prompt
// (entered twice when confirm is set), else one line of standard input.
func readPassword(cmd *cobra.Command, confirm bool) ([]byte, error) {
	for _, env := range []string{"MCPREADY_PASSWORD", "COSIGN_PASSWORD"} {
		if v, ok := os.LookupEnv(env); ok {
			return []byte(v), nil
		}
	}
	in := cmd.InOrStdin()
	if f, ok := in.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		errOut := cmd.ErrOrStderr()
		fmt.Fprint(errOut, "Password for private key: ")
		pw, err := term.ReadPassword(int(f.Fd()))
		fmt.Fprintln(errOut)
		if err != nil {
			return nil, fmt.Errorf("read password: %w", err)
		}
		if confirm {
			fmt.Fprint(errOut, "Repeat password: ")
			again, err := term.ReadPassword(int(f.Fd()))
			fmt.Fprintln(errOut)
			if err != nil {
				return nil, fmt.Errorf("read password: %w", err)
			}
			if string(again) != string(pw) {
				return nil, errors.New("passwords do not match")
			}
		}
		return pw, nil
	}
	line, err := bufio.NewReader(in).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("read password from standard input: %w", err)
	}
	return []byte(strings.TrimRight(line, "\r\n")), nil
}

// loadSigningKey reads and decrypts the private key file at path, with the
// password from readPassword.
func loadSigningKey(cmd *cobra.Command, path string) (crypto.Signer, error) {
	pw, err := readPassword(cmd, false)
	if err != nil {
		return nil, err
	}
	return sign.ReadPrivateKeyFile(path, pw)
}
