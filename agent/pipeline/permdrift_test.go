package pipeline

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpready/mcpready/agent/access"
	"github.com/mcpready/mcpready/agent/config"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/internal/oauthtest"
)

// PERMISSION_DRIFT reports are sent once per entry and granted scope set
// and rate-limited across entries (a burst of driftBurst): eight entries
// whose qualified authority the held token exceeds, each seen twice,
// produce driftBurst reports, each for a distinct entry, each naming the
// scope beyond the qualified set. A token within the qualified set is not
// reported.
func TestPermissionDriftReportsLimited(t *testing.T) {
	as := oauthtest.Start(t, oauthtest.Options{Clients: []oauthtest.Client{{ID: "agent", Secret: "s"}}})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String() + "/mcp"
	hs := &httptest.Server{Listener: ln, Config: &http.Server{Handler: as.Protect(oauthtest.Resource{URL: url}, http.NotFoundHandler())}}
	hs.Start()
	t.Cleanup(hs.Close)
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("s"), 0o600); err != nil {
		t.Fatal(err)
	}
	up := &access.Upstream{Name: "sec", URL: url, OAuth: config.OAuth{Grant: config.GrantClientCredentials, ClientID: "agent", ClientSecretFile: secret, Scopes: []string{"admin", "read"}}}
	c := access.New(access.Options{})
	if _, err := c.Token(context.Background(), access.Principal{}, up); err != nil {
		t.Fatal(err)
	}
	entries := map[string]*mcpreadyv1.RegistryEntry{}
	for i := range 8 {
		e := entry("sec", url)
		e.Authority = &mcpreadyv1.Authority{Scopes: []string{"read"}}
		entries[fmt.Sprint("e", i)] = e
	}
	within := entry("sec", url)
	within.Authority = &mcpreadyv1.Authority{Scopes: []string{"admin", "read"}}
	entries["within"] = within
	pl, st, _ := setup(t, policy(), entries)
	var mu sync.Mutex
	got := map[string]int{}
	done := make(chan struct{}, 16)
	pl.opts.Access, pl.opts.AccessUpstream = c, func(string) (*access.Upstream, bool) { return up, true }
	pl.opts.ReportDrift = func(_ context.Context, req *mcpreadyv1.ReportDriftRequest) error {
		mu.Lock()
		got[req.GetEntryName()]++
		mu.Unlock()
		if want := "the upstream token grants scopes beyond the qualified permission set: admin"; !strings.HasSuffix(req.GetDetail(), want) {
			t.Errorf("%s reported %q", req.GetEntryName(), req.GetDetail())
		}
		done <- struct{}{}
		return nil
	}
	now := time.Now()
	pl.reportPermissionDrift(&st, Caller{Name: "c"}, "within", "sec", now)
	for range 2 {
		for i := range 8 {
			pl.reportPermissionDrift(&st, Caller{Name: "c"}, fmt.Sprint("e", i), "sec", now)
		}
	}
	for range driftBurst {
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("reports missing")
		}
	}
	time.Sleep(100 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	if len(got) != driftBurst || got["within"] != 0 {
		t.Fatalf("reports %v: want %d entries, none for a token within the qualified set", got, driftBurst)
	}
	for e, n := range got {
		if n != 1 {
			t.Fatalf("%s reported %d times", e, n)
		}
	}
}
