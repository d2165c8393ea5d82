package subscribe

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/mcpready/mcpready/agent/internal/cptest"
	"github.com/mcpready/mcpready/artifact"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/internal/testpki"
	"github.com/mcpready/mcpready/nodelabel"
	"github.com/mcpready/mcpready/sign"
)

// TestAgentRefusesMisScoped is the attack of a control plane that sends a
// host what is scoped to others: a Policy for another region is refused
// (NACK names out-of-scope) and not installed, while an in-scope one in the
// same response is; a newer signed version that moves a held Policy out
// of this host's scope removes it (a signed change, so no NACK); an older
// mis-scoped one (a replay) changes nothing.
func TestAgentRefusesMisScoped(t *testing.T) {
	env := cptest.Start(t)
	c := trustedClient(t, env, Options{Node: &mcpreadyv1.Node{Id: "n", Labels: map[string]string{string(nodelabel.Region): "eu-west", string(nodelabel.TenantClass): "gold"}}})
	k := artifact.KindPolicy
	scoped := func(name, version, region string) *mcpreadyv1.Resource {
		o := sample(k, name, version, "", time.Time{})
		o.Metadata.Labels = map[string]string{string(nodelabel.ScopeRegion): region}
		return &mcpreadyv1.Resource{Name: name, Bundle: env.Sign(o)}
	}
	err := c.Apply(k, []*mcpreadyv1.Resource{scoped("us", "1", "us-east"), scoped("eu", "1", "eu-west, eu-north")}, nil, false)
	if !errors.Is(err, ErrOutOfScope) || c.Snapshot().Get(k, "us") != nil || c.Snapshot().Get(k, "eu") == nil {
		t.Fatalf("mixed scopes: %v; us held %v, eu held %v", err, c.Snapshot().Get(k, "us") != nil, c.Snapshot().Get(k, "eu") != nil)
	}
	if err := c.Apply(k, []*mcpreadyv1.Resource{scoped("eu", "0", "us-east")}, nil, false); err == nil || c.Snapshot().Get(k, "eu") == nil {
		t.Fatalf("an older mis-scoped version: %v, eu held %v", err, c.Snapshot().Get(k, "eu") != nil)
	}
	if err := c.Apply(k, []*mcpreadyv1.Resource{scoped("eu", "2", "us-east")}, nil, false); err != nil || c.Snapshot().Get(k, "eu") != nil {
		t.Fatalf("moved out of scope: %v, eu held %v", err, c.Snapshot().Get(k, "eu") != nil)
	}
}

// TestParkedBounded: resources that do not verify (yet) are kept for when
// a TrustPolicy that verifies them arrives, but only up to MaxParked per
// kind: a flood of unverifiable resources does not grow the agent.
func TestParkedBounded(t *testing.T) {
	env := cptest.Start(t)
	c := trustedClient(t, env, Options{MaxParked: 50})
	stranger, _ := sign.GenerateKey(sign.AlgorithmEd25519)
	b := testpki.Sign(t, sample(artifact.KindDeclaration, "d", "1", "", time.Time{}), stranger)
	for i := range 200 {
		_ = c.Apply(artifact.KindDeclaration, []*mcpreadyv1.Resource{{Name: fmt.Sprintf("d/%d", i), Bundle: b}}, nil, false)
	}
	c.mu.Lock()
	n := len(c.parked[artifact.KindDeclaration])
	c.mu.Unlock()
	if n > 50 {
		t.Fatalf("%d resources parked, limit 50", n)
	}
}

// TestScopeChangeEndToEnd: a Policy re-applied with a scope that excludes
// the agent leaves it over the incremental stream (the control plane
// sends the newer, mis-scoped version; the agent drops the one it holds).
func TestScopeChangeEndToEnd(t *testing.T) {
	env := cptest.Start(t)
	c, err := New(Options{Conn: env.Dial(), Root: env.RootPub, Node: &mcpreadyv1.Node{Id: "n", Labels: map[string]string{string(nodelabel.Region): "eu-west"}}, MinBackoff: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = c.Run(ctx) }()
	adm := mcpreadyv1.NewAdminServiceClient(env.Dial())
	put := func(version, region string) {
		o := sample(artifact.KindPolicy, "p", version, "", time.Time{})
		o.Metadata.Labels = map[string]string{string(nodelabel.ScopeRegion): region}
		if _, err := adm.Apply(ctx, &mcpreadyv1.ApplyRequest{Bundle: env.Sign(o)}); err != nil {
			t.Fatal(err)
		}
	}
	put("1", "eu-west")
	waitFor(t, c, "the eu policy", func(s *Snapshot) bool { return s.Get(artifact.KindPolicy, "p") != nil })
	put("2", "us-east")
	waitFor(t, c, "its removal", func(s *Snapshot) bool { return s.Get(artifact.KindPolicy, "p") == nil })
}

// TestScopeOutStateOfTheWorld is TestScopeChangeEndToEnd on the
// state-of-the-world stream, while connected and across a reconnect (the
// move happens while the agent is away). Before, the full set omitted the
// Policy that left the agent's scope, the agent refused that as an
// unsigned removal, and the Policy stayed until deleted; a Policy still in
// scope stays put, and nothing falls back to another Policy.
func TestScopeOutStateOfTheWorld(t *testing.T) {
	env := cptest.Start(t)
	c, err := New(Options{Conn: env.Dial(), Root: env.RootPub, Node: &mcpreadyv1.Node{Id: "n", Labels: map[string]string{string(nodelabel.Region): "eu-west"}},
		Mode: ModeStateOfTheWorld, MinBackoff: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	run := func() context.CancelFunc {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { _ = c.Run(ctx); close(done) }()
		return func() { cancel(); <-done }
	}
	stop := run()
	adm := mcpreadyv1.NewAdminServiceClient(env.Dial())
	put := func(name, version, region string) {
		o := sample(artifact.KindPolicy, name, version, "", time.Time{})
		o.Metadata.Labels = map[string]string{string(nodelabel.ScopeRegion): region}
		if _, err := adm.Apply(context.Background(), &mcpreadyv1.ApplyRequest{Bundle: env.Sign(o)}); err != nil {
			t.Fatal(err)
		}
	}
	held := func(names ...string) func(*Snapshot) bool {
		return func(s *Snapshot) bool {
			got := s.List(artifact.KindPolicy)
			if len(got) != len(names) {
				return false
			}
			for i, r := range got {
				if r.Name != names[i] {
					return false
				}
			}
			return true
		}
	}
	put("p", "1", "eu-west")
	put("q", "1", "eu-west")
	put("r", "1", "eu-west")
	waitFor(t, c, "p, q and r", held("p", "q", "r"))
	put("p", "2", "us-east")
	waitFor(t, c, "p's removal while connected", held("q", "r"))
	stop()
	put("q", "2", "us-east")
	stop = run()
	defer stop()
	waitFor(t, c, "q's removal after a reconnect", held("r"))
}
