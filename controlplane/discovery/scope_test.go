package discovery_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/nodelabel"
)

var (
	euWest = map[string]string{string(nodelabel.ScopeRegion): "eu-west"}
	usEast = map[string]string{string(nodelabel.ScopeRegion): "us-east"}
	inEU   = map[string]string{string(nodelabel.Region): "eu-west"}
)

// TestSotWScopeOut: a Policy that moves out of an agent's scope on the
// state-of-the-world stream is sent in its new (out-of-scope) version, so
// the agent, verifying it, drops the one it holds; once that is ACKed it is
// not sent again. Before, the full set simply omitted it, which the agent
// (rightly) refuses to treat as a removal without a tombstone, so the
// Policy stayed on the agent.
func TestSotWScopeOut(t *testing.T) {
	e := setup(t)
	e.put(t, "p", "eu-1", euWest)
	e.start()
	s, sc := e.sotw(t)
	s.Send(&mcpreadyv1.StreamResourcesRequest{Node: node("n", inEU), TypeUrl: policyURL})
	r, ok := recvTimeout(t, sc, 5*time.Second)
	if !ok || len(r.Resources) != 1 {
		t.Fatalf("initial: %v", r)
	}
	s.Send(&mcpreadyv1.StreamResourcesRequest{TypeUrl: policyURL, VersionInfo: r.VersionInfo, ResponseNonce: r.Nonce})
	e.put(t, "p", "us-2", usEast)
	r, ok = recvTimeout(t, sc, 5*time.Second)
	if !ok || len(r.Resources) != 1 || string(r.Resources[0].Bundle) != "us-2" {
		t.Fatalf("scope-out: got %v, want the out-of-scope version", r)
	}
	s.Send(&mcpreadyv1.StreamResourcesRequest{TypeUrl: policyURL, VersionInfo: r.VersionInfo, ResponseNonce: r.Nonce})
	e.put(t, "q", "q-1", nil)
	r, ok = recvTimeout(t, sc, 5*time.Second)
	if got := names(r.Resources); !ok || len(got) != 1 || got["q"] == "" {
		t.Fatalf("after the ACKed scope-out: %v, want only q", got)
	}
}

// TestScopeOutNeedsAHeldInScopeVersion is the attack of an agent that
// names another tenant's Policy as held (initial_resource_versions,
// held_resource_versions) to be sent it out of scope. The server sends a
// scoped-away version only to an agent whose named version was within its
// scope; before, the incremental stream sent it to anyone naming it.
func TestScopeOutNeedsAHeldInScopeVersion(t *testing.T) {
	e := setup(t)
	gold := e.put(t, "tenant-b/gold", "gold-1", map[string]string{string(nodelabel.ScopeTenantClass): "gold"})
	e.put(t, "p", "eu-1", euWest)
	moved := e.put(t, "p", "us-2", usEast)
	e.start()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, held := range []map[string]string{
		{"tenant-b/gold": strconv.FormatInt(gold.Revision, 10)},
		{"tenant-b/gold": "0"},
		{"tenant-b/gold": "7"},
		{"p": strconv.FormatInt(moved.Revision, 10)}, // the held version must itself have been in scope
	} {
		d, _ := e.cli.DeltaResources(ctx)
		dc := pump(d.Recv)
		d.Send(&mcpreadyv1.DeltaResourcesRequest{Node: node("n", inEU), TypeUrl: policyURL, InitialResourceVersions: held})
		if r, got := recvTimeout(t, dc, 500*time.Millisecond); got && len(r.Resources) > 0 {
			t.Errorf("delta, held %v: sent %v", held, names(r.Resources))
		}
		s, _ := e.cli.StreamResources(ctx)
		sc := pump(s.Recv)
		s.Send(&mcpreadyv1.StreamResourcesRequest{Node: node("n", inEU), TypeUrl: policyURL, HeldResourceVersions: held})
		if r, got := recvTimeout(t, sc, 5*time.Second); !got || len(r.Resources) > 0 {
			t.Errorf("state of the world, held %v: sent %v (%v)", held, names(r.Resources), got)
		}
	}
	// An agent that held p's eu-west version learns of the move on both.
	held := map[string]string{"p": "1"}
	d, _ := e.cli.DeltaResources(ctx)
	dc := pump(d.Recv)
	d.Send(&mcpreadyv1.DeltaResourcesRequest{Node: node("n", inEU), TypeUrl: policyURL, InitialResourceVersions: held})
	if r, ok := recvTimeout(t, dc, 5*time.Second); !ok || len(r.Resources) != 1 || string(r.Resources[0].Bundle) != "us-2" {
		t.Errorf("delta reconnect after a scope-out: %v", r)
	}
	s, _ := e.cli.StreamResources(ctx)
	sc := pump(s.Recv)
	s.Send(&mcpreadyv1.StreamResourcesRequest{Node: node("n", inEU), TypeUrl: policyURL, HeldResourceVersions: held})
	if r, ok := recvTimeout(t, sc, 5*time.Second); !ok || len(r.Resources) != 1 || string(r.Resources[0].Bundle) != "us-2" {
		t.Errorf("state-of-the-world reconnect after a scope-out: %v", r)
	}
}
