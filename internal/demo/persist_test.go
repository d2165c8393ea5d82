package demo

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/mcpready/mcpready/sign"
)

func TestSignOrReuse(t *testing.T) {
	dir := t.TempDir()
	now := time.Now().UTC().Truncate(time.Second)
	servers := listAll(t, startServers(t))
	build := func(at time.Time) []Item {
		items, err := Build(Params{Keys: testKeys, AgentID: testAgent, Servers: servers, Now: at})
		if err != nil {
			t.Fatal(err)
		}
		return items
	}
	first, err := SignOrReuse(dir, build(now), testKeys)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range first {
		base := filepath.Join(dir, FileBase(s.Item))
		for _, ext := range []string{".yaml", ".payload.json", ".bundle.json"} {
			if _, err := os.Stat(base + ext); err != nil {
				t.Fatal(err)
			}
		}
		b, _ := os.ReadFile(base + ".bundle.json")
		if !bytes.Equal(b, s.Bundle) {
			t.Fatalf("%s: bundle on disk differs from the returned one", base)
		}
		if _, err := sign.VerifyWithKey(b, testKeys[s.Key].Public()); err != nil {
			t.Fatalf("%s: %v", base, err)
		}
	}
	// Same content: every bundle is reused byte for byte.
	again, err := SignOrReuse(dir, build(now), testKeys)
	if err != nil {
		t.Fatal(err)
	}
	for i := range first {
		if !bytes.Equal(first[i].Bundle, again[i].Bundle) {
			t.Errorf("%s re-signed although unchanged", FileBase(first[i].Item))
		}
	}
	// New content: re-signed.
	later, err := SignOrReuse(dir, build(now.Add(time.Hour)), testKeys)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(first[0].Bundle, later[0].Bundle) {
		t.Error("changed artifact kept its old bundle")
	}
	// A tampered bundle is never reused.
	base := filepath.Join(dir, FileBase(later[1].Item))
	os.WriteFile(base+".bundle.json", []byte("{}"), 0o644)
	fixed, err := SignOrReuse(dir, build(now.Add(time.Hour)), testKeys)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sign.VerifyWithKey(fixed[1].Bundle, testKeys[fixed[1].Key].Public()); err != nil {
		t.Fatalf("tampered bundle was reused: %v", err)
	}
}

func TestState(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	s, err := LoadState(path)
	if err != nil || !s.IssuedAt.IsZero() {
		t.Fatalf("missing state: %+v %v", s, err)
	}
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	s = s.Fresh(now)
	if !s.IssuedAt.Equal(now) {
		t.Fatalf("IssuedAt %v, want %v", s.IssuedAt, now)
	}
	s.Ports = map[string]int{ServerDocsA: 41000}
	if err := s.Save(path); err != nil {
		t.Fatal(err)
	}
	got, err := LoadState(path)
	if err != nil || !got.IssuedAt.Equal(now) || got.Ports[ServerDocsA] != 41000 {
		t.Fatalf("loaded %+v %v", got, err)
	}
	if f := got.Fresh(now.Add(time.Hour)); !f.IssuedAt.Equal(now) {
		t.Errorf("state refreshed after an hour")
	}
	if f := got.Fresh(now.Add(13 * time.Hour)); f.IssuedAt.Equal(now) {
		t.Errorf("state not refreshed after 13 hours")
	}
	os.WriteFile(path, []byte("{"), 0o600)
	if _, err := LoadState(path); err == nil {
		t.Error("corrupt state accepted")
	}
}
