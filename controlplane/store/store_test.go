package store_test

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mcpready/mcpready/artifact"
	"github.com/mcpready/mcpready/controlplane/store"
	"github.com/mcpready/mcpready/internal/etcdtest"
)

func TestPutGetHistoryImmutable(t *testing.T) {
	cli, _ := etcdtest.Etcd(t)
	s := store.New(cli, store.Options{})
	ctx := context.Background()

	r1, unchanged, err := s.Put(ctx, store.Record{Kind: artifact.KindPolicy, Name: "org/p", Bundle: []byte(`{"v":1}`), Signer: "k1"})
	if err != nil || unchanged || r1.Revision != 1 {
		t.Fatalf("first put: %+v %v %v", r1, unchanged, err)
	}
	// same bytes: no new revision
	r, unchanged, err := s.Put(ctx, store.Record{Kind: artifact.KindPolicy, Name: "org/p", Bundle: []byte(`{"v":1}`)})
	if err != nil || !unchanged || r.Revision != 1 {
		t.Fatalf("re-put: %+v %v %v", r, unchanged, err)
	}
	r2, _, err := s.Put(ctx, store.Record{Kind: artifact.KindPolicy, Name: "org/p", Bundle: []byte(`{"v":2}`), Version: "2", Labels: map[string]string{"a": "b"}})
	if err != nil || r2.Revision != 2 {
		t.Fatalf("second put: %+v %v", r2, err)
	}
	// a name sharing the prefix must not appear in the history
	if _, _, err := s.Put(ctx, store.Record{Kind: artifact.KindPolicy, Name: "org/p/x", Bundle: []byte(`x`)}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(ctx, artifact.KindPolicy, "org/p")
	if err != nil || got.Revision != 2 || string(got.Bundle) != `{"v":2}` || got.Labels["a"] != "b" {
		t.Fatalf("get: %+v %v", got, err)
	}
	h, err := s.History(ctx, artifact.KindPolicy, "org/p")
	if err != nil || len(h) != 2 {
		t.Fatalf("history: %v %v", h, err)
	}
	if !bytes.Equal(h[0].Bundle, []byte(`{"v":1}`)) || h[0].Signer != "k1" || h[1].Revision != 2 {
		t.Fatalf("history contents: %+v", h)
	}
	// deletion is a new revision; history is kept
	d, _, err := s.Put(ctx, store.Record{Kind: artifact.KindPolicy, Name: "org/p", Bundle: []byte(`tomb`), Deleted: true})
	if err != nil || d.Revision != 3 || !d.Deleted {
		t.Fatalf("delete: %+v %v", d, err)
	}
	list, rev, err := s.List(ctx, artifact.KindPolicy)
	if err != nil || len(list) != 2 || rev == 0 || !list[0].Deleted || list[1].Name != "org/p/x" {
		t.Fatalf("list: %+v %v", list, err)
	}
	if _, err := s.Get(ctx, artifact.KindPolicy, "nope"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("missing: %v", err)
	}
}

func TestPutRejects(t *testing.T) {
	cli, _ := etcdtest.Etcd(t)
	s := store.New(cli, store.Options{MaxBytes: 100})
	ctx := context.Background()
	tests := []struct {
		name string
		rec  store.Record
		want error
	}{
		{"oversized", store.Record{Kind: artifact.KindPolicy, Name: "p", Bundle: bytes.Repeat([]byte("x"), 101)}, store.ErrTooLarge},
		{"unknown kind", store.Record{Kind: "Bogus", Name: "p", Bundle: []byte("x")}, store.ErrInvalid},
		{"bad name", store.Record{Kind: artifact.KindPolicy, Name: "../p", Bundle: []byte("x")}, store.ErrInvalid},
		{"empty", store.Record{Kind: artifact.KindPolicy, Name: "p"}, store.ErrInvalid},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, _, err := s.Put(ctx, tc.rec); !errors.Is(err, tc.want) {
				t.Fatalf("got %v want %v", err, tc.want)
			}
		})
	}
	if l, _, _ := s.List(ctx, artifact.KindPolicy); len(l) != 0 {
		t.Fatalf("rejected puts stored %d records", len(l))
	}
}

// TestConcurrentPutsAppendOnly: concurrent writers each get a revision
// or a rollback refusal, never a lost update, and the stored versions only
// ever increase (the version check runs in the writing transaction).
func TestConcurrentPutsAppendOnly(t *testing.T) {
	cli, _ := etcdtest.Etcd(t)
	s := store.New(cli, store.Options{})
	ctx := context.Background()
	errs := make(chan error, 8)
	for i := range 8 {
		go func() {
			_, _, err := s.Put(ctx, store.Record{Kind: artifact.KindPolicy, Name: "p", Bundle: []byte{byte('a' + i)}, Version: strconv.Itoa(i + 1)})
			errs <- err
		}()
	}
	stored := 0
	for range 8 {
		switch err := <-errs; {
		case err == nil:
			stored++
		case !errors.Is(err, artifact.ErrRollback):
			t.Fatal(err)
		}
	}
	h, err := s.History(ctx, artifact.KindPolicy, "p")
	if err != nil || len(h) != stored || stored == 0 {
		t.Fatalf("history %d, %d stored, %v", len(h), stored, err)
	}
	for i, r := range h {
		if r.Revision != int64(i+1) {
			t.Fatalf("revision %d at %d", r.Revision, i)
		}
		if i > 0 {
			if c, _ := artifact.CompareVersions(r.Version, h[i-1].Version); c <= 0 {
				t.Fatalf("version %q after %q", r.Version, h[i-1].Version)
			}
		}
	}
}

func TestManyListsInBatches(t *testing.T) {
	cli, _ := etcdtest.Etcd(t)
	s := store.New(cli, store.Options{})
	ctx := context.Background()
	for i := range 300 {
		if _, _, err := s.Put(ctx, store.Record{Kind: artifact.KindEvidence, Name: "e/" + strings.Repeat("x", i%5) + string(rune('a'+i%26)) + time.Duration(i).String(), Bundle: []byte{byte(i)}}); err != nil {
			t.Fatal(err)
		}
	}
	l, _, err := s.List(ctx, artifact.KindEvidence)
	if err != nil || len(l) != 300 {
		t.Fatalf("list %d %v", len(l), err)
	}
}

func TestWatchReportsKinds(t *testing.T) {
	cli, _ := etcdtest.Etcd(t)
	s := store.New(cli, store.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rev, err := s.CurrentRevision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan []artifact.Kind, 10)
	go s.Watch(ctx, rev, func(k []artifact.Kind) { got <- k })
	if _, _, err := s.Put(ctx, store.Record{Kind: artifact.KindPolicy, Name: "p", Bundle: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	select {
	case k := <-got:
		if len(k) != 1 || k[0] != artifact.KindPolicy {
			t.Fatalf("kinds %v", k)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no watch event")
	}
}

func TestEvents(t *testing.T) {
	cli, _ := etcdtest.Etcd(t)
	s := store.New(cli, store.Options{})
	ctx := context.Background()
	for _, e := range []string{"a", "b", "c"} {
		if err := s.AppendEvent(ctx, "registry", "x/y", []byte(e)); err != nil {
			t.Fatal(err)
		}
	}
	_ = s.AppendEvent(ctx, "registry", "x/y/z", []byte("other"))
	ev, err := s.Events(ctx, "registry", "x/y")
	if err != nil || len(ev) != 3 || string(ev[2]) != "c" {
		t.Fatalf("events %q %v", ev, err)
	}
}

func TestUnavailable(t *testing.T) {
	cli := etcdtest.Client(t, "http://127.0.0.1:1")
	s := store.New(cli, store.Options{Attempts: 2, Backoff: 10 * time.Millisecond, AttemptTimeout: 200 * time.Millisecond})
	_, _, err := s.Put(context.Background(), store.Record{Kind: artifact.KindPolicy, Name: "p", Bundle: []byte("x")})
	if !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("got %v", err)
	}
}

// TestWatchCompactedRelists: a watch that starts at a compacted revision
// reports every kind so the caller relists, then keeps following changes.
func TestWatchCompactedRelists(t *testing.T) {
	cli, _ := etcdtest.Etcd(t)
	s := store.New(cli, store.Options{Backoff: 10 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	old, _ := s.CurrentRevision(ctx)
	for i := range 3 {
		if _, _, err := s.Put(ctx, store.Record{Kind: artifact.KindPolicy, Name: "p", Bundle: []byte{byte(i)}, Version: strconv.Itoa(i + 1)}); err != nil {
			t.Fatal(err)
		}
	}
	cur, _ := s.CurrentRevision(ctx)
	if _, err := cli.Compact(ctx, cur); err != nil {
		t.Fatal(err)
	}
	got := make(chan []artifact.Kind, 10)
	go s.Watch(ctx, old, func(k []artifact.Kind) { got <- k })
	select {
	case k := <-got:
		if len(k) != len(artifact.Kinds()) {
			t.Fatalf("after compaction got %v, want every kind", k)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no relist after compaction")
	}
	if _, _, err := s.Put(ctx, store.Record{Kind: artifact.KindEvidence, Name: "e", Bundle: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	select {
	case k := <-got:
		if len(k) != 1 || k[0] != artifact.KindEvidence {
			t.Fatalf("after re-watch got %v", k)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no event after re-watch")
	}
}

// TestWatchRecords: every latest record of the kind written after fromRev
// arrives in order with its bundle, deletions included, other kinds not;
// after compaction every latest record is delivered again.
func TestWatchRecords(t *testing.T) {
	cli, _ := etcdtest.Etcd(t)
	s := store.New(cli, store.Options{Backoff: 10 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, _, err := s.Put(ctx, store.Record{Kind: artifact.KindPolicy, Name: "before", Bundle: []byte("0")}); err != nil {
		t.Fatal(err)
	}
	rev, _ := s.CurrentRevision(ctx)
	got := make(chan store.Record, 10)
	go s.WatchRecords(ctx, artifact.KindPolicy, rev, func(r store.Record) { got <- r })
	for _, r := range []store.Record{
		{Kind: artifact.KindEvidence, Name: "other", Bundle: []byte("e")},
		{Kind: artifact.KindPolicy, Name: "p", Bundle: []byte("1")},
		{Kind: artifact.KindPolicy, Name: "p", Bundle: []byte("2"), Version: "2"},
		{Kind: artifact.KindPolicy, Name: "p", Bundle: []byte("t"), Deleted: true},
	} {
		if _, _, err := s.Put(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	next := func() store.Record {
		t.Helper()
		select {
		case r := <-got:
			return r
		case <-time.After(5 * time.Second):
			t.Fatal("no record")
		}
		return store.Record{}
	}
	for i, want := range []string{"1", "2", "t"} {
		r := next()
		if r.Name != "p" || string(r.Bundle) != want || r.Revision != int64(i+1) || r.Deleted != (want == "t") || r.ModRevision == 0 {
			t.Fatalf("record %d: %+v %q", i, r, r.Bundle)
		}
	}
	cur, _ := s.CurrentRevision(ctx)
	if _, err := cli.Compact(ctx, cur); err != nil {
		t.Fatal(err)
	}
	// A compacted start revision relists every latest Policy.
	relisted := make(chan store.Record, 10)
	go s.WatchRecords(ctx, artifact.KindPolicy, rev, func(r store.Record) { relisted <- r })
	names := map[string]bool{}
	for range 2 {
		select {
		case r := <-relisted:
			names[r.Name] = true
		case <-time.After(5 * time.Second):
			t.Fatal("no relist after compaction")
		}
	}
	if !names["before"] || !names["p"] {
		t.Fatalf("relisted %v", names)
	}
}

// TestCreateEventOnce: an event keyed by the caller's number is written
// once; the second writer is told, and the first value stays.
func TestCreateEventOnce(t *testing.T) {
	cli, _ := etcdtest.Etcd(t)
	s := store.New(cli, store.Options{})
	ctx := context.Background()
	for i, want := range []bool{true, false} {
		created, err := s.CreateEvent(ctx, "claims", "x", 7, []byte{byte('a' + i)})
		if err != nil || created != want {
			t.Fatalf("write %d: %v %v", i, created, err)
		}
	}
	if created, err := s.CreateEvent(ctx, "claims", "x", 8, []byte("c")); err != nil || !created {
		t.Fatalf("next seq: %v %v", created, err)
	}
	ev, err := s.Events(ctx, "claims", "x")
	if err != nil || len(ev) != 2 || string(ev[0]) != "a" || string(ev[1]) != "c" {
		t.Fatalf("events %q %v", ev, err)
	}
	if _, err := s.CreateEvent(ctx, "claims", "../x", 1, nil); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("bad name: %v", err)
	}
}
