package writer_test

import (
	"context"
	"errors"
	"testing"

	"github.com/mcpready/mcpready/artifact"
	"github.com/mcpready/mcpready/controlplane/writer"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/internal/testpki"
)

// tombstoneFor is a tombstone for Policy org/p naming version and the
// digest of bundle.
func tombstoneFor(t *testing.T, p *testpki.PKI, version string, bundle []byte, reason string) []byte {
	t.Helper()
	ts := &mcpreadyv1.Tombstone{TargetKind: "Policy", TargetName: "org/p", Reason: reason, TargetVersion: version}
	if bundle != nil {
		ts.TargetDigest = artifact.Digest(bundle)
	}
	return testpki.Sign(t, testpki.Object(artifact.KindTombstone, "org/p", ts, nil), p.Org)
}

// TestTombstoneReplay is the attack: a tombstone that deleted version 1
// is sent again after version 2 was applied. It must delete nothing, as
// must tombstones naming another version or digest, or none.
func TestTombstoneReplay(t *testing.T) {
	w, st, p := newWriter(t)
	ctx := context.Background()
	v1 := testpki.Sign(t, testpki.Policy("org/p", "1", nil), p.Org)
	v2 := testpki.Sign(t, testpki.Policy("org/p", "2", nil), p.Org)
	if _, _, err := w.Apply(ctx, v1); err != nil {
		t.Fatal(err)
	}
	t1 := tombstoneFor(t, p, "1", v1, "retired")
	if _, err := w.Delete(ctx, t1); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Delete(ctx, t1); !errors.Is(err, writer.ErrDeleted) {
		t.Fatalf("the same tombstone again: %v", err)
	}
	if _, _, err := w.Apply(ctx, v2); err != nil {
		t.Fatal(err)
	}
	for label, b := range map[string][]byte{
		"replayed":             t1,
		"names no version":     tombstoneFor(t, p, "", nil, "x"),
		"another version":      tombstoneFor(t, p, "1", v2, "x"),
		"another digest":       tombstoneFor(t, p, "2", v1, "x"),
		"a version, no digest": tombstoneFor(t, p, "2", nil, "x"),
	} {
		if _, err := w.Delete(ctx, b); !errors.Is(err, writer.ErrTombstone) {
			t.Errorf("%s: err = %v, want %v", label, err, writer.ErrTombstone)
		}
	}
	if r, err := st.Get(ctx, artifact.KindPolicy, "org/p"); err != nil || r.Deleted {
		t.Fatalf("version 2 deleted by a replayed or inexact tombstone: %v, %v", r.Deleted, err)
	}
	if _, err := w.Delete(ctx, tombstoneFor(t, p, "2", v2, "retired")); err != nil {
		t.Fatalf("the exact tombstone for version 2: %v", err)
	}
}
