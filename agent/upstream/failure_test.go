package upstream

import (
	"math"
	"strconv"
	"testing"
	"time"
)

// An upstream's Retry-After is seconds or an HTTP date; a value too large
// for a time.Duration saturates instead of wrapping to a short or negative
// wait (which would retry at once against the upstream's request).
func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	for v, want := range map[string]time.Duration{
		"":                              0,
		"120":                           2 * time.Minute,
		"0":                             0,
		"-5":                            0,
		"1.5":                           0,
		"soon":                          0,
		"9223372036":                    9223372036 * time.Second,
		"9223372037":                    math.MaxInt64,
		"18446744074":                   math.MaxInt64, // ×1e9 wraps to about 0.3 s
		"99999999999999999":             math.MaxInt64,
		"99999999999999999999":          0, // not an int64: ignored, like any malformed value
		"Wed, 02 Dec 2026 12:00:30 GMT": 30 * time.Second,
		"Wed, 02 Dec 2026 11:00:00 GMT": 0,
		"Fri, 31 Dec 9999 23:59:59 GMT": math.MaxInt64,
	} {
		if got := parseRetryAfter(v, now); got != want {
			t.Errorf("Retry-After %q: %v, want %v", v, got, want)
		}
	}
}

func FuzzParseRetryAfter(f *testing.F) {
	for _, s := range []string{"120", "18446744074", "Fri, 31 Dec 9999 23:59:59 GMT", "-1", ""} {
		f.Add(s)
	}
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, v string) {
		d := parseRetryAfter(v, now)
		if d < 0 {
			t.Fatalf("Retry-After %q: negative wait %v", v, d)
		}
		if s, err := strconv.ParseInt(v, 10, 64); err == nil && s > 0 && d < time.Duration(min(s, math.MaxInt64/int64(time.Second)))*time.Second {
			t.Fatalf("Retry-After %q: %v is shorter than asked", v, d)
		}
	})
}
