package replaytest_test

import (
	"errors"
	"os"
	"strconv"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/mcpready/mcpready/agent/subscribe"
	"github.com/mcpready/mcpready/artifact"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/internal/testpki"
	"github.com/mcpready/mcpready/sign"
)

// tombstoneFor is a tombstone signed by the org key naming version and
// the digest of digestOf (the exact bundle it deletes, or another one).
func (e *env) tombstoneFor(k artifact.Kind, version string, digestOf []byte) []byte {
	e.t.Helper()
	ts := &mcpreadyv1.Tombstone{TargetKind: string(k), TargetName: nameOf(k), Reason: "retired", TargetVersion: version, TargetDigest: artifact.Digest(digestOf)}
	return testpki.Sign(e.t, testpki.Object(artifact.KindTombstone, nameOf(k), ts, nil), e.pki.Org)
}

// TestTombstoneReplayBothSides: a Policy at versions 1..4. Tombstones for
// each older version (exact version and digest), for version 4 with
// another version's digest, and one signed by a key not granted the Policy
// kind delete nothing: the control plane refuses each (tombstone,
// kind-not-allowed) and stores nothing; planted straight into etcd as
// deletions, the agent NACKs each and keeps version 4. An unsigned
// removal (a bare delta removal, a full set that omits the Policy, a
// deletion record whose tombstone is not signed) is refused too, and a
// TrustPolicy is not removed even with its exact tombstone. The exact
// tombstone for version 4 deletes it on both sides; replayed, it deletes
// nothing more, and version 4 and every older one stay refused, also after
// an agent restart.
func TestTombstoneReplayBothSides(t *testing.T) {
	for _, mode := range []subscribe.Mode{subscribe.ModeDelta, subscribe.ModeStateOfTheWorld} {
		t.Run(modeName[mode], func(t *testing.T) {
			t.Parallel()
			tombstoneReplay(t, mode)
		})
	}
}

func tombstoneReplay(t *testing.T, mode subscribe.Mode) {
	e := start(t)
	a := e.startAgentMode(t.TempDir(), mode)
	k, name := artifact.KindPolicy, nameOf(artifact.KindPolicy)
	vs := e.publish(k)
	latest := vs[versions-1]
	a.waitHeld(k, name, latest)
	type attack struct {
		label, reason string
		bundle        []byte
	}
	var attacks []attack
	for i, b := range vs[:versions-1] {
		attacks = append(attacks, attack{"tombstone for version " + strconv.Itoa(i+1), artifact.ReasonTombstone, e.tombstoneFor(k, strconv.Itoa(i+1), b)})
	}
	attacks = append(attacks,
		attack{"version 4, digest of version 3", artifact.ReasonTombstone, e.tombstoneFor(k, "4", vs[2])},
		attack{"signed by a key not granted Policy", string(sign.ReasonKindNotAllowed), testpki.Tombstone(t, latest, "", e.pki.Provider)})

	// the control plane
	rev := e.etcdRevision()
	for _, at := range attacks {
		if _, err := e.admin.Delete(ctx(t), &mcpreadyv1.DeleteRequest{Tombstone: at.bundle}); status.Code(err) == codes.OK || !says(err, at.reason) {
			t.Errorf("control plane, %s: %v, want refused %s", at.label, err, at.reason)
		}
	}
	if r := e.etcdRevision(); r != rev {
		t.Fatalf("refused tombstones wrote (etcd revision %d, was %d)", r, rev)
	}
	if got := e.counter("mcpready_controlplane_writes_refused_total", map[string]string{"op": "delete", "kind": "Tombstone"}); got != float64(len(attacks)) {
		t.Errorf("refused deletions counted: %v, want %d", got, len(attacks))
	}

	// the agent, each planted as a deletion by a hostile control plane
	relive := func() { // the Policy back in the store, so the next deletion is a removal again
		a.answered(k, "version 4 again", func() { e.plant(k, name, latest, false) })
	}
	unsigned := []byte(`{"mediaType":"application/vnd.dev.sigstore.bundle.v0.3+json"}`)
	for _, at := range append(attacks, attack{"an unsigned tombstone", "", unsigned}) {
		a.refuses(k, "agent, "+at.label, func() { e.plant(k, name, at.bundle, true) }, "Policy", strconv.Quote(name), "tombstone", at.reason)
		if _, b := a.held(k, name); string(b) != string(latest) {
			t.Fatalf("agent, %s: version 4 removed", at.label)
		}
		relive()
	}
	if got := a.counted(k, artifact.ReasonTombstone); got != float64(len(attacks)-1) {
		t.Errorf("the agent counted %v tombstone NACKs, want %d", got, len(attacks)-1)
	}
	// unsigned removals fed straight to the agent: no tombstone at all
	if err := a.c.Apply(k, nil, []string{name}, false); !errors.Is(err, subscribe.ErrUnsignedRemoval) {
		t.Errorf("a bare delta removal: %v", err)
	}
	if err := a.c.Apply(k, nil, nil, true); !errors.Is(err, subscribe.ErrUnsignedRemoval) {
		t.Errorf("a full set without the Policy: %v", err)
	}
	if _, b := a.held(k, name); string(b) != string(latest) {
		t.Fatal("an unsigned removal removed version 4")
	}

	// a TrustPolicy is never removed, not even with its exact tombstone
	tpTomb := testpki.Tombstone(t, e.pki.TrustPolicy, "retired", e.pki.Root)
	if _, err := e.admin.Delete(ctx(t), &mcpreadyv1.DeleteRequest{Tombstone: tpTomb}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("control plane, deleting the TrustPolicy: %v", err)
	}
	for _, b := range [][]byte{tpTomb, unsigned} {
		a.refuses(artifact.KindTrustPolicy, "agent, removing the TrustPolicy", func() { e.plant(artifact.KindTrustPolicy, "test/trust", b, true) }, "TrustPolicy")
		if _, held := a.held(artifact.KindTrustPolicy, ""); string(held) != string(e.pki.TrustPolicy) {
			t.Fatal("a removal took the agent's TrustPolicy")
		}
		a.answered(artifact.KindTrustPolicy, "the TrustPolicy again", func() { e.plant(artifact.KindTrustPolicy, "test/trust", e.pki.TrustPolicy, false) })
	}

	// the exact tombstone deletes; replayed, nothing more
	exact := testpki.Tombstone(t, latest, "retired", e.pki.Org)
	if _, err := e.admin.Delete(ctx(t), &mcpreadyv1.DeleteRequest{Tombstone: exact}); err != nil {
		t.Fatalf("the exact tombstone: %v", err)
	}
	a.wait("the deletion", func() bool { v, _ := a.held(k, name); return v == "<none>" })
	rev = e.etcdRevision()
	if _, err := e.admin.Delete(ctx(t), &mcpreadyv1.DeleteRequest{Tombstone: exact}); status.Code(err) != codes.NotFound {
		t.Errorf("the tombstone replayed: %v, want NotFound (already deleted)", err)
	}
	for i, b := range vs {
		if _, err := e.admin.Apply(ctx(t), &mcpreadyv1.ApplyRequest{Bundle: b}); status.Code(err) != codes.FailedPrecondition || !says(err, artifact.ReasonRollback) {
			t.Errorf("control plane, version %d after the deletion: %v, want rollback", i+1, err)
		}
	}
	if r := e.etcdRevision(); r != rev {
		t.Fatalf("refused writes after the deletion wrote (etcd revision %d, was %d)", r, rev)
	}
	// as held, after a restart, and after a restart without the marks file
	for round := range 3 {
		for i, b := range vs {
			a.refuses(k, "agent, version "+strconv.Itoa(i+1)+" after the deletion", func() { e.plant(k, name, b, false) }, "rollback", "Policy")
			if v, _ := a.held(k, name); v != "<none>" {
				t.Fatalf("round %d: the deleted Policy came back at version %q", round, v)
			}
		}
		a.stop()
		if round == 1 {
			if err := os.Remove(a.lkg + ".versions"); err != nil {
				t.Fatal(err)
			}
		}
		a = a.restart()
	}
}
