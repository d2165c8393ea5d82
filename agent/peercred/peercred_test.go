package peercred

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcpready/mcpready/agent/config"
)

// serve runs an HTTP server on a real Unix-domain socket whose handler
// answers with the identity the request authenticates as.
func serve(t *testing.T, cfg *config.Config) *http.Client {
	t.Helper()
	path := filepath.Join(t.TempDir(), "agent.sock")
	l, err := Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	who := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, err := cfg.Authenticate(strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))
		if err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		_, _ = io.WriteString(w, id.Name+" "+id.PrincipalClass)
	})
	srv := &http.Server{Handler: Handler(cfg, who), ConnContext: ConnContext}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", path)
	}}}
}

func get(t *testing.T, c *http.Client, bearer string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", "http://agent/mcp", nil)
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b))
}

// TestPeerCredentialsMapToPrincipals: a process on the socket acts as the
// principal its uid maps to, whatever token it sends (before: local
// processes were who their token, or the default principal, said).
func TestPeerCredentialsMapToPrincipals(t *testing.T) {
	uid, gid := uint32(os.Getuid()), uint32(os.Getgid())
	other := uid + 1000
	cfg, err := config.New(config.File{
		Principals: []config.Principal{{Identity: config.Identity{Name: "admin-client", PrincipalClass: "admin"}, TokenSHA256: config.TokenDigest("admin-token")}},
		SocketPrincipals: []config.SocketPrincipal{
			{Identity: config.Identity{Name: "by-group", PrincipalClass: "group"}, GID: &gid},
			{Identity: config.Identity{Name: "me", PrincipalClass: "developer"}, UID: &uid},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	c := serve(t, cfg)
	if code, body := get(t, c, ""); code != 200 || body != "me developer" {
		t.Fatalf("peer: %d %q, want me developer (uid match first)", code, body)
	}
	if code, body := get(t, c, "admin-token"); code != 200 || body != "me developer" {
		t.Fatalf("peer with another principal's token: %d %q, want its own principal", code, body)
	}
	unmapped, err := config.New(config.File{SocketPrincipals: []config.SocketPrincipal{{Identity: config.Identity{Name: "x", PrincipalClass: "x"}, UID: &other}}})
	if err != nil {
		t.Fatal(err)
	}
	if code, _ := get(t, serve(t, unmapped), "admin-token"); code != http.StatusUnauthorized {
		t.Fatalf("unmapped peer: %d, want 401", code)
	}
}

func TestListenRefusesNonSocket(t *testing.T) {
	p := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(p, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Listen(p); err == nil {
		t.Fatal("listened over a regular file")
	}
}
