package writer_test

import (
	"context"
	"errors"
	"testing"

	"github.com/mcpready/mcpready/artifact"
	"github.com/mcpready/mcpready/controlplane/store"
	"github.com/mcpready/mcpready/controlplane/writer"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/internal/etcdtest"
	"github.com/mcpready/mcpready/internal/testpki"
	"github.com/mcpready/mcpready/sign"
)

func TestNewNeedsStoreAndRoot(t *testing.T) {
	if _, err := writer.New(writer.Options{}); !errors.Is(err, writer.ErrConfig) {
		t.Fatalf("empty options: %v", err)
	}
}

// TestErrorsCarrySentinelAndCause: a refused write answers errors.Is for
// the write path's sentinel and the verification cause alike.
func TestErrorsCarrySentinelAndCause(t *testing.T) {
	cli, _ := etcdtest.Etcd(t)
	st := store.New(cli, store.Options{})
	p := testpki.New(t)
	w, err := writer.New(writer.Options{Store: st, Root: p.Root.Public()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// Before any TrustPolicy, an org-signed one is refused: no trust yet,
	// and the cause is the unknown key.
	orgTrust := testpki.Sign(t, artifact.New(artifact.KindTrustPolicy, "x/trust", &mcpreadyv1.TrustPolicy{}), p.Org)
	_, _, err = w.Apply(ctx, orgTrust)
	if !errors.Is(err, writer.ErrNoTrustPolicy) || sign.ReasonOf(err) != sign.ReasonUnknownKey {
		t.Fatalf("bootstrap with a non-root TrustPolicy: %v (reason %q)", err, sign.ReasonOf(err))
	}
	if _, _, err := w.Apply(ctx, p.TrustPolicy); err != nil {
		t.Fatal(err)
	}
	if w.Current() == nil {
		t.Fatal("no active trust after applying the TrustPolicy")
	}
	// A tombstone whose name is not its target's.
	bad := testpki.Sign(t, testpki.Object(artifact.KindTombstone, "org/x", &mcpreadyv1.Tombstone{TargetKind: "Policy", TargetName: "org/p"}, nil), p.Org)
	if _, err := w.Delete(ctx, bad); !errors.Is(err, writer.ErrTombstone) {
		t.Fatalf("mismatched tombstone: %v", err)
	}
	// A Tombstone through Apply: wrong kind.
	if _, _, err := w.Apply(ctx, bad); !errors.Is(err, writer.ErrWrongKind) {
		t.Fatalf("tombstone applied: %v", err)
	}
	// Deleting what is not stored: the store's not-found.
	tomb := testpki.Sign(t, testpki.Object(artifact.KindTombstone, "org/p", &mcpreadyv1.Tombstone{TargetKind: "Policy", TargetName: "org/p"}, nil), p.Org)
	if _, err := w.Delete(ctx, tomb); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("tombstone of nothing: %v", err)
	}
	pol := testpki.Sign(t, testpki.Policy("org/p", "1", nil), p.Org)
	if _, _, err := w.Apply(ctx, pol); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Delete(ctx, tomb); !errors.Is(err, writer.ErrTombstone) || !errors.Is(err, artifact.ErrTombstone) {
		t.Fatalf("a tombstone naming no version: %v", err)
	}
	tomb = testpki.Tombstone(t, pol, "", p.Org)
	if _, err := w.Delete(ctx, tomb); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Delete(ctx, tomb); !errors.Is(err, writer.ErrDeleted) {
		t.Fatalf("second delete: %v", err)
	}
}
