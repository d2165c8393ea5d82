package replaytest_test

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/mcpready/mcpready/agent/subscribe"
	"github.com/mcpready/mcpready/artifact"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/sign"
)

// versions is how many versions of each artifact the suite publishes
// before it replays the older ones.
const versions = 4

// distributed are the kinds agents receive over Discovery. The other
// kinds are covered by their own tests (coveredElsewhere).
var distributed = []artifact.Kind{artifact.KindTrustPolicy, artifact.KindDeclaration, artifact.KindRegistryEntry, artifact.KindPolicy, artifact.KindEvidence}

// coveredElsewhere names, per kind that is not distributed, the test
// that replays it.
var coveredElsewhere = map[artifact.Kind]string{
	artifact.KindTombstone:   "TestTombstoneReplayBothSides",
	artifact.KindDriftReport: "TestDriftReportReplay",
	// A receipt batch is not versioned: its replay is a chain break that
	// ingest refuses (fork, gap) or acknowledges as a duplicate stored once
	// (controlplane/ingest TestRejectsBadBatches).
	artifact.KindReceiptBatch: "controlplane/ingest TestRejectsBadBatches",
}

// TestEveryKindIsReplayed fails when a kind is added that this suite
// does not replay.
func TestEveryKindIsReplayed(t *testing.T) {
	for _, k := range artifact.Kinds() {
		if _, ok := coveredElsewhere[k]; !ok && !contains(distributed, k) {
			t.Errorf("kind %s is replayed by no test of the adversarial suite", k)
		}
	}
}

func contains(ks []artifact.Kind, k artifact.Kind) bool {
	for _, x := range ks {
		if x == k {
			return true
		}
	}
	return false
}

// replay is one replayed bundle and what its refusal must say.
type replay struct {
	label  string
	bundle []byte
	reason string // artifact.ReasonRollback, artifact.ReasonExpired (sign.ReasonKeyExpired for a TrustPolicy)
	words  []string
}

// replays are the attacks on an artifact of kind k held at versions
// (vs[i] is version i+1): every older version, the held version with
// other content, an unversioned one and a newer but expired one.
func (e *env) replays(k artifact.Kind, vs [][]byte) []replay {
	name := nameOf(k)
	rollback := func(v string) []string {
		return []string{fmt.Sprintf("%s: %s %q: version %q is not newer", artifact.ReasonRollback, k, name, v)}
	}
	var out []replay
	for i, b := range vs[:len(vs)-1] {
		v := strconv.Itoa(i + 1)
		out = append(out, replay{"version " + v, b, artifact.ReasonRollback, rollback(v)})
	}
	held := strconv.Itoa(len(vs))
	out = append(out,
		replay{"version " + held + ", other content", e.version(k, held, "other", time.Time{}), artifact.ReasonRollback, rollback(held)},
		replay{"unversioned", e.version(k, "", "", time.Time{}), artifact.ReasonRollback, rollback("")})
	expired := replay{"newer, expired", e.version(k, "9", "", time.Now().Add(-time.Minute)), artifact.ReasonExpired,
		[]string{fmt.Sprintf("%s: %s %q (version %q) expired", artifact.ReasonExpired, k, name, "9")}}
	if k == artifact.KindTrustPolicy { // an expired TrustPolicy fails verification itself
		expired.reason, expired.words = string(sign.ReasonKeyExpired), []string{"TrustPolicy", string(sign.ReasonKeyExpired)}
	}
	return append(out, expired)
}

// TestReplayEveryKindBothSides publishes versions 1..4 of each
// distributed kind through Admin while a real agent follows, then
// replays every older version, the held version with other content, an
// unversioned and an expired one: (a) the control plane refuses each with
// its reason and stores nothing; (b) planted straight into etcd, each
// reaches the agent, which NACKs it with its reason and keeps version 4;
// (c) every older version again after a restart, after the high-water
// marks file is deleted, and after the last-known-good file is rewritten
// with the signed set it held at version 2.
func TestReplayEveryKindBothSides(t *testing.T) {
	for _, mode := range []subscribe.Mode{subscribe.ModeDelta, subscribe.ModeStateOfTheWorld} {
		for _, k := range distributed {
			t.Run(modeName[mode]+"/"+string(k), func(t *testing.T) {
				t.Parallel() // each on its own control plane, etcd and agent
				replayKind(t, k, mode)
			})
		}
	}
}

var modeName = map[subscribe.Mode]string{subscribe.ModeDelta: "delta", subscribe.ModeStateOfTheWorld: "sotw"}

func replayKind(t *testing.T, k artifact.Kind, mode subscribe.Mode) {
	e := start(t)
	a := e.startAgentMode(t.TempDir(), mode)
	name := nameOf(k)
	a.waitHeld(artifact.KindTrustPolicy, nameOf(artifact.KindTrustPolicy), e.pki.TrustPolicy)
	var vs [][]byte
	var lkgAt2 []byte
	for i := 1; i <= versions; i++ {
		b := e.pki.TrustPolicy
		if k != artifact.KindTrustPolicy || i > 1 {
			b = e.version(k, strconv.Itoa(i), "", time.Time{})
			e.apply(b)
		}
		a.waitHeld(k, name, b)
		vs = append(vs, b)
		if i == 2 {
			a.wait("the last-known-good file at version 2", func() bool { return a.lkgHolds(b) })
			var err error
			if lkgAt2, err = os.ReadFile(a.lkg); err != nil {
				t.Fatal(err)
			}
		}
	}
	latest := vs[versions-1]
	attacks := e.replays(k, vs)

	// (a) the control plane
	hist, rev := e.history(k, name), e.etcdRevision()
	counted := map[string]float64{}
	for _, r := range attacks {
		counted[r.reason] = e.counter("mcpready_controlplane_writes_refused_total", map[string]string{"kind": string(k), "reason": r.reason})
	}
	for _, r := range attacks {
		_, err := e.admin.Apply(ctx(t), &mcpreadyv1.ApplyRequest{Bundle: r.bundle})
		code := status.Code(err)
		if !strings.Contains(status.Convert(err).Message(), r.reason) || (code != codes.FailedPrecondition && !(k == artifact.KindTrustPolicy && code == codes.PermissionDenied)) {
			t.Errorf("control plane, %s: %v, want FailedPrecondition %s", r.label, err, r.reason)
		}
	}
	if h, rv := e.history(k, name), e.etcdRevision(); h != hist || rv != rev {
		t.Fatalf("refused replays wrote: %d revisions (was %d), etcd revision %d (was %d)", h, hist, rv, rev)
	}
	for _, r := range attacks {
		counted[r.reason]--
	}
	for reason, n := range counted {
		if got := e.counter("mcpready_controlplane_writes_refused_total", map[string]string{"kind": string(k), "reason": reason}); got != -n {
			t.Errorf("refused writes counted with reason %s: %v, want %v", reason, got, -n)
		}
		if got := e.logged("write refused", map[string]string{"kind": string(k), "reason": reason}); float64(got) != -n {
			t.Errorf("refused writes logged with reason %s: %d, want %v", reason, got, -n)
		}
	}

	// (b) a hostile control plane serves each replay to the agent
	nacked := e.counter("mcpready_discovery_acks_total", map[string]string{"type_url": k.TypeURL(), "result": "nack"})
	for _, r := range attacks {
		a.refuses(k, "agent, "+r.label, func() { e.plant(k, name, r.bundle, false) }, r.words...)
		v, b := a.held(k, name)
		if string(b) == string(latest) {
			continue
		}
		if withheld := mode == subscribe.ModeStateOfTheWorld && r.reason == artifact.ReasonExpired && k != artifact.KindPolicy && k != artifact.KindDeclaration && v == "<none>"; !withheld {
			t.Fatalf("agent, %s: holds version %q, want version %d kept", r.label, v, versions)
		}
		// A full set whose resource is expired leaves it out and drops the
		// held one: withholding, which a control plane may do for any kind
		// but a Policy or a Declaration (they go only with their signed
		// tombstone). Served again, version 4 is installed again.
		a.answered(k, "version 4 again", func() { e.plant(k, name, latest, false) })
		a.waitHeld(k, name, latest)
	}
	a.wait("the control plane to count the NACKs", func() bool {
		return e.counter("mcpready_discovery_acks_total", map[string]string{"type_url": k.TypeURL(), "result": "nack"}) >= nacked+float64(len(attacks))
	})
	byReason := map[string]float64{}
	for _, r := range attacks {
		byReason[r.reason]++
	}
	for reason, n := range byReason {
		if got := a.counted(k, reason); got != n {
			t.Errorf("the agent counted %v NACKs with reason %s, want %v", got, reason, n)
		}
	}

	// (c) restarts: the marks come back from disk
	a = a.restart()
	if v, b := a.held(k, name); string(b) != string(latest) {
		t.Fatalf("restart: holds version %q, want %d", v, versions)
	}
	older := func(stage string) { // every older version, after a restart
		for i, b := range vs[:versions-1] {
			a.refuses(k, stage+", "+attacks[i].label, func() { e.plant(k, name, b, false) }, attacks[i].words...)
			if v, _ := a.held(k, name); v != "<none>" && v != strconv.Itoa(versions) {
				t.Fatalf("%s, %s: holds version %q", stage, attacks[i].label, v)
			}
		}
	}
	older("after a restart")
	a.stop()
	if err := os.Remove(a.lkg + ".versions"); err != nil {
		t.Fatal(err)
	}
	a = a.restart()
	if v, b := a.held(k, name); string(b) != string(latest) {
		t.Fatalf("restart without the marks file: holds version %q, want %d", v, versions)
	}
	older("without the marks file")
	a.stop()
	if err := os.WriteFile(a.lkg, lkgAt2, 0o600); err != nil {
		t.Fatal(err)
	}
	a = a.restart()
	if v, _ := a.held(k, name); v != "<none>" && v != strconv.Itoa(versions) {
		t.Fatalf("a last-known-good file rewritten at version 2 rolled the agent back to version %q", v)
	}
	older("rewritten last-known-good file")
	if k == artifact.KindTrustPolicy {
		return // the planted TrustPolicies poisoned the control plane's own trust
	}
	// A newer version is still installed: the agent is not stuck.
	cur, err := e.hostile.Get(ctx(t), k, name)
	if err != nil {
		t.Fatal(err)
	}
	next := e.version(k, artifact.NextVersion(cur.HighWater), "", time.Time{})
	e.apply(next)
	a.waitHeld(k, name, next)
}
