package idempotency

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

// A client that sends a new key with every call made the store grow
// without bound, in memory and on disk, for each key's retention (a day by
// default), one fsync per key. Now the live bindings are capped overall
// and per caller (a principal of a tenant and principal class): past a cap a new key is
// refused with ErrFull, bound keys keep working, another caller keeps its
// share, and room comes back as bindings expire, across a restart too.
func TestBindingLimits(t *testing.T) {
	c := &clock{t: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}
	dir := t.TempDir()
	s, err := Open(dir, Options{Now: c.now, MaxKeys: 6, MaxKeysPerCaller: 3})
	if err != nil {
		t.Fatal(err)
	}
	bind := func(s *Store, key, scope string) error {
		_, _, err := s.Bind(key, scope, "alice", "sha256:d", time.Hour)
		return err
	}
	for i := range 3 {
		if err := bind(s, fmt.Sprintf("flood-%d", i), Scope("acme", "dev", "echo")); err != nil {
			t.Fatal(err)
		}
	}
	if err := bind(s, "flood-3", Scope("acme", "dev", "other")); !errors.Is(err, ErrFull) {
		t.Fatalf("fourth key of one caller: %v, want ErrFull", err)
	}
	if _, repeat, err := s.Bind("flood-0", Scope("acme", "dev", "echo"), "alice", "sha256:d", time.Hour); err != nil || !repeat {
		t.Fatalf("a bound key: repeat %v, %v", repeat, err)
	}
	for _, scope := range []string{Scope("acme", "ops", "echo"), Scope("", "dev", "echo")} { // other callers
		if err := bind(s, "other-"+scope, scope); err != nil {
			t.Fatalf("%s: %v", scope, err)
		}
	}
	// Another principal of the full caller's tenant and class has a share
	// of its own: one principal cannot use up the others'.
	if _, _, err := s.Bind("bobs", Scope("acme", "dev", "echo"), "bob", "sha256:d", time.Hour); err != nil {
		t.Fatalf("another principal of the same classes: %v", err)
	}
	if err := bind(s, "sixth", Scope("globex", "dev", "echo")); !errors.Is(err, ErrFull) {
		t.Fatalf("sixth key overall: %v, want ErrFull", err)
	}
	_ = s.Close()
	c.add(2 * time.Hour) // every binding expires
	s, err = Open(dir, Options{Now: c.now, MaxKeys: 6, MaxKeysPerCaller: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := range 3 {
		if err := bind(s, fmt.Sprintf("later-%d", i), Scope("acme", "dev", "echo")); err != nil {
			t.Fatalf("after expiry: %v", err)
		}
	}
	// Expiry without a restart frees room too.
	c.add(2 * time.Hour)
	if err := bind(s, "after-expiry", Scope("acme", "dev", "echo")); err != nil {
		t.Fatalf("after expiry in place: %v", err)
	}
}
