package subscribe

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/mcpready/mcpready/agent/internal/cptest"
	"github.com/mcpready/mcpready/artifact"
	"github.com/mcpready/mcpready/controlplane/store"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/internal/testpki"
)

// TestExpiredDeclarationKeepsEntriesWithheld is the attack on a server's
// Declaration that expired: a control plane gets its registry entries used
// without it, on both Discovery variants and across an agent restart. The
// state-of-the-world set re-offers the expired Declaration (left out), the
// incremental stream removes it without a valid tombstone, and a restart
// loads the last known good file, whose expired Declaration no longer
// installs. Each time the server's entries stay withheld (the
// Declaration's high-water mark is not deleted), until a newer signed
// Declaration arrives or a signed tombstone removes it. Before, each
// made them usable as entries of a server without a Declaration.
func TestExpiredDeclarationKeepsEntriesWithheld(t *testing.T) {
	for _, mode := range []Mode{ModeDelta, ModeStateOfTheWorld} {
		t.Run([]string{"delta", "sotw"}[mode], func(t *testing.T) {
			env := cptest.Start(t)
			t0 := time.Now().Truncate(time.Second)
			clk := &clock{now: t0}
			lkg := filepath.Join(t.TempDir(), "lkg.json")
			entry := func(name, server string) *artifact.Object {
				return artifact.New(artifact.KindRegistryEntry, name, &mcpreadyv1.RegistryEntry{Identity: &mcpreadyv1.ToolIdentity{ServerName: server, ToolName: name}})
			}
			env.Put(sample(artifact.KindDeclaration, "srv", "", "", t0.Add(time.Hour)))
			env.Put(entry("srv/tool", "srv"))
			env.Put(entry("other/tool", "other"))
			start := func() (*Client, func()) {
				t.Helper()
				c, err := New(Options{Conn: env.Dial(), Root: env.RootPub, Node: &mcpreadyv1.Node{Id: "host-1"}, Mode: mode, LKGPath: lkg,
					MinBackoff: 20 * time.Millisecond, Now: clk.Now, Until: clk.Until})
				if err != nil {
					t.Fatal(err)
				}
				if _, err := c.Load(); err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan struct{})
				go func() { _ = c.Run(ctx); close(done) }()
				stop := func() { cancel(); <-done }
				t.Cleanup(stop)
				return c, stop
			}
			used := func(s *Snapshot, k artifact.Kind, name string) bool { return s.Get(k, name) != nil }
			withheld := func(c *Client, when string) {
				t.Helper()
				s := c.Snapshot()
				if used(s, artifact.KindRegistryEntry, "srv/tool") || s.Withheld(artifact.KindRegistryEntry, "srv/tool") == "" || !used(s, artifact.KindRegistryEntry, "other/tool") {
					t.Fatalf("%s: srv/tool used %v (withheld: %q), other/tool used %v", when, used(s, artifact.KindRegistryEntry, "srv/tool"),
						s.Withheld(artifact.KindRegistryEntry, "srv/tool"), used(s, artifact.KindRegistryEntry, "other/tool"))
				}
			}
			c, stop := start()
			waitFor(t, c, "everything installed", func(s *Snapshot) bool {
				return used(s, artifact.KindDeclaration, "srv") && len(s.List(artifact.KindRegistryEntry)) == 2
			})
			clk.Advance(t0.Add(time.Hour))
			waitFor(t, c, "the expired declaration's entries withheld", func(s *Snapshot) bool { return !used(s, artifact.KindRegistryEntry, "srv/tool") })

			// The control plane drops the expired Declaration: the
			// state-of-the-world set re-offers it expired, the incremental
			// stream removes it with a tombstone for no version. Another
			// server's Declaration arrives with it (or after it).
			if mode == ModeDelta {
				forged := testpki.Sign(t, testpki.Object(artifact.KindTombstone, "srv", &mcpreadyv1.Tombstone{TargetKind: "Declaration", TargetName: "srv"}, nil), env.Root)
				if _, _, err := env.Store.Put(context.Background(), store.Record{Kind: artifact.KindDeclaration, Name: "srv", Bundle: forged, Deleted: true}); err != nil {
					t.Fatal(err)
				}
			}
			env.Put(sample(artifact.KindDeclaration, "other", "", "", time.Time{}))
			waitFor(t, c, "the other declaration", func(s *Snapshot) bool { return used(s, artifact.KindDeclaration, "other") })
			withheld(c, "after the control plane dropped the declaration")

			// Restart: the expired Declaration does not load again.
			stop()
			c, stop = start()
			if used(c.Snapshot(), artifact.KindDeclaration, "srv") {
				t.Fatal("the expired declaration is used after a restart")
			}
			withheld(c, "after a restart")
			env.Put(entry("other/tool2", "other"))
			waitFor(t, c, "an update after the restart", func(s *Snapshot) bool { return used(s, artifact.KindRegistryEntry, "other/tool2") })
			withheld(c, "connected after a restart")

			// A newer signed Declaration brings the entries back, and its
			// signed tombstone removes it: then they are used without one.
			renewed := env.Put(sample(artifact.KindDeclaration, "srv", "", "", t0.Add(10*time.Hour)))
			waitFor(t, c, "renewed", func(s *Snapshot) bool { return used(s, artifact.KindRegistryEntry, "srv/tool") })
			adm := mcpreadyv1.NewAdminServiceClient(env.Dial())
			if _, err := adm.Delete(context.Background(), &mcpreadyv1.DeleteRequest{Tombstone: testpki.Tombstone(t, renewed, "retired", env.Root)}); err != nil {
				t.Fatal(err)
			}
			waitFor(t, c, "the signed removal", func(s *Snapshot) bool {
				return s.Versions(artifact.KindDeclaration)["srv"] == "" && used(s, artifact.KindRegistryEntry, "srv/tool")
			})
		})
	}
}
