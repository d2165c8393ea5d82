package seglog

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

func openT(t *testing.T, dir string, got *[]string) *Log {
	t.Helper()
	n := 0
	l, err := Open(dir, Options{Prefix: "t", SegmentBytes: 100, Checkpoint: func() []byte { n++; return []byte(fmt.Sprintf("cp%d", n)) }},
		func(_ Pos, p []byte) error { *got = append(*got, string(p)); return nil })
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestRotateCheckpointReadRemove(t *testing.T) {
	dir := t.TempDir()
	var got []string
	l := openT(t, dir, &got)
	var pos []Pos
	for i := 0; i < 20; i++ {
		p, err := l.Append([]byte(fmt.Sprintf("record-%02d", i)))
		if err != nil {
			t.Fatal(err)
		}
		pos = append(pos, p)
	}
	if err := l.Sync(pos[19]); err != nil {
		t.Fatal(err)
	}
	segs := l.Segments()
	if len(segs) < 3 {
		t.Fatalf("%d segments", len(segs))
	}
	if b, err := l.ReadAt(pos[7]); err != nil || string(b) != "record-07" {
		t.Fatalf("ReadAt: %q %v", b, err)
	}
	if err := l.Remove(segs[len(segs)-1].Num); err == nil {
		t.Fatal("removed the current segment")
	}
	if err := l.Remove(segs[0].Num); err != nil {
		t.Fatal(err)
	}
	l.Close()
	got = nil
	l = openT(t, dir, &got)
	defer l.Close()
	if got[0] != "cp2" { // first remaining segment starts with its checkpoint
		t.Fatalf("replay starts with %q", got[0])
	}
	if got[len(got)-1] != "record-19" {
		t.Fatalf("replay ends with %q", got[len(got)-1])
	}
}

func TestTornTailCutOlderDamageRefused(t *testing.T) {
	dir := t.TempDir()
	var got []string
	l := openT(t, dir, &got)
	for i := 0; i < 12; i++ {
		l.Append([]byte(fmt.Sprintf("record-%02d", i)))
	}
	l.Close()
	names, _ := filepath.Glob(filepath.Join(dir, "t-*.log"))
	last := names[len(names)-1]
	fi, _ := os.Stat(last)
	os.Truncate(last, fi.Size()-2)
	got = nil
	l = openT(t, dir, &got)
	if got[len(got)-1] != "record-10" {
		t.Fatalf("after torn tail, last record %q", got[len(got)-1])
	}
	if _, err := l.Append([]byte("after")); err != nil {
		t.Fatal(err)
	}
	l.Close()
	// Damage inside an older (fsync'd, rotated) segment is not a torn write.
	data, _ := os.ReadFile(names[0])
	data[len(data)-1] ^= 0xff
	os.WriteFile(names[0], data, 0o600)
	_, err := Open(dir, Options{Prefix: "t"}, func(Pos, []byte) error { return nil })
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("older segment damage: %v", err)
	}
}

func TestConcurrentAppendSync(t *testing.T) {
	var got []string
	l := openT(t, t.TempDir(), &got)
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				p, err := l.Append([]byte("x"))
				if err == nil {
					err = l.Sync(p)
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	l.Close()
	if _, err := l.Append([]byte("x")); !errors.Is(err, ErrClosed) {
		t.Fatalf("append after close: %v", err)
	}
}
