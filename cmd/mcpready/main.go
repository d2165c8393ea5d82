// Command mcpready is the single binary of mcpready: control plane, host
// agent, and the CLI for keys, signing, verification and administration.
//
// Each command is built by its own constructor (newApplyCmd, newSignCmd, …)
// from an options struct that holds its flags; newRootCmd assembles a fresh
// tree for every run, so nothing is kept in package variables. Conventions
// every command follows: -o/--output is the output format (table, yaml or
// json; JSON lines for streams), -f/--filename names input, files are
// written only where a flag names them, and the exit code is 0 success,
// 1 error, 2 usage error, 3 verification failed.
//
// This package must not hold policy, verification or receipt logic of its
// own: it parses flags and calls the library packages (sign, artifact,
// agent, controlplane, the receipt format) and prints what they return.
package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/spf13/cobra"
)

// Exit codes. Scripts may branch on them.
const (
	exitOK = 0
	// exitError is any failure without a more specific code, including a
	// server that could not be reached.
	exitError = 1
	// exitUsage is a bad command, flag or argument.
	exitUsage = 2
	// exitVerify is a signature, trust or chain verification failure, or a
	// write the control plane refused on verification.
	exitVerify = 3
)

// codedError carries the exit code a failure should produce.
type codedError struct {
	code int
	err  error
}

func (e *codedError) Error() string { return e.err.Error() }
func (e *codedError) Unwrap() error { return e.err }

// withCode wraps err so that main exits with code.
func withCode(code int, err error) error {
	if err == nil {
		return nil
	}
	return &codedError{code: code, err: err}
}

// newGroupCmd is a command that only holds subcommands.
func newGroupCmd(use, short string, subs ...*cobra.Command) *cobra.Command {
	cmd := &cobra.Command{Use: use, Short: short}
	cmd.AddCommand(subs...)
	return cmd
}

// usagef is a usage error (exit 2).
func usagef(format string, args ...any) error {
	return withCode(exitUsage, fmt.Errorf(format, args...))
}

// newRootCmd builds the whole command tree. Every call returns a new tree
// with default flag values.
func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "mcpready",
		Short:         "Readiness layer for MCP tool calls: signed policy, safe routing, signed receipts",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(
		newAgentCmd(), newApplyCmd(), newConnectCmd(), newControlPlaneCmd(), newDeleteCmd(), newDemoCmd(),
		newEnrollCmd(), newExplainCmd(), newGetCmd(), newHistoryCmd(), newKeygenCmd(), newReceiptsCmd(),
		newProbeCmd(), newProberCmd(), newRegistryCmd(), newSignCmd(), newUpCmd(), newVerifyCmd(), newVersionCmd(),
	)
	markUsageErrors(root)
	return root
}

// markUsageErrors gives every command of the tree the usage exit code for
// bad flags and arguments, and makes a command group (a command with
// subcommands and nothing to run) refuse an unknown subcommand.
func markUsageErrors(c *cobra.Command) {
	c.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return usagef("%s: %w", cmd.CommandPath(), err)
	})
	if c.HasSubCommands() && c.Run == nil && c.RunE == nil {
		c.Args = cobra.ArbitraryArgs
		c.RunE = func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usagef("%s: unknown command %q (see %s --help)", cmd.CommandPath(), args[0], cmd.CommandPath())
			}
			return cmd.Help()
		}
	}
	if v := c.Args; v != nil {
		c.Args = func(cmd *cobra.Command, args []string) error {
			if err := v(cmd, args); err != nil {
				var ce *codedError
				if errors.As(err, &ce) {
					return err
				}
				return usagef("%s: %w", cmd.CommandPath(), err)
			}
			return nil
		}
	}
	for _, s := range c.Commands() {
		markUsageErrors(s)
	}
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// run executes one command line and returns its exit code.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := newRootCmd()
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.Execute()
	if err == nil {
		return exitOK
	}
	fmt.Fprintln(stderr, "mcpready:", err)
	var ce *codedError
	if errors.As(err, &ce) {
		return ce.code
	}
	return exitError
}

// logger returns the process logger: structured, on w (standard error).
func logger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// noArgs rejects positional arguments.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usagef("%s: unexpected argument %q", cmd.Name(), args[0])
	}
	return nil
}

// oneArg requires exactly one positional argument.
func oneArg(cmd *cobra.Command, args []string) error {
	if len(args) != 1 {
		return usagef("%s: want exactly one argument, got %d", cmd.Name(), len(args))
	}
	return nil
}
