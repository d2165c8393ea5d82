package writer_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/mcpready/mcpready/artifact"
	"github.com/mcpready/mcpready/controlplane/store"
	"github.com/mcpready/mcpready/controlplane/writer"
	"github.com/mcpready/mcpready/internal/etcdtest"
	"github.com/mcpready/mcpready/internal/safebuf"
	"github.com/mcpready/mcpready/internal/testpki"
	"github.com/mcpready/mcpready/sign"
)

// plantOld writes bundle into the store as the latest revision of the
// TrustPolicy name, past the write path, as a compromised etcd can.
func plantOld(t *testing.T, st *store.Store, name string, bundle []byte) {
	t.Helper()
	ctx := context.Background()
	held := ""
	if r, err := st.Get(ctx, artifact.KindTrustPolicy, name); err == nil {
		held = r.HighWater
	}
	if _, _, err := st.Put(ctx, store.Record{Kind: artifact.KindTrustPolicy, Name: name, Bundle: bundle, Version: artifact.NextVersion(held)}); err != nil {
		t.Fatal(err)
	}
}

// TestCompromisedEtcdCannotRestoreRevokedKey is the attack of a
// compromised etcd: the TrustPolicy that revokes the org key (version 2)
// is replaced in etcd by version 1, which grants it, and then a Policy
// signed by the revoked key is written. The Writer's high-water mark,
// kept in a file outside etcd, refuses the older TrustPolicy: the write is
// refused (trust-rolled-back, logged and counted) and nothing is stored,
// also by a new Writer on the same mark file (a restarted replica), and
// also when etcd holds no TrustPolicy at all. Only the mark's successor
// is accepted. Before, the control plane picked version 1 from etcd and
// stored the revoked key's Policy.
func TestCompromisedEtcdCannotRestoreRevokedKey(t *testing.T) {
	cli, _ := etcdtest.Etcd(t)
	st := store.New(cli, store.Options{})
	p := testpki.New(t)
	markPath := filepath.Join(t.TempDir(), "trust-mark.json")
	logs := &safebuf.Buffer{}
	open := func(reg prometheus.Registerer) *writer.Writer {
		t.Helper()
		w, err := writer.New(writer.Options{Store: st, Root: p.Root.Public(), TrustMarkPath: markPath, Registerer: reg, Logger: slog.New(slog.NewTextHandler(logs, nil))})
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	reg := prometheus.NewRegistry()
	w := open(reg)
	ctx := context.Background()
	if _, _, err := w.Apply(ctx, p.TrustPolicy); err != nil {
		t.Fatal(err)
	}
	v2 := trustRevoking(t, p, "2", true)
	if _, _, err := w.Apply(ctx, v2); err != nil {
		t.Fatal(err)
	}
	revoked := testpki.Sign(t, testpki.Policy("org/p", "1", nil), p.Org)
	refused := func(w *writer.Writer, when string) {
		t.Helper()
		_, _, err := w.Apply(ctx, revoked)
		if !errors.Is(err, writer.ErrTrustRolledBack) {
			t.Fatalf("%s: the revoked key's Policy: %v, want %v", when, err, writer.ErrTrustRolledBack)
		}
		if _, err := st.Get(ctx, artifact.KindPolicy, "org/p"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("%s: the revoked key's Policy was stored: %v", when, err)
		}
		if w.Current() != nil {
			t.Fatalf("%s: the Writer reports an active trust below its mark: %v", when, w.Current().Ref())
		}
	}

	plantOld(t, st, "test/trust", p.TrustPolicy)
	refused(w, "etcd holds version 1 again")
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP mcpready_controlplane_writes_refused_total Writes (apply, delete) the write path refused, by operation, kind and reason (e.g. rollback, expired, key-revoked, tombstone).
# TYPE mcpready_controlplane_writes_refused_total counter
mcpready_controlplane_writes_refused_total{kind="Policy",op="apply",reason="trust-rolled-back"} 1
`), "mcpready_controlplane_writes_refused_total"); err != nil {
		t.Error(err)
	}
	if !strings.Contains(logs.String(), "trust-rolled-back") {
		t.Errorf("refusal not logged: %s", logs.String())
	}
	// a restarted replica: the mark is read from its file
	w = open(nil)
	refused(w, "after a restart")
	// etcd holding no TrustPolicy is no way around the mark
	if _, err := cli.Delete(ctx, "/mcpready/v1/", clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}
	refused(w, "etcd emptied")
	if _, _, err := w.Apply(ctx, p.TrustPolicy); !errors.Is(err, writer.ErrTrustRolledBack) && !errors.Is(err, artifact.ErrRollback) {
		t.Fatalf("version 1 applied below the mark: %v", err)
	}
	// the mark's own bundle restores it; the revoked key stays revoked
	if _, _, err := w.Apply(ctx, v2); err != nil {
		t.Fatalf("the mark's TrustPolicy applied again: %v", err)
	}
	if _, _, err := w.Apply(ctx, revoked); sign.ReasonOf(err) != sign.ReasonKeyRevoked {
		t.Fatalf("after the repair, the revoked key: %v", err)
	}
}

// TestTrustMarkFileMustRead: a mark file that does not parse fails New
// (the replica does not start without what it accepted).
func TestTrustMarkFileMustRead(t *testing.T) {
	cli, _ := etcdtest.Etcd(t)
	p := testpki.New(t)
	path := filepath.Join(t.TempDir(), "trust-mark.json")
	for _, content := range []string{"{", `{"format":1,"name":"x","version":"not a version","digest":"sha256:00"}`, `{"format":2}`} {
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := writer.New(writer.Options{Store: store.New(cli, store.Options{}), Root: p.Root.Public(), TrustMarkPath: path}); !errors.Is(err, writer.ErrConfig) {
			t.Errorf("mark %q: %v, want %v", content, err, writer.ErrConfig)
		}
	}
}
