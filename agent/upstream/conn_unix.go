//go:build unix

package upstream

import (
	"errors"
	"syscall"
)

// quiet peeks at a socket without blocking: open with nothing to read.
func quiet(rc syscall.RawConn) bool {
	ok := false
	err := rc.Read(func(fd uintptr) bool {
		var b [1]byte
		n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		ok = n < 0 && (errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EWOULDBLOCK))
		return true // never wait for readiness
	})
	return err == nil && ok
}
