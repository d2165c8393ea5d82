// Command mcpready is the single binary of mcpready: control plane, host
// agent, and the CLI for keys, signing, verification and administration.
//
// Each subcommand lives in its own file and registers itself on the root
// command from an init function.
package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/spf13/cobra"
)

// Exit codes. Scripts may branch on them.
const (
	exitOK = 0
	// exitError is any failure without a more specific code.
	exitError = 1
	// exitUsage is a bad flag or argument.
	exitUsage = 2
	// exitVerify is a signature or trust verification failure.
	exitVerify = 3
	// exitUnavailable is a server that could not be reached.
	exitUnavailable = 4
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

var root = &cobra.Command{
	Use:           "mcpready",
	Short:         "Readiness layer for MCP tool calls: signed policy, safe routing, signed receipts",
	SilenceUsage:  true,
	SilenceErrors: true,
}

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	root.SetArgs(args)
	err := root.Execute()
	if err == nil {
		return exitOK
	}
	fmt.Fprintln(os.Stderr, "mcpready:", err)
	var ce *codedError
	if errors.As(err, &ce) {
		return ce.code
	}
	return exitError
}

// logger returns the process logger: structured, on stderr.
func logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
}
