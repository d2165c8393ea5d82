//go:build unix

package decide

import (
	"syscall"
	"time"
)

// processCPU is the CPU time (user+system) this process has used, so the
// benchmark can report CPU per op independent of run-queue waits on a
// shared machine.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
