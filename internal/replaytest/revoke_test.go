package replaytest_test

import (
	"crypto"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/mcpready/mcpready/artifact"
	"github.com/mcpready/mcpready/controlplane"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/internal/testpki"
	"github.com/mcpready/mcpready/sign"
)

// rotation is a root-signed TrustPolicy named name at version that
// supersedes e.head: testpki's grants with the org key revoked and org2
// granted what org was.
func (e *env) rotation(name, version string, org2 crypto.Signer) []byte {
	e.t.Helper()
	v, err := sign.Peek(e.pki.TrustPolicy)
	if err != nil {
		e.t.Fatal(err)
	}
	tp := proto.Clone(v.Spec).(*mcpreadyv1.TrustPolicy)
	tp.Provenance.Version, tp.Supersedes = version, testpki.RefOf(e.t, e.head)
	org := tp.Keys[0]
	org.Revoked, org.RevocationReason = true, "compromised"
	g := testpki.Grant(e.t, "org2", org2, org.GetKinds(), nil)
	g.EvidenceIssuer, g.Independence = org.GetEvidenceIssuer(), org.GetIndependence()
	tp.Keys = append(tp.Keys, g)
	return testpki.Sign(e.t, artifact.New(artifact.KindTrustPolicy, name, tp), e.pki.Root)
}

// TestNothingRevokedComesBack: the org key signs versions 1..3 of every
// distributed kind; a TrustPolicy rotation (version 2) revokes it and
// grants a new key, which signs version 4; a rotation to a new name
// (version 3) follows. Then every older TrustPolicy and everything the
// revoked key signed (each old version, and a newer one) is replayed: the
// control plane refuses each (rollback, key-revoked) and stores nothing;
// planted straight into etcd, the agent keeps its TrustPolicy and NACKs
// every bundle of the revoked key, before and after a restart.
func TestNothingRevokedComesBack(t *testing.T) {
	t.Parallel()
	e := start(t)
	a := e.startAgent(t.TempDir())
	kinds := distributed[1:]
	byOrg := map[artifact.Kind][][]byte{}
	for _, k := range kinds {
		for i := 1; i <= 3; i++ {
			b := e.version(k, strconv.Itoa(i), "", time.Time{})
			e.apply(b)
			byOrg[k] = append(byOrg[k], b)
		}
		a.waitHeld(k, nameOf(k), byOrg[k][2])
	}
	trusts := [][]byte{e.pki.TrustPolicy}
	org2, err := sign.GenerateKey(sign.AlgorithmECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	rot := e.rotation("test/trust", "2", org2)
	e.apply(rot)
	trusts = append(trusts, rot)
	a.waitHeld(artifact.KindTrustPolicy, "", rot)
	byOrg2 := map[artifact.Kind][]byte{}
	for _, k := range kinds {
		a.wait("the revoked key's "+string(k)+" dropped", func() bool { v, _ := a.held(k, nameOf(k)); return v == "<none>" })
		byOrg2[k] = e.versionBy(k, "4", "", time.Time{}, org2)
		e.apply(byOrg2[k])
		a.waitHeld(k, nameOf(k), byOrg2[k])
	}
	renamed := e.rotation("test/trust-2", "3", org2)
	e.apply(renamed)
	a.waitHeld(artifact.KindTrustPolicy, "", renamed)

	// every bundle of the revoked key, and a newer one it signs now
	revokedKey := map[artifact.Kind][][]byte{}
	for _, k := range kinds {
		revokedKey[k] = append(append([][]byte{}, byOrg[k]...), e.version(k, "9", "", time.Time{}))
	}
	tomb := testpki.Tombstone(t, byOrg2[artifact.KindPolicy], "revoked key deletes", e.pki.Org)

	// the control plane
	rev := e.etcdRevision()
	revokedBefore := e.counter("mcpready_controlplane_writes_refused_total", map[string]string{"reason": string(sign.ReasonKeyRevoked)})
	for i, b := range trusts {
		if _, err := e.admin.Apply(ctx(t), &mcpreadyv1.ApplyRequest{Bundle: b}); status.Code(err) != codes.FailedPrecondition || !says(err, artifact.ReasonRollback) {
			t.Errorf("control plane, TrustPolicy version %d: %v, want FailedPrecondition", i+1, err)
		}
	}
	n := 0
	for k, bs := range revokedKey {
		for _, b := range bs {
			n++
			if _, err := e.admin.Apply(ctx(t), &mcpreadyv1.ApplyRequest{Bundle: b}); status.Code(err) != codes.PermissionDenied || !says(err, string(sign.ReasonKeyRevoked)) {
				t.Errorf("control plane, %s signed by the revoked key: %v, want PermissionDenied key-revoked", k, err)
			}
		}
	}
	if _, err := e.admin.Delete(ctx(t), &mcpreadyv1.DeleteRequest{Tombstone: tomb}); status.Code(err) != codes.PermissionDenied || !says(err, string(sign.ReasonKeyRevoked)) {
		t.Errorf("control plane, a tombstone signed by the revoked key: %v", err)
	}
	n++
	if r := e.etcdRevision(); r != rev {
		t.Fatalf("refused writes of the revoked key wrote (etcd revision %d, was %d)", r, rev)
	}
	if got := e.counter("mcpready_controlplane_writes_refused_total", map[string]string{"reason": string(sign.ReasonKeyRevoked)}); got != revokedBefore+float64(n) {
		t.Errorf("key-revoked refusals counted: %v, want %v", got, revokedBefore+float64(n))
	}

	// the agent, fed by a hostile control plane; then after a restart the
	// oldest TrustPolicy and the oldest bundle of the revoked key per kind
	// (each other than what was planted last, so that it is pushed)
	for round := range 2 {
		if round == 1 {
			trusts = trusts[:1]
			for k, bs := range revokedKey {
				revokedKey[k] = bs[:1]
			}
		}
		for i, b := range trusts {
			// an older TrustPolicy under its own name loses to the held
			// chain head: no change, whatever the name
			a.answered(artifact.KindTrustPolicy, "older TrustPolicy", func() { e.plant(artifact.KindTrustPolicy, "test/trust", b, false) })
			if _, held := a.held(artifact.KindTrustPolicy, ""); string(held) != string(renamed) {
				t.Fatalf("round %d: TrustPolicy version %d replaced the held chain head", round, i+1)
			}
		}
		for k, bs := range revokedKey {
			for _, b := range bs {
				a.refuses(k, string(k)+" of the revoked key", func() { e.plant(k, nameOf(k), b, false) }, string(k), string(sign.ReasonKeyRevoked))
				if _, held := a.held(k, nameOf(k)); string(held) != string(byOrg2[k]) {
					t.Fatalf("round %d: %s signed by the revoked key replaced version 4", round, k)
				}
			}
		}
		for k, bs := range revokedKey {
			if got := a.counted(k, string(sign.ReasonKeyRevoked)); got < float64(len(bs)) {
				t.Errorf("round %d: the agent counted %v key-revoked NACKs of %s, want at least %d", round, got, k, len(bs))
			}
		}
		a = a.restart()
		if _, held := a.held(artifact.KindTrustPolicy, ""); string(held) != string(renamed) {
			t.Fatal("restart: the agent's TrustPolicy is not the chain head")
		}
	}
}

// says reports whether the gRPC status of err names reason.
func says(err error, reason string) bool {
	return err != nil && strings.Contains(status.Convert(err).Message(), reason)
}

// TestCompromisedEtcdIsDenialOnly: etcd, compromised, holds the
// TrustPolicy from before a revocation again. The control plane's write
// path compares what etcd holds with its high-water mark (kept in its
// data directory, outside etcd) and refuses every write until etcd holds
// the newest TrustPolicy again: a Policy the revoked key signs is refused
// (trust-rolled-back, counted, logged) and nothing is stored. Before, the
// control plane picked the older TrustPolicy from etcd and stored it. The
// agent, whose marks hold the chain head, refuses the older TrustPolicy
// and the revoked key's Policy (planted straight into etcd), and keeps the
// version it had.
func TestCompromisedEtcdIsDenialOnly(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	e := startWith(t, func(_ *env, o *controlplane.Options) { o.DataDir = data })
	a := e.startAgent(t.TempDir())
	k, name := artifact.KindPolicy, nameOf(artifact.KindPolicy)
	org2, err := sign.GenerateKey(sign.AlgorithmECDSAP256)
	if err != nil {
		t.Fatal(err)
	}
	rot := e.rotation("test/trust", "2", org2)
	e.apply(rot)
	good := e.versionBy(k, "1", "", time.Time{}, org2)
	e.apply(good)
	a.waitHeld(k, name, good)
	if _, err := os.Stat(filepath.Join(data, controlplane.TrustMarkFile)); err != nil {
		t.Fatalf("the control plane keeps no TrustPolicy high-water mark in its data directory: %v", err)
	}

	a.refuses(artifact.KindTrustPolicy, "the older TrustPolicy", func() { e.plant(artifact.KindTrustPolicy, "test/trust", e.pki.TrustPolicy, false) }, "rollback", "TrustPolicy")
	bad := e.version(k, "2", "", time.Time{}) // signed by the revoked org key
	rev := e.etcdRevision()
	refused := e.counter("mcpready_controlplane_writes_refused_total", map[string]string{"reason": "trust-rolled-back"})
	if _, err := e.admin.Apply(ctx(t), &mcpreadyv1.ApplyRequest{Bundle: bad}); status.Code(err) != codes.FailedPrecondition || !says(err, "older than the newest this replica accepted") {
		t.Fatalf("the control plane, etcd holding the older TrustPolicy: %v, want FailedPrecondition (trust rolled back)", err)
	}
	if r := e.etcdRevision(); r != rev {
		t.Fatalf("the refused write stored something (etcd revision %d, was %d)", r, rev)
	}
	if got := e.counter("mcpready_controlplane_writes_refused_total", map[string]string{"reason": "trust-rolled-back"}); got != refused+1 {
		t.Errorf("trust-rolled-back refusals counted: %v, want %v", got, refused+1)
	}
	if e.logged("write refused", map[string]string{"reason": "trust-rolled-back"}) == 0 {
		t.Error("the refusal is not logged")
	}

	e.plant(k, name, bad, false) // past the write path
	a.wait("the agent to refuse the revoked key's Policy", func() bool { return a.nacks("Policy", string(sign.ReasonKeyRevoked)) > 0 })
	if _, held := a.held(k, name); string(held) != string(good) {
		t.Fatal("the revoked key's Policy replaced the agent's")
	}
	if _, held := a.held(artifact.KindTrustPolicy, ""); string(held) != string(rot) {
		t.Fatal("the agent's TrustPolicy is not the chain head")
	}
}
