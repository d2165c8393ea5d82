//go:build unix

package upstream

import (
	"errors"
	"os/exec"
	"syscall"

	"github.com/mcpready/mcpready/agent/config"
)

// runAs makes cmd run as r's user and group, with no supplementary groups
// (config.New checked that the agent may switch).
func runAs(cmd *exec.Cmd, r *config.RunAs) error {
	if r == nil {
		return nil
	}
	if r.UID == nil || r.GID == nil {
		return errors.New("runAs needs both uid and gid")
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: *r.UID, Gid: *r.GID, Groups: []uint32{}}}
	return nil
}

// quiet returns a peek at rc's socket without blocking: open with nothing
// to read. The peek's closure (which escapes to RawConn.Read) is made once,
// not per peek; one goroutine at a time may peek.
func quiet(rc syscall.RawConn) func() bool {
	ok := false
	peek := func(fd uintptr) bool {
		var b [1]byte
		n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		ok = n < 0 && (errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EWOULDBLOCK))
		return true // never wait for readiness
	}
	return func() bool {
		ok = false
		return rc.Read(peek) == nil && ok
	}
}
