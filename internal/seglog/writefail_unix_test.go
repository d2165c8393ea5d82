//go:build linux

package seglog

import (
	"bytes"
	"syscall"
	"testing"
)

// A write that fails part-way (here: the file size limit, EFBIG) is cut
// off again, so a record appended after it survives a reopen. Without the
// cut, recovery would truncate at the partial record and lose the later,
// acknowledged one.
func TestFailedWriteIsCutOff(t *testing.T) {
	dir := t.TempDir()
	open := func() (*Log, [][]byte) {
		var got [][]byte
		l, err := Open(dir, Options{Prefix: "t", SegmentBytes: 1 << 20}, func(_ Pos, p []byte) error {
			got = append(got, bytes.Clone(p))
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return l, got
	}
	l, _ := open()
	first := bytes.Repeat([]byte("a"), 100)
	if _, err := l.Append(first); err != nil {
		t.Fatal(err)
	}
	size := l.segs[len(l.segs)-1].Size

	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &old); err != nil {
		t.Skip("no RLIMIT_FSIZE:", err)
	}
	lim := old
	lim.Cur = uint64(size + 50) // room for half of the next record
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &lim); err != nil {
		t.Skip("cannot lower RLIMIT_FSIZE:", err)
	}
	_, err := l.Append(bytes.Repeat([]byte("b"), 100))
	if rerr := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &old); rerr != nil {
		t.Fatal(rerr)
	}
	if err == nil {
		t.Fatal("append beyond the file size limit succeeded")
	}
	third := bytes.Repeat([]byte("c"), 100)
	p, err := l.Append(third)
	if err != nil {
		t.Fatalf("append after a failed write: %v", err)
	}
	if err := l.Sync(p); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l, got := open()
	defer l.Close()
	if len(got) != 2 || !bytes.Equal(got[0], first) || !bytes.Equal(got[1], third) {
		t.Fatalf("after reopen: %d records %q", len(got), got)
	}
}
