package chainhead

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/mcpready/mcpready/internal/etcdtest"
	"github.com/mcpready/mcpready/ledger"
)

func d(seq uint64) string { return fmt.Sprintf("sha256:%064d", seq) }

// heads is what both implementations provide (package ingest's Heads).
type heads interface {
	Get(ctx context.Context, agent string) (State, error)
	BatchDigest(ctx context.Context, agent string, seq uint64) (string, bool, error)
	Advance(ctx context.Context, agent string, base State, next ledger.Head) (State, error)
}

// implementations returns, per implementation, two handles on one set of
// heads (two etcd clients, or one Memory twice), as two replicas see it.
func implementations() map[string]func(t *testing.T, o Options) (heads, heads) {
	return map[string]func(t *testing.T, o Options) (heads, heads){
		"etcd": func(t *testing.T, o Options) (heads, heads) {
			cli, _ := etcdtest.Etcd(t)
			return New(cli, o), New(etcdtest.Client(t, cli.Endpoints()...), o)
		},
		"memory": func(t *testing.T, o Options) (heads, heads) {
			m := NewMemory(o)
			return m, m
		},
	}
}

func TestAdvanceComparesAndKeepsLastDigests(t *testing.T) {
	for name, impl := range implementations() {
		t.Run(name, func(t *testing.T) {
			s, _ := impl(t, Options{Keep: 3})
			testAdvanceComparesAndKeepsLastDigests(t, s)
		})
	}
}

func testAdvanceComparesAndKeepsLastDigests(t *testing.T, s heads) {
	ctx := context.Background()
	cur, err := s.Get(ctx, "agent/1")
	if err != nil || cur != (State{}) {
		t.Fatalf("empty head: %+v %v", cur, err)
	}
	for seq := uint64(1); seq <= 5; seq++ {
		if cur, err = s.Advance(ctx, "agent/1", cur, ledger.Head{Sequence: seq, Digest: d(seq)}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.Get(ctx, "agent/1")
	if err != nil || got != cur || got.Sequence != 5 || got.Digest != d(5) {
		t.Fatalf("head %+v %v, want %+v", got, err, cur)
	}
	for seq, want := range map[uint64]bool{1: false, 2: false, 3: true, 4: true, 5: true} {
		dg, ok, err := s.BatchDigest(ctx, "agent/1", seq)
		if err != nil || ok != want || (ok && dg != d(seq)) {
			t.Errorf("digest %d: %q %v %v, want kept=%v", seq, dg, ok, err, want)
		}
	}
	// "agent/1" is escaped: another agent "agent" sees nothing of it.
	if h, _ := s.Get(ctx, "agent"); h != (State{}) {
		t.Fatalf("agent %q sees %+v", "agent", h)
	}

	for _, tc := range []struct {
		name string
		base State
		next ledger.Head
		err  error
	}{
		{"stale version", State{Head: ledger.Head{Sequence: 4, Digest: d(4)}, Version: 1}, ledger.Head{Sequence: 5, Digest: "sha256:other"}, ErrConflict},
		{"absent expected but present", State{Head: ledger.Head{Sequence: 5, Digest: d(5)}}, ledger.Head{Sequence: 6, Digest: d(6)}, ErrConflict},
		{"skips a sequence", cur, ledger.Head{Sequence: 7, Digest: d(7)}, ErrInvalid},
		{"no digest", cur, ledger.Head{Sequence: 6}, ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now, err := s.Advance(ctx, "agent/1", tc.base, tc.next)
			if !errors.Is(err, tc.err) {
				t.Fatalf("err %v, want %v", err, tc.err)
			}
			if errors.Is(err, ErrConflict) && now != cur {
				t.Fatalf("conflict returned %+v, want current %+v", now, cur)
			}
			if h, _ := s.Get(ctx, "agent/1"); h != cur {
				t.Fatalf("head changed to %+v", h)
			}
		})
	}
}

func TestRacingAdvancesOneWins(t *testing.T) {
	for name, impl := range implementations() {
		t.Run(name, func(t *testing.T) {
			a, b := impl(t, Options{})
			testRacingAdvancesOneWins(t, a, b)
		})
	}
}

func testRacingAdvancesOneWins(t *testing.T, a, b heads) {
	ctx := context.Background()
	for seq := uint64(1); seq <= 20; seq++ {
		base, err := a.Get(ctx, "agent-1")
		if err != nil {
			t.Fatal(err)
		}
		errs := make(chan error, 2)
		for i, s := range []heads{a, b} {
			go func() {
				_, err := s.Advance(ctx, "agent-1", base, ledger.Head{Sequence: seq, Digest: fmt.Sprintf("sha256:%d-%d", seq, i)})
				errs <- err
			}()
		}
		e1, e2 := <-errs, <-errs
		if (e1 == nil) == (e2 == nil) || !errors.Is(errors.Join(e1, e2), ErrConflict) {
			t.Fatalf("sequence %d: %v / %v, want exactly one ErrConflict", seq, e1, e2)
		}
	}
}

func TestUnavailable(t *testing.T) {
	cli, m := etcdtest.Etcd(t)
	var failures int
	s := New(cli, Options{Timeout: 300 * time.Millisecond, OnError: func(error) { failures++ }})
	m.Close()
	ctx := context.Background()
	if _, err := s.Get(ctx, "agent-1"); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Get: %v", err)
	}
	if _, _, err := s.BatchDigest(ctx, "agent-1", 1); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("BatchDigest: %v", err)
	}
	if _, err := s.Advance(ctx, "agent-1", State{}, ledger.Head{Sequence: 1, Digest: d(1)}); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Advance: %v", err)
	}
	if failures != 3 {
		t.Fatalf("OnError called %d times, want 3", failures)
	}
	// The cause stays visible beside the sentinel.
	if _, err := s.Get(ctx, "agent-1"); !errors.Is(err, ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Get: %v, want ErrUnavailable wrapping the deadline", err)
	}
}

// FuzzDecodeHead: a stored head value decodes to a valid head or to
// ErrCorrupt, never panics, and a valid head survives a round trip.
func FuzzDecodeHead(f *testing.F) {
	f.Add([]byte(`{"sequence":3,"digest":"sha256:ab"}`))
	f.Add([]byte(`{"sequence":0,"digest":""}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, v []byte) {
		st, err := decodeHead("k", v, 7)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		if st.Sequence == 0 || st.Digest == "" || st.Version != 7 {
			t.Fatalf("invalid head accepted: %+v", st)
		}
		enc, _ := json.Marshal(headValue{Sequence: st.Sequence, Digest: st.Digest})
		if again, err := decodeHead("k", enc, 7); err != nil || again != st {
			t.Fatalf("round trip: %+v %v, want %+v", again, err, st)
		}
	})
}
