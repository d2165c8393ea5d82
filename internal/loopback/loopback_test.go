package loopback_test

import (
	"net/url"
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

func TestConfidential(t *testing.T) {
	for raw, want := range map[string]bool{
		"https://mcp.example.com/mcp": true, "http://127.0.0.1:8080/mcp": true, "http://[::1]/mcp": true, "http://localhost:1/": true,
		"http://mcp.example.com/mcp": false, "http://10.0.0.7/mcp": false, "http://127.0.0.1.example.com/": false,
		"ws://127.0.0.1/": false, "HTTP://mcp.example.com/": false,
	} {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		if got := loopback.Confidential(u); got != want {
			t.Errorf("%q: %v, want %v", raw, got, want)
		}
	}
}
