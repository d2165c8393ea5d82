package loopback_test

import (
	"testing"

	"github.com/mcpready/mcpready/internal/loopback"
)

func TestIs(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:7443": true, "127.9.9.9:1": true, "[::1]:80": true, "localhost:0": true,
		"0.0.0.0:7443": false, "10.0.0.7:1": false, "example.com:443": false, "localhost.example:1": false,
		"127.0.0.1": false, "dns:///cp:7443": false, "": false,
	} {
		if got := loopback.Is(addr); got != want {
			t.Errorf("%q: %v, want %v", addr, got, want)
		}
	}
}
