package pipeline

import (
	"context"
	"testing"
	"time"

	"github.com/mcpready/mcpready/agent/decide"
	"github.com/mcpready/mcpready/agent/internal/mcptest"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
)

// A call's receipt says whether it met a warm upstream session: the first
// call on a new session is cold, the next one warm, one after the session
// sat idle past ColdAfter cold again, and one on another (new) session
// cold; a refused call has no warmth. Before, receipts did not say.
func TestWarmth(t *testing.T) {
	up := mcptest.New(t, mcptest.Options{})
	snap, err := decide.NewSnapshot(decide.Inputs{PolicyVersion: "1", Policy: policy(), Entries: map[string]*mcpreadyv1.RegistryEntry{"a": entry("a", up.URL)}})
	if err != nil {
		t.Fatal(err)
	}
	out := &sink{}
	pl := New(Options{Emit: out.emit, ColdAfter: time.Second})
	st := State{Decide: snap}
	tr := newFake(t)
	call := func(tr Transport, tool string) mcpreadyv1.CallWarmth {
		t.Helper()
		res := pl.Call(context.Background(), st, request(tool), tr)
		return res.Receipt.GetWarmth()
	}
	steps := []struct {
		name string
		tr   Transport
		skip time.Duration // real time: the call's deadline follows the clock
		want mcpreadyv1.CallWarmth
	}{
		{"first", tr, 0, mcpreadyv1.CallWarmth_CALL_WARMTH_COLD_NEW_SESSION},
		{"again", tr, 0, mcpreadyv1.CallWarmth_CALL_WARMTH_WARM},
		{"idle", tr, 1200 * time.Millisecond, mcpreadyv1.CallWarmth_CALL_WARMTH_COLD_IDLE},
		{"after the idle one", tr, 0, mcpreadyv1.CallWarmth_CALL_WARMTH_WARM},
		{"new session", newFake(t), 0, mcpreadyv1.CallWarmth_CALL_WARMTH_COLD_NEW_SESSION},
	}
	for _, s := range steps {
		time.Sleep(s.skip)
		if got := call(s.tr, "a/echo"); got != s.want {
			t.Fatalf("%s: warmth %v, want %v", s.name, got, s.want)
		}
	}
	if got := call(tr, "nosuch/echo"); got != mcpreadyv1.CallWarmth_CALL_WARMTH_UNSPECIFIED {
		t.Fatalf("refused call: warmth %v", got)
	}
}

// The warmth table stays bounded however many sessions pass through it.
func TestWarmthBounded(t *testing.T) {
	w := newWarmth(time.Minute)
	now := time.Unix(1_800_000_000, 0)
	for i := range 3 * maxWarmSessions {
		w.touch(sessionKey(i), now.Add(time.Duration(i)*time.Millisecond))
	}
	if n := w.len(); n > maxWarmSessions {
		t.Fatalf("%d sessions kept, bound %d", n, maxWarmSessions)
	}
}

type sessionKey int

// closedKey is a session that reports itself broken (closed).
type closedKey struct{ n int }

func (closedKey) Broken() bool { return true }

// A full table forgets closed sessions before open ones that are still
// warm.
func TestWarmthForgetsClosedFirst(t *testing.T) {
	w := newWarmth(time.Minute)
	now := time.Unix(1_800_000_000, 0)
	w.touch(sessionKey(-1), now)
	for i := range maxWarmSessions - 1 {
		w.touch(&closedKey{i}, now)
	}
	w.touch(sessionKey(-2), now) // full: the closed ones go
	if got := w.touch(sessionKey(-1), now.Add(time.Second)); got != mcpreadyv1.CallWarmth_CALL_WARMTH_WARM {
		t.Fatalf("a warm open session was forgotten: %v", got)
	}
}
