package agent

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/mcpready/mcpready/agent/internal/cptest"
	"github.com/mcpready/mcpready/agent/internal/mcptest"
	"github.com/mcpready/mcpready/artifact"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/internal/testpki"
)

// TestNoFallbackToAnotherPolicy is the attack of a Policy that disappears
// (here: deleted with its signed tombstone) while another Policy, more
// permissive, is held: the agent must not silently decide under the other
// one; it refuses calls (no_policy) naming the Policy it uses.
func TestNoFallbackToAnotherPolicy(t *testing.T) {
	env := cptest.Start(t)
	up := mcptest.New(t, mcptest.Options{})
	publish(t, env, up)
	env.Put(artifact.New(artifact.KindPolicy, "a-permissive", openPolicy(nil)))
	dir := t.TempDir()
	a, stop := start(t, Options{ControlPlane: env.Addr, Root: env.RootPub, NodeID: "host-p", Listen: "127.0.0.1:0",
		DataDir: filepath.Join(dir, "data"), Config: writeConfig(t, dir)})
	defer stop()
	waitConfigured(t, a)
	if res := callEcho(t, a.Addr()); res.IsError {
		t.Fatalf("under the default policy: %v", textOf(res))
	}
	held := a.Sync().Snapshot().Get(artifact.KindPolicy, "default")
	adm := mcpreadyv1.NewAdminServiceClient(env.Dial())
	if _, err := adm.Delete(context.Background(), &mcpreadyv1.DeleteRequest{Tombstone: testpki.Tombstone(t, held.Bundle, "retired", env.Root)}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for s := a.Sync().Snapshot(); s.Get(artifact.KindPolicy, "default") != nil || a.Installed() < s.Generation; s = a.Sync().Snapshot() {
		if time.Now().After(deadline) {
			t.Fatal("the deletion never arrived")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if res := callEcho(t, a.Addr()); !res.IsError || !strings.Contains(textOf(res), "no_policy") || !strings.Contains(textOf(res), `policy \"default\"`) {
		t.Fatalf("after its policy disappeared, the agent decided under another: %v", textOf(res))
	}
}

// TestExpiredPolicyRefusesNamingTheExpiry: when the Policy the agent uses
// passes its signed expiresAt, calls are refused (no_policy) with the
// expiry as the reason, and no other held Policy takes its place.
func TestExpiredPolicyRefusesNamingTheExpiry(t *testing.T) {
	env := cptest.Start(t)
	up := mcptest.New(t, mcptest.Options{})
	publish(t, env, up)
	env.Put(artifact.New(artifact.KindPolicy, "a-permissive", openPolicy(nil)))
	expires := time.Now().Add(10 * time.Second) // room for start-up under -race on a loaded machine
	env.Put(artifact.New(artifact.KindPolicy, "default", openPolicy(&mcpreadyv1.Provenance{Version: "999999", ExpiresAt: timestamppb.New(expires)})))
	dir := t.TempDir()
	a, stop := start(t, Options{ControlPlane: env.Addr, Root: env.RootPub, NodeID: "host-x", Listen: "127.0.0.1:0",
		DataDir: filepath.Join(dir, "data"), Config: writeConfig(t, dir)})
	defer stop()
	waitConfigured(t, a)
	if res := callEcho(t, a.Addr()); res.IsError {
		t.Fatalf("before the Policy expired: %v", textOf(res))
	}
	time.Sleep(time.Until(expires))
	deadline := time.Now().Add(15 * time.Second)
	for {
		res := callEcho(t, a.Addr())
		if res.IsError {
			if txt := textOf(res); !strings.Contains(txt, "no_policy") || !strings.Contains(txt, "expired at") || !strings.Contains(txt, `policy \"default\"`) {
				t.Fatalf("an expired Policy's refusal does not say so: %v", txt)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("calls still decided under the expired Policy")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// openPolicy admits the default principal to every test/* tool whatever
// its evidence, with provenance p.
func openPolicy(p *mcpreadyv1.Provenance) *mcpreadyv1.Policy {
	return &mcpreadyv1.Policy{
		Provenance: p,
		Inventory:  []string{"test/*"},
		Evidence:   &mcpreadyv1.EvidenceRules{OnUnknown: mcpreadyv1.UnknownEvidenceAction_UNKNOWN_EVIDENCE_ACTION_ALLOW},
		Principals: []*mcpreadyv1.PrincipalRule{{PrincipalClass: "default", Allow: []string{"*"}}},
	}
}
