package subscribe

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/mcpready/mcpready/agent/internal/cptest"
	"github.com/mcpready/mcpready/artifact"
)

// TestDeletedVersionNeverReturns is the attack of a control plane that
// serves the exact bundle a signed tombstone deleted: the agent, which
// honoured the deletion, must refuse it as a rollback (before, the
// deleted bundle passed as "the held bundle again" and came back), also
// after a restart, also with the marks file deleted (before, a removed
// artifact's mark lived only there); an unsigned removal deletes and
// marks nothing, and a newer version is installed.
func TestDeletedVersionNeverReturns(t *testing.T) {
	env := cptest.Start(t)
	lkg := filepath.Join(t.TempDir(), "lkg.json")
	c := trustedClient(t, env, Options{LKGPath: lkg})
	deleted := map[artifact.Kind][]byte{}
	for _, k := range []artifact.Kind{artifact.KindPolicy, artifact.KindDeclaration} {
		v1 := env.Sign(sample(k, "org/p", "1", "", time.Time{}))
		deleted[k] = v1
		if err := offer(c, k, "org/p", v1); err != nil {
			t.Fatal(err)
		}
		if err := c.Apply(k, nil, []string{"org/p"}, false, tombRes(t, env, v1)); err != nil || heldVersion(c, k, "org/p") != "<none>" {
			t.Fatalf("%s: the exact tombstone: %v", k, err)
		}
		if err := offer(c, k, "org/p", v1); !errors.Is(err, artifact.ErrRollback) {
			t.Fatalf("%s: the deleted bundle again: %v, want rollback", k, err)
		}
	}
	// an unsigned removal of a Declaration is refused and marks nothing
	d2 := env.Sign(sample(artifact.KindDeclaration, "org/d", "2", "", time.Time{}))
	if err := offer(c, artifact.KindDeclaration, "org/d", d2); err != nil {
		t.Fatal(err)
	}
	if err := c.Apply(artifact.KindDeclaration, nil, []string{"org/d"}, false); !errors.Is(err, ErrUnsignedRemoval) || heldVersion(c, artifact.KindDeclaration, "org/d") != "2" {
		t.Fatalf("an unsigned removal: %v", err)
	}
	if err := offer(c, artifact.KindDeclaration, "org/d", d2); err != nil {
		t.Fatalf("after an unsigned removal, the same bundle: %v", err)
	}

	c2, _ := New(Options{Root: env.RootPub, Node: c.opts.Node, LKGPath: lkg})
	if _, err := c2.Load(); err != nil {
		t.Fatal(err)
	}
	if err := offer(c2, artifact.KindPolicy, "org/p", deleted[artifact.KindPolicy]); !errors.Is(err, artifact.ErrRollback) {
		t.Fatalf("after a restart, version 1 again: %v", err)
	}
	// the marks file deleted: the last known good file's copy of the marks
	// still knows the deletion, and the marks file is written again
	if err := os.Remove(lkg + ".versions"); err != nil {
		t.Fatal(err)
	}
	c3, _ := New(Options{Root: env.RootPub, Node: c.opts.Node, LKGPath: lkg})
	if _, err := c3.Load(); err != nil {
		t.Fatal(err)
	}
	if err := offer(c3, artifact.KindPolicy, "org/p", deleted[artifact.KindPolicy]); !errors.Is(err, artifact.ErrRollback) {
		t.Fatalf("without the marks file, the deleted bundle again: %v", err)
	}
	if _, err := os.Stat(lkg + ".versions"); err != nil {
		t.Fatalf("the marks file was not written again: %v", err)
	}
	if err := offer(c3, artifact.KindPolicy, "org/p", env.Sign(sample(artifact.KindPolicy, "org/p", "2", "", time.Time{}))); err != nil {
		t.Fatalf("a newer version after the deletion: %v", err)
	}
}
