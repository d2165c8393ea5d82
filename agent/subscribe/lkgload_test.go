package subscribe

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/mcpready/mcpready/agent/internal/cptest"
	"github.com/mcpready/mcpready/artifact"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
)

// TestLoadNeverRewritesLKG: loading the last known good configuration
// installs it resource by resource, and must not write the file while it
// does (a crash part-way would leave only what was loaded so far), nor
// after, even when a stored resource no longer verifies (here: it expired
// since it was stored). The file is the same inode, byte for byte.
func TestLoadNeverRewritesLKG(t *testing.T) {
	env := cptest.Start(t)
	lkg := filepath.Join(t.TempDir(), "lkg.json")
	opts := Options{Root: env.RootPub, Node: &mcpreadyv1.Node{Id: "n"}, LKGPath: lkg}
	now := time.Now()
	c, _ := New(Options{Root: opts.Root, Node: opts.Node, LKGPath: lkg, Now: func() time.Time { return now }})
	if err := offer(c, artifact.KindTrustPolicy, "default", env.Sign(sample(artifact.KindTrustPolicy, "default", "1", "", time.Time{}))); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"a", "b", "c"} {
		exp := time.Time{}
		if n == "b" {
			exp = now.Add(time.Minute)
		}
		if err := offer(c, artifact.KindPolicy, n, env.Sign(sample(artifact.KindPolicy, n, "1", "", exp))); err != nil {
			t.Fatal(err)
		}
	}
	before, err := os.ReadFile(lkg)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(lkg)
	ino := st.Sys().(*syscall.Stat_t).Ino

	opts.Now = func() time.Time { return now.Add(time.Hour) } // b has expired
	c2, _ := New(opts)
	dropped, err := c2.Load()
	if err != nil || dropped != 1 || c2.Snapshot().Get(artifact.KindPolicy, "c") == nil {
		t.Fatalf("load: dropped %d, %v", dropped, err)
	}
	after, _ := os.ReadFile(lkg)
	st2, _ := os.Stat(lkg)
	if st2.Sys().(*syscall.Stat_t).Ino != ino || string(after) != string(before) {
		t.Fatal("Load rewrote the last known good file")
	}
}
