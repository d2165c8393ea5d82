package subscribe

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/mcpready/mcpready/agent/internal/cptest"
	"github.com/mcpready/mcpready/artifact"
	"github.com/mcpready/mcpready/controlplane/store"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/internal/testpki"
	"github.com/mcpready/mcpready/sign"
)

// trustedClient is a client with opts (node "n" when unset) that holds
// env's root-signed TrustPolicy "default" at version 1.
func trustedClient(t *testing.T, env *cptest.Env, opts Options) *Client {
	t.Helper()
	opts.Root = env.RootPub
	if opts.Node == nil {
		opts.Node = &mcpreadyv1.Node{Id: "n"}
	}
	c, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := offer(c, artifact.KindTrustPolicy, "default", env.Sign(sample(artifact.KindTrustPolicy, "default", "1", "", time.Time{}))); err != nil {
		t.Fatal(err)
	}
	return c
}

// tombRes is a tombstone for target signed by the root, as discovery
// sends it.
func tombRes(t *testing.T, env *cptest.Env, target []byte) *mcpreadyv1.Resource {
	o, err := sign.Peek(target)
	if err != nil {
		t.Fatal(err)
	}
	b := testpki.Tombstone(t, target, "retired", env.Root)
	return &mcpreadyv1.Resource{Name: o.Metadata.Name, TypeUrl: artifact.KindTombstone.TypeURL(), Bundle: b}
}

// TestAgentRemovalNeedsTombstone is the attack of an unsigned removal: a
// control plane (or the network in front of it) drops the Policy or the
// Declaration an agent holds with a bare delta removal or a full set that
// omits it. The agent keeps it unless a signed tombstone names its exact
// version and digest; a tombstone for an earlier version, replayed,
// removes nothing. Before, a Declaration went with any removal, and its
// server's registry entries were then used as if it declared nothing.
func TestAgentRemovalNeedsTombstone(t *testing.T) {
	for _, k := range []artifact.Kind{artifact.KindPolicy, artifact.KindDeclaration} {
		t.Run(string(k), func(t *testing.T) {
			env := cptest.Start(t)
			c := trustedClient(t, env, Options{})
			v1 := env.Sign(sample(k, "org/p", "1", "", time.Time{}))
			if err := offer(c, k, "org/p", v1); err != nil {
				t.Fatal(err)
			}
			held := func() string { return heldVersion(c, k, "org/p") }
			if err := c.Apply(k, nil, []string{"org/p"}, false); !errors.Is(err, ErrUnsignedRemoval) || held() != "1" {
				t.Fatalf("bare delta removal: %v, held %s", err, held())
			}
			if err := c.Apply(k, nil, nil, true); !errors.Is(err, ErrUnsignedRemoval) || held() != "1" {
				t.Fatalf("full set without it: %v, held %s", err, held())
			}
			v2 := env.Sign(sample(k, "org/p", "2", "", time.Time{}))
			if err := c.Apply(k, nil, []string{"org/p"}, false, tombRes(t, env, v2)); !errors.Is(err, artifact.ErrTombstone) || held() != "1" {
				t.Fatalf("a tombstone for another version: %v, held %s", err, held())
			}
			forged := tombRes(t, env, v1)
			other, _ := sign.GenerateKey(sign.AlgorithmEd25519)
			forged.Bundle = testpki.Tombstone(t, v1, "retired", other)
			if err := c.Apply(k, nil, []string{"org/p"}, false, forged); err == nil || held() != "1" {
				t.Fatalf("a tombstone signed by an unknown key: %v, held %s", err, held())
			}
			t1 := tombRes(t, env, v1)
			if err := c.Apply(k, nil, []string{"org/p"}, false, t1); err != nil || held() != "<none>" {
				t.Fatalf("the exact tombstone: %v, held %s", err, held())
			}
			if err := offer(c, k, "org/p", v2); err != nil {
				t.Fatal(err)
			}
			if err := c.Apply(k, nil, []string{"org/p"}, false, t1); !errors.Is(err, artifact.ErrTombstone) || held() != "2" {
				t.Fatalf("the replayed tombstone: %v, held %s", err, held())
			}
			if err := c.Apply(k, nil, nil, true, tombRes(t, env, v2)); err != nil || held() != "<none>" {
				t.Fatalf("a full set with the exact tombstone: %v, held %s", err, held())
			}
		})
	}
}

// TestDeletionEndToEnd: a Policy deleted through Admin with its exact
// tombstone leaves the agent over both Discovery variants; a deletion a
// compromised control plane writes without a valid tombstone does not.
func TestDeletionEndToEnd(t *testing.T) {
	for _, mode := range []Mode{ModeDelta, ModeStateOfTheWorld} {
		t.Run(map[Mode]string{ModeDelta: "delta", ModeStateOfTheWorld: "sotw"}[mode], func(t *testing.T) {
			env := cptest.Start(t)
			ctx := context.Background()
			adm := mcpreadyv1.NewAdminServiceClient(env.Dial())
			nacks := &nackLog{}
			c, err := New(Options{Conn: env.Dial(), Root: env.RootPub, Node: &mcpreadyv1.Node{Id: "n"}, Mode: mode, MinBackoff: 20 * time.Millisecond,
				Logger: slog.New(slog.NewTextHandler(nacks, nil))})
			if err != nil {
				t.Fatal(err)
			}
			runCtx, cancel := context.WithCancel(ctx)
			defer cancel()
			go func() { _ = c.Run(runCtx) }()
			k := artifact.KindPolicy
			for _, name := range []string{"org/p", "org/q"} {
				if _, err := adm.Apply(ctx, &mcpreadyv1.ApplyRequest{Bundle: env.Sign(sample(k, name, "1", "", time.Time{}))}); err != nil {
					t.Fatal(err)
				}
			}
			waitFor(t, c, "both policies", func(s *Snapshot) bool { return s.Get(k, "org/p") != nil && s.Get(k, "org/q") != nil })
			p := c.Snapshot().Get(k, "org/p")
			if _, err := adm.Delete(ctx, &mcpreadyv1.DeleteRequest{Tombstone: testpki.Tombstone(t, p.Bundle, "retired", env.Root)}); err != nil {
				t.Fatal(err)
			}
			waitFor(t, c, "the deletion", func(s *Snapshot) bool { return s.Get(k, "org/p") == nil })

			// a compromised control plane deletes org/q with a tombstone for nothing
			forged := testpki.Sign(t, testpki.Object(artifact.KindTombstone, "org/q", &mcpreadyv1.Tombstone{TargetKind: "Policy", TargetName: "org/q"}, nil), env.Root)
			if _, _, err := env.Store.Put(ctx, store.Record{Kind: k, Name: "org/q", Bundle: forged, Deleted: true}); err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(10 * time.Second)
			for !nacks.has("tombstone") {
				if time.Now().After(deadline) {
					t.Fatalf("no NACK for the inexact tombstone; log:\n%s", nacks.String())
				}
				time.Sleep(10 * time.Millisecond)
			}
			if c.Snapshot().Get(k, "org/q") == nil {
				t.Fatal("an inexact tombstone removed the policy")
			}
		})
	}
}
