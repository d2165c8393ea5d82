package agent

import (
	"crypto/ed25519"
	"net/http"
	"path/filepath"
	"testing"
)

// A web page that rebinds its own name to 127.0.0.1 reads what the
// loopback listener serves as same-origin. /mcp and /workflows/report
// refused a non-loopback Host; /metrics (the servers and tools in use,
// drift, refusals) and /healthz answered it. Now every path does.
func TestRebindingRefusedOnEveryPath(t *testing.T) {
	dir := t.TempDir()
	a, stop := start(t, Options{Root: ed25519.PublicKey(make([]byte, ed25519.PublicKeySize)), NodeID: "host-rebind", Listen: "127.0.0.1:0", DataDir: filepath.Join(dir, "data")})
	defer stop()
	get := func(path, host string) int {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, "http://"+a.Addr()+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if host != "" {
			req.Host = host
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, path := range []string{"/metrics", "/healthz"} {
		if code := get(path, "evil.example:80"); code != http.StatusForbidden {
			t.Errorf("%s with a foreign Host: HTTP %d, want 403", path, code)
		}
		if code := get(path, ""); code != http.StatusOK {
			t.Errorf("%s from a local client: HTTP %d", path, code)
		}
	}
}
