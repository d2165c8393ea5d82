package subscribe

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcpready/mcpready/agent/internal/cptest"
	"github.com/mcpready/mcpready/artifact"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/nodelabel"
	"github.com/mcpready/mcpready/sign"
)

func policy(owner string) *artifact.Object {
	return artifact.New(artifact.KindPolicy, "default", &mcpreadyv1.Policy{PolicyOwner: owner})
}

func ownerOf(s *Snapshot) string {
	r := s.Get(artifact.KindPolicy, "default")
	if r == nil {
		return ""
	}
	return r.Verified.Object.Spec.(*mcpreadyv1.Policy).GetPolicyOwner()
}

// waitFor waits until cond holds for the client's snapshot.
func waitFor(t *testing.T, c *Client, what string, cond func(*Snapshot) bool) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		ch := c.Changed()
		if cond(c.Snapshot()) {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func TestSyncVerifyNackAndLKG(t *testing.T) {
	for _, mode := range []Mode{ModeDelta, ModeStateOfTheWorld} {
		t.Run([]string{"delta", "sotw"}[mode], func(t *testing.T) {
			env := cptest.Start(t)
			env.Put(policy("team-a"))
			lkg := filepath.Join(t.TempDir(), "lkg.json")
			node := &mcpreadyv1.Node{Id: "host-1", Labels: map[string]string{string(nodelabel.Region): "eu-west"}}
			c, err := New(Options{Conn: env.Dial(), Root: env.RootPub, Node: node, LKGPath: lkg, Mode: mode, MinBackoff: 20 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { _ = c.Run(ctx); close(done) }()
			waitFor(t, c, "policy team-a", func(s *Snapshot) bool { return ownerOf(s) == "team-a" && s.Trust != nil })

			// A bundle signed by a key the trust policy does not grant is NACKed;
			// the previous version stays in use.
			rogue, _ := sign.GenerateKey(sign.AlgorithmEd25519)
			forged, _, err := sign.Sign(policy("attacker"), rogue)
			if err != nil {
				t.Fatal(err)
			}
			gen := c.Snapshot().Generation
			env.PutBundle(artifact.KindPolicy, "default", forged)
			// A later valid update of another kind still flows.
			env.Put(artifact.New(artifact.KindRegistryEntry, "srv/tool", &mcpreadyv1.RegistryEntry{Identity: &mcpreadyv1.ToolIdentity{ServerName: "srv", ToolName: "tool"}}))
			waitFor(t, c, "registry entry", func(s *Snapshot) bool { return s.Get(artifact.KindRegistryEntry, "srv/tool") != nil })
			if got := ownerOf(c.Snapshot()); got != "team-a" {
				t.Fatalf("forged policy applied: owner %q", got)
			}
			if c.Snapshot().Generation <= gen {
				t.Fatal("generation did not advance")
			}

			// Restart with the control plane down: start from the last known good.
			cancel()
			<-done
			env.Stop()
			c2, err := New(Options{Conn: env.Dial(), Root: env.RootPub, Node: node, LKGPath: lkg, Mode: mode})
			if err != nil {
				t.Fatal(err)
			}
			if dropped, err := c2.Load(); err != nil || dropped != 0 {
				t.Fatalf("load: dropped %d, %v", dropped, err)
			}
			s := c2.Snapshot()
			if ownerOf(s) != "team-a" || s.Get(artifact.KindRegistryEntry, "srv/tool") == nil || s.Trust == nil {
				t.Fatalf("LKG snapshot incomplete: owner %q", ownerOf(s))
			}
			// An LKG verified against another root is refused entirely.
			other, _ := sign.GenerateKey(sign.AlgorithmEd25519)
			c3, _ := New(Options{Root: other.Public(), Node: node, LKGPath: lkg})
			if _, err := c3.Load(); err != nil {
				t.Fatal(err)
			}
			if !c3.Snapshot().Empty() {
				t.Fatal("LKG accepted under a different root")
			}
		})
	}
}

func TestApplyBeforeTrustParksAndRecovers(t *testing.T) {
	env := cptest.Start(t)
	c, err := New(Options{Root: env.RootPub, Node: &mcpreadyv1.Node{Id: "n"}})
	if err != nil {
		t.Fatal(err)
	}
	b := env.Sign(policy("early"))
	err = c.Apply(artifact.KindPolicy, []*mcpreadyv1.Resource{{Name: "default", Version: "5", Bundle: b}}, nil, false)
	if err == nil || !strings.Contains(err.Error(), "trust") {
		t.Fatalf("want no-trust NACK, got %v", err)
	}
	tp := env.Sign(artifact.New(artifact.KindTrustPolicy, "default", &mcpreadyv1.TrustPolicy{}))
	if err := c.Apply(artifact.KindTrustPolicy, []*mcpreadyv1.Resource{{Name: "default", Version: "1", Bundle: tp}}, nil, false); err != nil {
		t.Fatal(err)
	}
	if ownerOf(c.Snapshot()) != "early" {
		t.Fatal("parked policy not accepted once trust arrived")
	}
	// A resource whose bundle names another artifact is rejected.
	other := env.Sign(artifact.New(artifact.KindPolicy, "other", &mcpreadyv1.Policy{}))
	if err := c.Apply(artifact.KindPolicy, []*mcpreadyv1.Resource{{Name: "default", Version: "6", Bundle: other}}, nil, false); err == nil {
		t.Fatal("name-swapped bundle accepted")
	}
}

func FuzzLoad(f *testing.F) {
	f.Add([]byte(`{"format":1,"resources":[{"kind":"TrustPolicy","name":"default","version":"1","bundle":"e30="}]}`))
	f.Add([]byte(`{"format":1,"resources":[{"kind":"Policy","name":"p","bundle":null}],"sotwVersions":{"Policy":"3"}}`))
	f.Add([]byte(`[]`))
	root, _ := sign.GenerateKey(sign.AlgorithmEd25519)
	f.Fuzz(func(t *testing.T, data []byte) {
		p := filepath.Join(t.TempDir(), "lkg.json")
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		c, err := New(Options{Root: root.Public(), Node: &mcpreadyv1.Node{Id: "n"}, LKGPath: p})
		if err != nil {
			t.Fatal(err)
		}
		_, _ = c.Load() // must not panic; nothing unverified may be accepted
		if s := c.Snapshot(); !s.Empty() {
			t.Fatalf("unsigned data accepted: %+v", s)
		}
	})
}
