package etcdembed

import (
	"errors"
	"net"
	"syscall"
	"testing"
)

// A port picked free can be taken before etcd binds it (by a parallel test,
// or as the ephemeral port of another connection). The start is then tried
// again on newly picked ports instead of failing with "address already in
// use", as it did in CI.
func TestStartRetriesAPickedPortTakenMeanwhile(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	picks := 0
	pickPort = func() (string, error) {
		picks++
		if picks == 1 {
			return taken.Addr().String(), nil // the client port: taken meanwhile
		}
		return freePort()
	}
	t.Cleanup(func() { pickPort = freePort })
	m, err := StartSingle(Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatalf("start with the first picked port taken: %v", err)
	}
	defer m.Close()
	if picks < 4 || m.ClientURL == "http://"+taken.Addr().String() {
		t.Fatalf("%d ports picked, client at %s (taken: %s)", picks, m.ClientURL, taken.Addr())
	}

	// A port the caller chose is not replaced by another.
	_, err = StartSingle(Options{Dir: t.TempDir(), ClientAddr: taken.Addr().String()})
	if !errors.Is(err, ErrStart) || !errors.Is(err, syscall.EADDRINUSE) {
		t.Fatalf("start on a chosen, taken port: %v", err)
	}
}
