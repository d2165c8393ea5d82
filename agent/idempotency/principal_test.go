package idempotency

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"
)

// A key is bound to the principal that first used it: another principal
// of the same tenant and principal class, same tool and same arguments, is
// ErrKeyScope, not a repeat; the store holds a keyed reference of the
// principal's name, never the name; the binding's principal survives a
// restart.
func TestBindPerPrincipal(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	scope := Scope("acme", "dev", "pay")
	if _, repeat, err := s.Bind("order-42", scope, "alice@example.com", "sha256:a", time.Hour); err != nil || repeat {
		t.Fatalf("first: %v %v", repeat, err)
	}
	if _, _, err := s.Bind("order-42", scope, "bob@example.com", "sha256:a", time.Hour); !errors.Is(err, ErrKeyScope) {
		t.Fatalf("another principal: %v, want ErrKeyScope", err)
	}
	_ = s.Close()
	if data, _ := os.ReadFile(filepath.Join(dir, bindingsFile)); bytes.Contains(data, []byte("alice")) {
		t.Fatalf("the principal's name is stored: %s", data)
	}
	s, err = Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, _, err := s.Bind("order-42", scope, "bob@example.com", "sha256:a", time.Hour); !errors.Is(err, ErrKeyScope) {
		t.Fatalf("another principal after a restart: %v, want ErrKeyScope", err)
	}
	if _, repeat, err := s.Bind("order-42", scope, "alice@example.com", "sha256:a", time.Hour); err != nil || !repeat {
		t.Fatalf("the principal's own repeat: %v %v", repeat, err)
	}
}

// A binding written before bindings named their principal is claimed by
// the first principal that repeats it (most likely the one retrying across
// the agent's upgrade); from then on it is that principal's, across a
// restart too.
func TestLegacyBindingClaimed(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	scope := Scope("", "dev", "pay")
	if _, _, err := s.Bind("order-7", scope, "alice", "sha256:a", time.Hour); err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	path := filepath.Join(dir, bindingsFile)
	data, _ := os.ReadFile(path)
	legacy := regexp.MustCompile(`"principal":"[^"]*",`).ReplaceAll(data, nil)
	if bytes.Equal(legacy, data) {
		t.Fatalf("no principal in the stored binding: %s", data)
	}
	if err := os.WriteFile(path, legacy, 0o600); err != nil {
		t.Fatal(err)
	}
	s, err = Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, repeat, err := s.Bind("order-7", scope, "alice", "sha256:a", time.Hour); err != nil || !repeat {
		t.Fatalf("the first repeat of a legacy binding: %v %v", repeat, err)
	}
	if _, _, err := s.Bind("order-7", scope, "bob", "sha256:a", time.Hour); !errors.Is(err, ErrKeyScope) {
		t.Fatalf("another principal after the claim: %v, want ErrKeyScope", err)
	}
	_ = s.Close()
	s, err = Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, _, err := s.Bind("order-7", scope, "bob", "sha256:a", time.Hour); !errors.Is(err, ErrKeyScope) {
		t.Fatalf("another principal after the claim and a restart: %v, want ErrKeyScope", err)
	}
}
