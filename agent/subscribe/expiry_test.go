package subscribe

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcpready/mcpready/agent/internal/cptest"
	"github.com/mcpready/mcpready/artifact"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
)

// clock is a settable clock whose Until fires when Advance reaches the
// instant it was asked for.
type clock struct {
	mu      sync.Mutex
	now     time.Time
	waiters []waiter
}

type waiter struct {
	at time.Time
	ch chan time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Until(t time.Time) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	if !t.After(c.now) {
		ch <- c.now
		return ch
	}
	c.waiters = append(c.waiters, waiter{t, ch})
	return ch
}

// Advance moves the clock to t and fires the timers due by then.
func (c *clock) Advance(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
	kept := c.waiters[:0]
	for _, w := range c.waiters {
		if w.at.After(t) {
			kept = append(kept, w)
			continue
		}
		w.ch <- t
	}
	c.waiters = kept
}

// Attack (a freeze by withholding): the control plane (or the network)
// stops sending updates, and what the agent holds expires. Over a real
// subscription with a controllable clock: at its signed expiresAt an
// installed Policy stops being used (Get returns nil, no other Policy is
// put in its place), a Declaration stops being used together with the
// registry entries of its server, and an expired TrustPolicy withholds
// everything. Newer signed versions bring them back. Before, each stayed
// in use until a newer version arrived.
func TestExpiryAfterInstall(t *testing.T) {
	for _, mode := range []Mode{ModeDelta, ModeStateOfTheWorld} {
		t.Run([]string{"delta", "sotw"}[mode], func(t *testing.T) {
			env := cptest.Start(t)
			t0 := time.Now().Truncate(time.Second)
			clk := &clock{now: t0}
			entry := func(name, server string) *artifact.Object {
				return artifact.New(artifact.KindRegistryEntry, name, &mcpreadyv1.RegistryEntry{Identity: &mcpreadyv1.ToolIdentity{ServerName: server, ToolName: "tool"}})
			}
			env.Put(sample(artifact.KindPolicy, "default", "", "", t0.Add(time.Hour)))
			env.Put(sample(artifact.KindPolicy, "backup", "", "", time.Time{}))
			env.Put(sample(artifact.KindDeclaration, "srv", "", "", t0.Add(2*time.Hour)))
			env.Put(entry("srv/tool", "srv"))
			env.Put(entry("other/tool", "other"))
			c, err := New(Options{Conn: env.Dial(), Root: env.RootPub, Node: &mcpreadyv1.Node{Id: "host-1"}, Mode: mode,
				MinBackoff: 20 * time.Millisecond, Now: clk.Now, Until: clk.Until})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { _ = c.Run(ctx); close(done) }()
			t.Cleanup(func() { cancel(); <-done })
			has := func(k artifact.Kind, name string) func(*Snapshot) bool {
				return func(s *Snapshot) bool { return s.Get(k, name) != nil }
			}
			not := func(f func(*Snapshot) bool) func(*Snapshot) bool { return func(s *Snapshot) bool { return !f(s) } }
			waitFor(t, c, "everything installed", func(s *Snapshot) bool {
				return has(artifact.KindPolicy, "default")(s) && has(artifact.KindDeclaration, "srv")(s) && len(s.List(artifact.KindRegistryEntry)) == 2 && has(artifact.KindPolicy, "backup")(s)
			})

			// The Policy expires: it is no longer used; nothing else is.
			clk.Advance(t0.Add(time.Hour))
			waitFor(t, c, "expired policy withheld", not(has(artifact.KindPolicy, "default")))
			s := c.Snapshot()
			if why := s.Withheld(artifact.KindPolicy, "default"); !strings.Contains(why, "expired at") || s.Versions(artifact.KindPolicy)["default"] == "" {
				t.Fatalf("withheld policy: reason %q, still presented as held: %v", why, s.Versions(artifact.KindPolicy))
			}
			if !has(artifact.KindDeclaration, "srv")(s) || len(s.List(artifact.KindRegistryEntry)) != 2 || len(s.List(artifact.KindPolicy)) != 1 {
				t.Fatalf("after the policy expired: declaration %v, %d entries, policies %v", has(artifact.KindDeclaration, "srv")(s), len(s.List(artifact.KindRegistryEntry)), s.Versions(artifact.KindPolicy))
			}

			// The Declaration expires: it and its server's entries go.
			clk.Advance(t0.Add(2*time.Hour + time.Second))
			waitFor(t, c, "expired declaration withheld", not(has(artifact.KindDeclaration, "srv")))
			s = c.Snapshot()
			if has(artifact.KindRegistryEntry, "srv/tool")(s) || !has(artifact.KindRegistryEntry, "other/tool")(s) || !strings.Contains(s.Withheld(artifact.KindRegistryEntry, "srv/tool"), "Declaration") {
				t.Fatalf("after the declaration expired: entries %v", s.List(artifact.KindRegistryEntry))
			}

			// Newer signed versions bring them back.
			env.Put(sample(artifact.KindDeclaration, "srv", "", "", t0.Add(10*time.Hour)))
			env.Put(sample(artifact.KindPolicy, "default", "", "", t0.Add(10*time.Hour)))
			waitFor(t, c, "renewed", func(s *Snapshot) bool {
				return has(artifact.KindPolicy, "default")(s) && has(artifact.KindDeclaration, "srv")(s) && has(artifact.KindRegistryEntry, "srv/tool")(s)
			})

			// The TrustPolicy expires: nothing is used.
			env.Put(successor(c, sample(artifact.KindTrustPolicy, "default", "", "", t0.Add(3*time.Hour))))
			waitFor(t, c, "expiring trust installed", func(s *Snapshot) bool {
				return s.Trust != nil && s.Trust.Policy().Object.Provenance().GetExpiresAt() != nil
			})
			clk.Advance(t0.Add(3 * time.Hour))
			waitFor(t, c, "everything withheld", func(s *Snapshot) bool { return s.Empty() })
			for _, k := range c.kinds() {
				if n := len(c.Snapshot().List(k)); n != 0 {
					t.Fatalf("%d %s in use under an expired TrustPolicy", n, k)
				}
			}
		})
	}
}
