// Package cprun runs a real control plane (controlplane.Server) for a
// test or benchmark: New with the caller's options, Run until the test
// ends (a Run error then fails it), and a wait for Ready. It only runs
// what it is given: it fills in no options. It is for tests only;
// shipped code must not import it.
package cprun

import (
	"context"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/mcpready/mcpready/controlplane"
)

// stopWait bounds how long a test waits for its control plane to stop.
const stopWait = time.Minute

// Start runs a control plane with o until t ends and returns it once it
// is ready (at most 30 s).
func Start(t testing.TB, o controlplane.Options) *controlplane.Server {
	t.Helper()
	s, err := controlplane.New(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("control plane: %v", err)
			}
		case <-time.After(stopWait):
			// A stop that hangs is a failure of its own; the goroutines say
			// where (the package's timeout would say it only after minutes,
			// for every test at once).
			var b strings.Builder
			_ = pprof.Lookup("goroutine").WriteTo(&b, 1)
			t.Errorf("control plane did not stop within %s; goroutines:\n%s", stopWait, b.String())
		}
	})
	select {
	case <-s.Ready():
	case err := <-done:
		t.Fatalf("control plane: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("control plane not ready")
	}
	return s
}
