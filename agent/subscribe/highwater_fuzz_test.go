package subscribe

import (
	"testing"

	"github.com/mcpready/mcpready/artifact"
)

// FuzzMarksRaise: raising a mark never lowers it, never clears a deleted
// mark at the same version, and reports a change exactly when the mark
// changed.
func FuzzMarksRaise(f *testing.F) {
	f.Add("1", "d1", false, "2", "d2", false)
	f.Add("4", "d4", false, "4", "d4", true)
	f.Add("4", "d4", true, "4", "d4", false)
	f.Add("1.0", "a", false, "1", "b", true)
	f.Add("", "", false, "v2", "x", false)
	f.Fuzz(func(t *testing.T, v1, d1 string, del1 bool, v2, d2 string, del2 bool) {
		if artifact.ValidVersion(v1) != nil {
			return // readMarks and raiseMarks hold valid versions only
		}
		ms := marks{}
		ms.raise(artifact.KindPolicy, "p", mark{Version: v1, Digest: d1, Deleted: del1})
		before := ms[artifact.KindPolicy]["p"]
		changed := ms.raise(artifact.KindPolicy, "p", mark{Version: v2, Digest: d2, Deleted: del2})
		after := ms[artifact.KindPolicy]["p"]
		if changed != (after != before) {
			t.Fatalf("changed %v, but %+v -> %+v", changed, before, after)
		}
		c, err := artifact.CompareVersions(after.Version, before.Version)
		if err != nil || c < 0 {
			t.Fatalf("lowered: %+v -> %+v (%v)", before, after, err)
		}
		if c == 0 && before.Deleted && !after.Deleted {
			t.Fatalf("a deleted mark was cleared: %+v -> %+v", before, after)
		}
	})
}
