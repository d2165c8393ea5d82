package subscribe

import (
	"errors"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/mcpready/mcpready/agent/internal/cptest"
	"github.com/mcpready/mcpready/artifact"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
)

// TestStale: with a maximum staleness, a TrustPolicy or Policy signed
// longer ago, or without issuedAt, makes the snapshot stale; without one
// nothing is.
func TestStale(t *testing.T) {
	env := cptest.Start(t)
	now := time.Now()
	issued := func(k artifact.Kind, name, version string, at time.Time) []byte {
		o := sample(k, name, version, "", time.Time{})
		if !at.IsZero() {
			o.Provenance().IssuedAt = timestamppb.New(at)
		}
		return env.Sign(o)
	}
	c, _ := New(Options{Root: env.RootPub, Node: &mcpreadyv1.Node{Id: "n"}})
	if err := offer(c, artifact.KindTrustPolicy, "default", issued(artifact.KindTrustPolicy, "default", "1", now.Add(-time.Minute))); err != nil {
		t.Fatal(err)
	}
	if err := c.Snapshot().Stale(now, time.Hour); err != nil {
		t.Fatalf("fresh: %v", err)
	}
	if err := offer(c, artifact.KindPolicy, "p", issued(artifact.KindPolicy, "p", "1", now.Add(-2*time.Hour))); err != nil {
		t.Fatal(err)
	}
	var se *StaleError
	if err := c.Snapshot().Stale(now, time.Hour); !errors.Is(err, ErrStale) || !errors.As(err, &se) || se.Kind != artifact.KindPolicy {
		t.Fatalf("a two-hour-old policy: %v", err)
	}
	if err := c.Snapshot().Stale(now, 0); err != nil {
		t.Fatalf("no limit: %v", err)
	}
	if err := offer(c, artifact.KindPolicy, "p", issued(artifact.KindPolicy, "p", "2", time.Time{})); err != nil {
		t.Fatal(err)
	}
	if err := c.Snapshot().Stale(now, time.Hour); !errors.Is(err, ErrStale) {
		t.Fatalf("no issuedAt: %v", err)
	}
	if err := offer(c, artifact.KindPolicy, "p", issued(artifact.KindPolicy, "p", "3", now)); err != nil {
		t.Fatal(err)
	}
	if err := c.Snapshot().Stale(now, time.Hour); err != nil {
		t.Fatalf("freshly signed again: %v", err)
	}
	if err := c.Snapshot().Stale(now.Add(2*time.Hour), time.Hour); !errors.As(err, &se) || se.Kind != artifact.KindTrustPolicy {
		t.Fatalf("two hours on, the TrustPolicy: %v", err)
	}
}
