package config

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
)

// Linux capability numbers (capability.h).
const (
	capSetGID = 6
	capSetUID = 7
)

// checkRunAs refuses an incomplete RunAs, and one this process may not
// switch to: a user or group other than its own needs root's effective
// id or, on Linux, the effective capabilities CAP_SETUID and CAP_SETGID.
func (u Upstream) checkRunAs() error {
	r := u.RunAs
	if r == nil {
		return nil
	}
	if r.UID == nil || r.GID == nil {
		return errors.New("runAs needs both uid and gid")
	}
	if *r.UID == uint32(os.Geteuid()) && *r.GID == uint32(os.Getegid()) {
		return nil
	}
	if runtime.GOOS == "linux" {
		if caps, err := effectiveCaps(); err == nil {
			if caps&(1<<capSetUID) != 0 && caps&(1<<capSetGID) != 0 {
				return nil
			}
			return fmt.Errorf("%w: running as uid %d gid %d needs CAP_SETUID and CAP_SETGID, which the agent (uid %d) does not have",
				ErrRunAs, *r.UID, *r.GID, os.Geteuid())
		}
	}
	if os.Geteuid() == 0 {
		return nil
	}
	return fmt.Errorf("%w: running as uid %d gid %d needs the agent to run as root", ErrRunAs, *r.UID, *r.GID)
}

// effectiveCaps reads CapEff of this process from /proc/self/status.
func effectiveCaps() (uint64, error) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "CapEff:"); ok {
			return strconv.ParseUint(strings.TrimSpace(v), 16, 64)
		}
	}
	return 0, errors.New("no CapEff in /proc/self/status")
}
