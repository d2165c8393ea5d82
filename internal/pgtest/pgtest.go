// Package pgtest starts a real, throwaway PostgreSQL server for tests: it
// finds Debian's PostgreSQL binaries (installing the `postgresql` package
// with apt-get when they are missing and the process runs as root), runs
// initdb in a temporary directory, starts the server on a free loopback
// port and stops it when the test ends. Tests skip, saying why, only when
// PostgreSQL cannot be installed.
//
// It is for tests and benchmarks only: shipped code must not import it.
// It must not touch a cluster it did not create.
package pgtest

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// ErrUnavailable: PostgreSQL is not installed and could not be installed.
var ErrUnavailable = errors.New("postgresql unavailable")

// Server is one running throwaway cluster.
type Server struct {
	// DSN connects as the superuser to database "postgres" on loopback
	// (sslmode=disable; loopback only).
	DSN string
	// Port is the loopback TCP port.
	Port int
	// PID of the postmaster.
	PID int

	bin, dir string
	owner    *user.User // nil: runs as this process's user
}

var installOnce sync.Once
var installErr error

// Bin returns the directory holding initdb and postgres, installing
// Debian's postgresql package when it is missing and we are root.
func Bin() (string, error) {
	if d := findBin(); d != "" {
		return d, nil
	}
	installOnce.Do(func() {
		if os.Geteuid() != 0 {
			installErr = fmt.Errorf("%w: initdb not found and not root to apt-get install postgresql", ErrUnavailable)
			return
		}
		for _, args := range [][]string{{"update"}, {"install", "-y", "--no-install-recommends", "postgresql"}} {
			cmd := exec.Command("apt-get", args...)
			cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
			if out, err := cmd.CombinedOutput(); err != nil {
				installErr = fmt.Errorf("%w: apt-get %s: %v: %s", ErrUnavailable, args[0], err, lastLine(out))
				return
			}
		}
	})
	if installErr != nil {
		return "", installErr
	}
	if d := findBin(); d != "" {
		return d, nil
	}
	return "", fmt.Errorf("%w: postgresql installed but initdb not found", ErrUnavailable)
}

func lastLine(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return lines[len(lines)-1]
}

// findBin is the newest /usr/lib/postgresql/<version>/bin with initdb, or
// the directory of initdb on PATH.
func findBin() string {
	ds, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	sort.Slice(ds, func(i, j int) bool { return version(ds[i]) > version(ds[j]) })
	if len(ds) > 0 {
		return filepath.Dir(ds[0])
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			return filepath.Dir(r)
		}
	}
	return ""
}

func version(initdb string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(initdb))))
	return n
}

// Start starts a throwaway cluster, stopped and removed when t ends. It
// skips t when PostgreSQL cannot be installed and fails it on any other
// error.
func Start(t testing.TB) *Server {
	t.Helper()
	s, err := StartServer()
	if errors.Is(err, ErrUnavailable) {
		t.Skipf("skipping: needs a real PostgreSQL server: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s
}

// StartServer starts a throwaway cluster; the caller must Stop it.
func StartServer() (*Server, error) {
	bin, err := Bin()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "pgtest-")
	if err != nil {
		return nil, err
	}
	s := &Server{bin: bin, dir: dir}
	if os.Geteuid() == 0 {
		// initdb refuses to run as root: the cluster belongs to postgres.
		if s.owner, err = user.Lookup("postgres"); err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("%w: running as root needs the postgres user: %v", ErrUnavailable, err)
		}
		if err := chownAll(dir, s.owner); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	if err := s.start(); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

func chownAll(dir string, u *user.User) error {
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if err := os.Chmod(dir, 0o700); err != nil {
		return err
	}
	return os.Chown(dir, uid, gid)
}

// command runs a PostgreSQL binary as the cluster's owner.
func (s *Server) command(name string, args ...string) *exec.Cmd {
	path := filepath.Join(s.bin, name)
	if s.owner != nil {
		return exec.Command("runuser", append([]string{"-u", s.owner.Username, "--", path}, args...)...)
	}
	return exec.Command(path, args...)
}

func (s *Server) data() string { return filepath.Join(s.dir, "data") }

func (s *Server) start() error {
	if out, err := s.command("initdb", "-D", s.data(), "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync").CombinedOutput(); err != nil {
		return fmt.Errorf("pgtest: initdb: %v: %s", err, lastLine(out))
	}
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		if s.Port, err = freePort(); err != nil {
			return err
		}
		if err = s.Restart(); err == nil {
			s.DSN = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", s.Port)
			b, _ := os.ReadFile(filepath.Join(s.data(), "postmaster.pid"))
			s.PID, _ = strconv.Atoi(strings.SplitN(string(b), "\n", 2)[0])
			return nil
		}
		time.Sleep(100 * time.Millisecond) // the port may have been taken meanwhile
	}
	return err
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Stop stops the server (immediately) and removes its directory.
func (s *Server) Stop() {
	if s.DSN != "" {
		s.command("pg_ctl", "-D", s.data(), "-m", "immediate", "-w", "stop").Run()
		s.DSN = ""
	}
	os.RemoveAll(s.dir)
}

// Kill stops the server at once, as a crash would (immediate mode: no
// checkpoint, recovery on the next start); Restart brings it back.
func (s *Server) Kill() error {
	if out, err := s.command("pg_ctl", "-D", s.data(), "-m", "immediate", "-w", "stop").CombinedOutput(); err != nil {
		return fmt.Errorf("pgtest: pg_ctl stop: %v: %s", err, lastLine(out))
	}
	return nil
}

// Restart starts the (stopped) server on its port with its data.
func (s *Server) Restart() error {
	opts := fmt.Sprintf("-c listen_addresses=127.0.0.1 -c port=%d -c unix_socket_directories=%s -c max_connections=200", s.Port, s.dir)
	out, err := s.command("pg_ctl", "-D", s.data(), "-l", filepath.Join(s.dir, "log"), "-o", opts, "-w", "-t", "60", "start").CombinedOutput()
	if err != nil {
		log, _ := os.ReadFile(filepath.Join(s.dir, "log"))
		return fmt.Errorf("pgtest: pg_ctl start: %v: %s %s", err, lastLine(out), lastLine(log))
	}
	return nil
}

// CPUTime is the CPU time (user + system) the server has used so far: the
// postmaster's own and its reaped children's, plus every live backend's,
// from /proc (Linux). Benchmarks report it apart from their own process's.
func (s *Server) CPUTime() time.Duration {
	var ticks uint64
	ds, _ := os.ReadDir("/proc")
	for _, d := range ds {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", d.Name(), "stat"))
		if err != nil {
			continue
		}
		// Fields after the command name (which may hold spaces) start at
		// state (3); ppid is 4, utime 14, stime 15, cutime 16, cstime 17.
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 15 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		n := func(k int) uint64 { v, _ := strconv.ParseUint(f[k-3], 10, 64); return v }
		switch {
		case pid == s.PID:
			ticks += n(14) + n(15) + n(16) + n(17)
		case ppid == s.PID:
			ticks += n(14) + n(15)
		}
	}
	return time.Duration(ticks) * time.Second / 100 // USER_HZ
}
