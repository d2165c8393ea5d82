package resourcemeta

import (
	"net/http"
	"net/url"
	"slices"
	"testing"
)

func TestURLs(t *testing.T) {
	u, _ := url.Parse("https://mcp.example/tenant/mcp/")
	h := http.Header{"Www-Authenticate": {`Bearer resource_metadata="https://mcp.example/meta", scope="a"`, `Basic realm="x"`}}
	got := URLs(u, h)
	want := []string{"https://mcp.example/meta", "https://mcp.example/.well-known/oauth-protected-resource/tenant/mcp", "https://mcp.example/.well-known/oauth-protected-resource"}
	if !slices.Equal(got, want) {
		t.Fatalf("URLs = %q, want %q", got, want)
	}
	// RFC 9449 §7.1: a DPoP-bound resource challenges with scheme DPoP.
	dpop := http.Header{"Www-Authenticate": {`DPoP algs="ES256", resource_metadata="https://mcp.example/meta"`}}
	if got := URLs(u, dpop); !slices.Equal(got, want) {
		t.Fatalf("URLs of a DPoP challenge = %q, want %q", got, want)
	}
	root, _ := url.Parse("https://mcp.example")
	if got := URLs(root, http.Header{}); !slices.Equal(got, want[2:]) {
		t.Fatalf("root resource without a challenge = %q", got)
	}
}

func FuzzURLs(f *testing.F) {
	f.Add("https://mcp.example/mcp", `Bearer resource_metadata="https://x/y"`)
	f.Add("http://[::1]:8/", `Bearer ,,,"`)
	f.Fuzz(func(t *testing.T, resource, challenge string) {
		u, err := url.Parse(resource)
		if err != nil {
			return
		}
		out := URLs(u, http.Header{"Www-Authenticate": {challenge}})
		if len(out) == 0 {
			t.Fatal("no well-known location")
		}
	})
}
