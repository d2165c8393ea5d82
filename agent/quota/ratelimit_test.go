package quota

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseRateLimit(t *testing.T) {
	for _, c := range []struct {
		name, rl, pol string
		want          []Hint
	}{
		{"current draft", `"default";r=0;t=30`, `"default";q=100;w=60`, []Hint{{Policy: "default", Remaining: 0, Known: true, Reset: 30 * time.Second, Quota: 100, Window: time.Minute}}},
		{"two policies", `"burst";r=5;t=1, "day";r=900;t=3600`, `"burst";q=10;w=1, "day";q=1000;w=86400`,
			[]Hint{{Policy: "burst", Remaining: 5, Known: true, Reset: time.Second, Quota: 10, Window: time.Second},
				{Policy: "day", Remaining: 900, Known: true, Reset: time.Hour, Quota: 1000, Window: 24 * time.Hour}}},
		{"token name, unknown parameters", `day;r=1;t=2;pk=:AAE=:`, ``, []Hint{{Policy: "day", Remaining: 1, Known: true, Reset: 2 * time.Second}}},
		{"older dictionary form", `limit=100, remaining=0, reset=7`, ``, []Hint{{Remaining: 0, Known: true, Reset: 7 * time.Second, Quota: 100}}},
		{"reset capped", `"d";r=0;t=999999`, ``, []Hint{{Policy: "d", Known: true, Reset: time.Hour}}},
		{"empty", ``, `"d";q=1;w=1`, nil},
	} {
		got, err := ParseRateLimit(c.rl, c.pol)
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: %+v, %v; want %+v", c.name, got, err, c.want)
		}
	}
	for _, bad := range [][2]string{
		{`"default";r=-1`, ``}, {`"default";r=abc`, ``}, {`"open`, ``}, {`"d";r`, ``}, {`limit=x`, ``},
		{`"d";r=1`, `"d";q=1e9`}, {strings.Repeat(`"a";r=1,`, 20) + `"a"`, ``}, {strings.Repeat("x", 5000), ``},
		{`"d";r=1234567890123456`, ``}, {`a b;r=1`, ``},
	} {
		if h, err := ParseRateLimit(bad[0], bad[1]); !errors.Is(err, ErrRateLimitField) || h != nil {
			t.Errorf("%q %q: %v, %v; want ErrRateLimitField", bad[0], bad[1], h, err)
		}
	}
}

// A spent policy marks the key until its reset; a later response with
// quota left clears it; a hint without a reset marks nothing.
func TestHints(t *testing.T) {
	h := NewHints()
	now := time.Unix(1_700_000_000, 0)
	h.Observe("a", []Hint{{Known: true, Remaining: 0, Reset: 10 * time.Second}}, now)
	h.Observe("b", []Hint{{Known: true, Remaining: 0}}, now)
	if !h.Exhausted("a", now.Add(9*time.Second)) || h.Exhausted("a", now.Add(10*time.Second)) || h.Exhausted("b", now) {
		t.Fatal("exhaustion window wrong")
	}
	h.Observe("a", []Hint{{Known: true, Remaining: 3, Reset: 10 * time.Second}}, now.Add(time.Second))
	if h.Exhausted("a", now.Add(2*time.Second)) {
		t.Fatal("a response with quota left did not clear the mark")
	}
}

func FuzzParseRateLimit(f *testing.F) {
	for _, s := range [][2]string{{`"default";r=0;t=30`, `"default";q=100;w=60`}, {`limit=1, remaining=0, reset=3`, ``}, {`"a\"b";r=1`, ``}, {`a;b=;c`, `"`}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, rl, pol string) {
		hs, err := ParseRateLimit(rl, pol)
		if err != nil {
			if !errors.Is(err, ErrRateLimitField) || hs != nil {
				t.Fatalf("error %v with hints %v", err, hs)
			}
			return
		}
		if len(hs) > maxFieldItems {
			t.Fatalf("%d hints", len(hs))
		}
		for _, h := range hs {
			if h.Remaining < 0 || h.Quota < 0 || h.Reset < 0 || h.Reset > maxReset || h.Window < 0 || h.Window > maxWindow {
				t.Fatalf("out of range: %+v", h)
			}
		}
	})
}
