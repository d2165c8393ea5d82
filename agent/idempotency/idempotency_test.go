package idempotency

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func open(t *testing.T, dir string, c *clock) *Store {
	t.Helper()
	s, err := Open(dir, Options{Now: c.now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// A binding survives a restart for its retention, then is forgotten; the
// file never holds the key.
func TestBindDurableForRetention(t *testing.T) {
	dir := t.TempDir()
	c := &clock{t: time.Unix(1_700_000_000, 0)}
	s := open(t, dir, c)
	if _, repeat, err := s.Bind("key-1", "dev/pay", "alice", "sha256:a", time.Hour); err != nil || repeat {
		t.Fatalf("first bind: repeat %v err %v", repeat, err)
	}
	if err := s.Finish(s.Ref("key-1"), "pay-a", "OUTCOME_CLASS_SUCCESS"); err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	raw, _ := os.ReadFile(filepath.Join(dir, bindingsFile))
	if strings.Contains(string(raw), "key-1") {
		t.Fatalf("bindings file holds the raw key: %s", raw)
	}
	s2 := open(t, dir, c)
	b, repeat, err := s2.Bind("key-1", "dev/pay", "alice", "sha256:a", time.Hour)
	if err != nil || !repeat || b.Entry != "pay-a" || b.Outcome != "OUTCOME_CLASS_SUCCESS" {
		t.Fatalf("after restart: %+v repeat %v err %v", b, repeat, err)
	}
	c.add(time.Hour + time.Second)
	s2.Close()
	s3 := open(t, dir, c)
	if _, ok := s3.Lookup("key-1"); ok {
		t.Fatal("binding kept past its retention")
	}
	if _, repeat, err := s3.Bind("key-1", "dev/pay", "alice", "sha256:other", 0); err != nil || repeat {
		t.Fatalf("expired key rebinds fresh: repeat %v err %v", repeat, err)
	}
}

// The same key with other arguments, or from another principal or tool, is
// refused and leaves the binding as it was.
func TestBindRefusesReuse(t *testing.T) {
	c := &clock{t: time.Unix(1_700_000_000, 0)}
	s := open(t, t.TempDir(), c)
	if _, _, err := s.Bind("k", "dev/pay", "alice", "sha256:a", 0); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		scope, digest string
		want          error
	}{
		{"dev/pay", "sha256:b", ErrKeyReused},
		{"ops/pay", "sha256:a", ErrKeyScope},
		{"dev/refund", "sha256:a", ErrKeyScope},
	} {
		_, _, err := s.Bind("k", tc.scope, "alice", tc.digest, 0)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s %s: err %v, want %v", tc.scope, tc.digest, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "\"k\"") {
			t.Errorf("error repeats the key: %v", err)
		}
	}
	if b, _ := s.Lookup("k"); b.Scope != "dev/pay" || b.Digest != "sha256:a" {
		t.Fatalf("binding changed: %+v", b)
	}
}

func TestCheckKey(t *testing.T) {
	for _, k := range []string{"", strings.Repeat("a", MaxKeyLen+1), "has space", "tab\t", "é", "nul\x00"} {
		if err := CheckKey(k); !errors.Is(err, ErrKeyInvalid) {
			t.Errorf("%q: %v, want ErrKeyInvalid", k, err)
		}
	}
	for _, k := range []string{"a", strings.Repeat("z", MaxKeyLen), NewKey(), "8e03978e-40d5-43e8-bc93-6894a57f9324"} {
		if err := CheckKey(k); err != nil {
			t.Errorf("%q: %v", k, err)
		}
	}
	if NewKey() == NewKey() {
		t.Fatal("NewKey repeats")
	}
}

// A torn last line (crash mid-append) does not lose the earlier bindings.
func TestTornLine(t *testing.T) {
	dir := t.TempDir()
	c := &clock{t: time.Unix(1_700_000_000, 0)}
	s := open(t, dir, c)
	if _, _, err := s.Bind("k", "dev/pay", "alice", "sha256:a", 0); err != nil {
		t.Fatal(err)
	}
	s.Close()
	f, _ := os.OpenFile(filepath.Join(dir, bindingsFile), os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"ref":"hmac-sha256:ab`)
	f.Close()
	s2 := open(t, dir, c)
	if _, ok := s2.Lookup("k"); !ok {
		t.Fatal("binding lost after a torn line")
	}
}

// Concurrent binds of one key with different payloads: exactly one wins.
func TestBindConcurrent(t *testing.T) {
	c := &clock{t: time.Unix(1_700_000_000, 0)}
	s := open(t, t.TempDir(), c)
	var wg sync.WaitGroup
	var mu sync.Mutex
	won := 0
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, repeat, err := s.Bind("k", "dev/pay", "alice", "sha256:"+string(rune('a'+i)), 0)
			if err == nil && !repeat {
				mu.Lock()
				won++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if won != 1 {
		t.Fatalf("%d first binds, want 1", won)
	}
}

func FuzzCheckKey(f *testing.F) {
	f.Add("abc")
	f.Add("")
	f.Add("a b")
	f.Fuzz(func(t *testing.T, k string) {
		err := CheckKey(k)
		if err != nil && !errors.Is(err, ErrKeyInvalid) {
			t.Fatalf("untyped error %v", err)
		}
		if err == nil && (len(k) == 0 || len(k) > MaxKeyLen || strings.ContainsAny(k, " \t\n")) {
			t.Fatalf("accepted %q", k)
		}
	})
}

func BenchmarkBind(b *testing.B) {
	s, err := Open(b.TempDir(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	for i := 0; b.Loop(); i++ {
		k := NewKey()
		if _, _, err := s.Bind(k, "dev/pay", "alice", "sha256:a", time.Hour); err != nil {
			b.Fatal(err)
		}
		if err := s.Finish(s.Ref(k), "e", "OUTCOME_CLASS_SUCCESS"); err != nil {
			b.Fatal(err)
		}
	}
}

// A key in _meta that is not a JSON string is a malformed key, not "no
// key"; the error names the type and never the value.
func TestFromMeta(t *testing.T) {
	if k, present, err := FromMeta(map[string]any{"other": 1}); k != "" || present || err != nil {
		t.Fatalf("absent: %q %v %v", k, present, err)
	}
	if k, present, err := FromMeta(map[string]any{MetaKey: "order-1"}); k != "order-1" || !present || err != nil {
		t.Fatalf("string: %q %v %v", k, present, err)
	}
	for _, c := range []struct {
		v    any
		want string
	}{{float64(4242), "a number"}, {map[string]any{"k": "v-secret"}, "an object"}, {[]any{"v-secret"}, "an array"}, {true, "a boolean"}, {nil, "null"}} {
		k, present, err := FromMeta(map[string]any{MetaKey: c.v})
		if k != "" || !present || !errors.Is(err, ErrKeyInvalid) || !strings.Contains(err.Error(), c.want) ||
			strings.Contains(err.Error(), "4242") || strings.Contains(err.Error(), "v-secret") {
			t.Fatalf("%v: %q %v %v", c.v, k, present, err)
		}
	}
}

// Scope names the tenant class, the principal class and the tool, and no
// two different triples share a scope: classes come from configuration or
// an identity provider's claims, so one cannot be spelled into another's
// scope.
func TestScopeKeepsTriplesApart(t *testing.T) {
	if got := Scope("", "dev", "docs/lookup"); got != "dev/docs/lookup" {
		t.Fatalf("no tenant: %q", got)
	}
	if got := Scope("acme", "dev", "docs/lookup"); got != "acme;dev/docs/lookup" {
		t.Fatalf("tenant: %q", got)
	}
	triples := [][3]string{
		{"acme", "dev", "docs/lookup"},
		{"", "acme;dev", "docs/lookup"},
		{"", "acme%3Bdev", "docs/lookup"},
		{"acme;dev", "x", "docs/lookup"},
		{"acme", "dev/docs", "lookup"},
		{"", "dev", "docs/lookup"},
		{"", "dev/docs", "lookup"},
		{"a;b", "c", "t/u"},
		{"a", "b;c", "t/u"},
	}
	seen := map[string][3]string{}
	for _, tr := range triples {
		sc := Scope(tr[0], tr[1], tr[2])
		if other, dup := seen[sc]; dup {
			t.Fatalf("%q and %q share scope %q", other, tr, sc)
		}
		seen[sc] = tr
	}
}
