package artifact

import (
	"errors"
	"testing"
	"time"

	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"google.golang.org/protobuf/types/known/timestamppb"
)

func TestCompareVersions(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"", "0", 0}, {"", "1", -1}, {"1", "1.0", 0}, {"2", "10", -1}, {"1.4.0", "1.4.1", -1},
		{"1.10", "1.9", 1}, {"007", "7", 0}, {"3", "1.4.0", 1}, {"99999999999999999999999", "1", 1},
	} {
		got, err := CompareVersions(c.a, c.b)
		if err != nil || got != c.want {
			t.Errorf("CompareVersions(%q, %q) = %d, %v; want %d", c.a, c.b, got, err, c.want)
		}
	}
	for _, bad := range []string{"v2", "window-5", "1..2", "-1", ".1", "1.", "1 "} {
		if _, err := CompareVersions(bad, "1"); !errors.Is(err, ErrBadVersion) {
			t.Errorf("CompareVersions(%q) err = %v, want ErrBadVersion", bad, err)
		}
	}
}

func TestNextVersion(t *testing.T) {
	// A zero component stays "0": NextVersion("0.1.0") was ".1.1", not a
	// version, so a lifecycle transition or a re-qualification of an entry
	// versioned 0.x wrote an artifact that could not be stored.
	for v, want := range map[string]string{"": "1", "3": "4", "9": "10", "1.4.9": "1.4.10", "x": "1", "199": "200",
		"0": "1", "0.0": "0.1", "0.1.0": "0.1.1", "0.9": "0.10", "1.0.0": "1.0.1", "01.02": "1.3", "0.0.9": "0.0.10"} {
		if got := NextVersion(v); got != want {
			t.Errorf("NextVersion(%q) = %q, want %q", v, got, want)
		}
		if err := ValidVersion(NextVersion(v)); err != nil {
			t.Errorf("NextVersion(%q) = %q: %v", v, NextVersion(v), err)
		}
	}
}

func TestCheckNewer(t *testing.T) {
	if err := CheckNewer(KindPolicy, "p", "", "d", "", "", false); err != nil {
		t.Errorf("first write: %v", err)
	}
	if err := CheckNewer(KindPolicy, "p", "2", "d2", "1", "d1", true); err != nil {
		t.Errorf("newer: %v", err)
	}
	if err := CheckNewer(KindPolicy, "p", "2", "d2", "2", "d2", true); err != nil {
		t.Errorf("same bytes again: %v", err)
	}
	for _, c := range [][2]string{{"1", "d1"}, {"2", "dX"}, {"", "d0"}} {
		err := CheckNewer(KindPolicy, "p", c[0], c[1], "2", "d2", true)
		var ve *VersionError
		if !errors.Is(err, ErrRollback) || !errors.As(err, &ve) || ve.Reason != ReasonRollback {
			t.Errorf("version %q over 2: err = %v, want rollback", c[0], err)
		}
	}
	if err := CheckNewer(KindPolicy, "p", "v3", "d", "2", "d2", true); !errors.Is(err, ErrBadVersion) {
		t.Errorf("bad version: %v", err)
	}
}

func TestCheckExpiry(t *testing.T) {
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	o := New(KindPolicy, "p", &mcpreadyv1.Policy{Provenance: &mcpreadyv1.Provenance{ExpiresAt: timestamppb.New(now)}})
	if err := CheckExpiry(o, now); !errors.Is(err, ErrExpired) {
		t.Errorf("expired: %v", err)
	}
	if err := CheckExpiry(o, now.Add(-time.Second)); err != nil {
		t.Errorf("not expired: %v", err)
	}
	if err := CheckExpiry(New(KindPolicy, "p", &mcpreadyv1.Policy{}), now); err != nil {
		t.Errorf("no expiry: %v", err)
	}
}

// FuzzCompareVersions checks that the order is total and consistent:
// antisymmetric, equal versions compare equal to the same third version,
// NextVersion is strictly greater, and MaxVersion is an upper bound.
func FuzzCompareVersions(f *testing.F) {
	for _, s := range [][3]string{{"1", "2", "3"}, {"1.4.0", "1.4", "01.4"}, {"", "0", "0.0.1"}, {"9", "10", "99.9"}, {"x", "1", ""}} {
		f.Add(s[0], s[1], s[2])
	}
	f.Fuzz(func(t *testing.T, a, b, c string) {
		ab, errA := CompareVersions(a, b)
		ba, errB := CompareVersions(b, a)
		if (errA == nil) != (errB == nil) {
			t.Fatalf("asymmetric errors %v / %v", errA, errB)
		}
		if errA != nil {
			return
		}
		if ab != -ba {
			t.Fatalf("Compare(%q,%q)=%d but Compare(%q,%q)=%d", a, b, ab, b, a, ba)
		}
		if n, _ := CompareVersions(NextVersion(a), a); n != 1 {
			t.Fatalf("NextVersion(%q)=%q is not greater", a, NextVersion(a))
		}
		if err := ValidVersion(NextVersion(a)); err != nil {
			t.Fatalf("NextVersion(%q)=%q: %v", a, NextVersion(a), err)
		}
		if m := MaxVersion(a, b); mustCmp(t, m, a) < 0 || mustCmp(t, m, b) < 0 {
			t.Fatalf("MaxVersion(%q,%q)=%q", a, b, m)
		}
		bc, err := CompareVersions(b, c)
		if err != nil {
			return
		}
		ac := mustCmp(t, a, c)
		if ab <= 0 && bc <= 0 && ac > 0 {
			t.Fatalf("not transitive: %q <= %q <= %q but %q > %q", a, b, c, a, c)
		}
		if ab == 0 && ac != bc {
			t.Fatalf("equal %q and %q compare differently with %q", a, b, c)
		}
	})
}

func mustCmp(t *testing.T, a, b string) int {
	c, err := CompareVersions(a, b)
	if err != nil {
		t.Fatalf("CompareVersions(%q,%q): %v", a, b, err)
	}
	return c
}

// FuzzCheckTombstone: a tombstone deletes only when it names exactly the
// held kind, name, version and digest; never panics.
func FuzzCheckTombstone(f *testing.F) {
	f.Add("Policy", "org/p", "1", "sha256:aa", "Policy", "org/p", "1", "sha256:aa")
	f.Add("Policy", "org/p", "1", "sha256:aa", "Policy", "org/p", "2", "sha256:aa")
	f.Add("", "", "", "", "Policy", "org/p", "", "")
	f.Fuzz(func(t *testing.T, tk, tn, tv, td, hk, hn, hv, hd string) {
		ts := &mcpreadyv1.Tombstone{TargetKind: tk, TargetName: tn, TargetVersion: tv, TargetDigest: td}
		err := CheckTombstone(ts, Kind(hk), hn, hv, hd)
		exact := tk == hk && tn == hn && tv == hv && td == hd && hd != ""
		if (err == nil) != exact {
			t.Fatalf("CheckTombstone(%v, %q %q %q %q) = %v", ts, hk, hn, hv, hd, err)
		}
		if err != nil && !errors.Is(err, ErrTombstone) {
			t.Fatalf("error %v is not ErrTombstone", err)
		}
	})
}

// FuzzCheckNewer: the rollback check accepts exactly a strictly newer
// version, or the held bytes again; never panics.
func FuzzCheckNewer(f *testing.F) {
	f.Add("2", "d2", "1", "d1", true)
	f.Add("1", "d1", "1", "d1", true)
	f.Add("1.0", "x", "1", "d1", true)
	f.Add("v2", "x", "1", "y", false)
	f.Fuzz(func(t *testing.T, v, d, held, heldDigest string, exists bool) {
		err := CheckNewer(KindPolicy, "p", v, d, held, heldDigest, exists)
		c, cerr := CompareVersions(v, held)
		switch {
		case cerr != nil:
			if !errors.Is(err, ErrBadVersion) {
				t.Fatalf("invalid version %q or %q: %v", v, held, err)
			}
		case !exists || c > 0 || (c == 0 && d != "" && d == heldDigest):
			if err != nil {
				t.Fatalf("CheckNewer(%q, %q held %q %q) = %v, want accepted", v, d, held, heldDigest, err)
			}
		default:
			if !errors.Is(err, ErrRollback) {
				t.Fatalf("CheckNewer(%q held %q) = %v, want rollback", v, held, err)
			}
		}
	})
}
