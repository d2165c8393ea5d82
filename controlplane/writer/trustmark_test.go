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

// TestSeededReplicaRefusesOlderEtcd is the attack on a replica that starts
// without a mark (a new replica, or its data directory lost): etcd,
// restored from an old backup or tampered with, holds TrustPolicy version
// 1, which grants the org key that version 2 revoked. Seeded with version
// 2 (Options.TrustSeed, the operator's copy of the chain head), the new
// replica writes that mark before reading etcd and refuses the revoked
// key's Policy as a rollback; applying version 2 repairs etcd, and the key
// stays revoked. Unseeded, it would have taken version 1 from etcd.
func TestSeededReplicaRefusesOlderEtcd(t *testing.T) {
	cli, _ := etcdtest.Etcd(t)
	st := store.New(cli, store.Options{})
	p := testpki.New(t)
	ctx := context.Background()
	plantOld(t, st, "test/trust", p.TrustPolicy) // etcd holds version 1 only
	v2 := trustRevoking(t, p, "2", true)
	markPath := filepath.Join(t.TempDir(), "trust-mark.json")
	w, err := writer.New(writer.Options{Store: st, Root: p.Root.Public(), TrustMarkPath: markPath, TrustSeed: v2})
	if err != nil {
		t.Fatal(err)
	}
	mark, err := os.ReadFile(markPath)
	if err != nil || !strings.Contains(string(mark), testpki.RefOf(t, v2).GetDigest()) || !strings.Contains(string(mark), `"version":"2"`) {
		t.Fatalf("the seed was not written as the mark before use: %s, %v", mark, err)
	}
	revoked := testpki.Sign(t, testpki.Policy("org/p", "1", nil), p.Org)
	if _, _, err := w.Apply(ctx, revoked); !errors.Is(err, writer.ErrTrustRolledBack) {
		t.Fatalf("the revoked key's Policy on a seeded replica over an older etcd: %v, want %v", err, writer.ErrTrustRolledBack)
	}
	if _, err := st.Get(ctx, artifact.KindPolicy, "org/p"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the revoked key's Policy was stored: %v", err)
	}
	if _, _, err := w.Apply(ctx, v2); err != nil {
		t.Fatalf("the seed's own TrustPolicy: %v", err)
	}
	if _, _, err := w.Apply(ctx, revoked); sign.ReasonOf(err) != sign.ReasonKeyRevoked {
		t.Fatalf("after the repair, the revoked key: %v", err)
	}
}

// TestTrustSeedChecked: a seed that is not a root-signed TrustPolicy, or
// that forks from the mark, fails New (the replica does not start); a seed
// older than the mark leaves the mark as it is.
func TestTrustSeedChecked(t *testing.T) {
	cli, _ := etcdtest.Etcd(t)
	st := store.New(cli, store.Options{})
	p := testpki.New(t)
	markPath := filepath.Join(t.TempDir(), "trust-mark.json")
	open := func(seed []byte) error {
		_, err := writer.New(writer.Options{Store: st, Root: p.Root.Public(), TrustMarkPath: markPath, TrustSeed: seed})
		return err
	}
	v, err := sign.Peek(p.TrustPolicy)
	if err != nil {
		t.Fatal(err)
	}
	for name, seed := range map[string][]byte{
		"signed by the org key": testpki.Sign(t, artifact.New(artifact.KindTrustPolicy, "test/trust", v.Spec), p.Org),
		"a Policy":              testpki.Sign(t, testpki.Policy("org/p", "1", nil), p.Root),
		"not a bundle":          []byte("{"),
	} {
		if err := open(seed); !errors.Is(err, writer.ErrConfig) {
			t.Errorf("seed %s: %v, want %v", name, err, writer.ErrConfig)
		}
		if _, err := os.Stat(markPath); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("seed %s: a mark was written", name)
		}
	}
	v2 := trustRevoking(t, p, "2", true)
	if err := open(v2); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(markPath)
	if err := open(p.TrustPolicy); err != nil { // version 1: older than the mark
		t.Fatalf("an older seed: %v", err)
	}
	if after, _ := os.ReadFile(markPath); string(after) != string(before) {
		t.Fatalf("an older seed changed the mark: %s -> %s", before, after)
	}
	if err := open(trustRevoking(t, p, "2", false)); !errors.Is(err, writer.ErrConfig) || !strings.Contains(err.Error(), "forks") {
		t.Fatalf("a seed at the mark's version with another bundle: %v", err)
	}
}
