//go:build !unix

package upstream

import (
	"errors"
	"os/exec"
	"syscall"

	"github.com/mcpready/mcpready/agent/config"
)

// quiet cannot peek here; a connection the server closed fails on use.
func quiet(syscall.RawConn) func() bool { return func() bool { return true } }

// runAs is not available here: a configured user is refused.
func runAs(_ *exec.Cmd, r *config.RunAs) error {
	if r != nil {
		return errors.New("runAs is supported on unix only")
	}
	return nil
}
