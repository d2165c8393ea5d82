package seglog

import (
	"errors"
	"os"
	"syscall"
	"testing"
)

// A failed fsync breaks the log for good. After a failed fsync the kernel
// may have dropped the dirty pages and cleared the error, so a second
// fsync can succeed without the data being on disk: retrying it would
// acknowledge a lost record later. Every later Append and Sync fails with
// ErrBroken instead (it failed before: the second Sync succeeded and
// Append went on).
func TestFailedFsyncBreaksTheLog(t *testing.T) {
	fail := false
	l, err := Open(t.TempDir(), Options{Prefix: "t", Fsync: func(f *os.File) error {
		if fail {
			return syscall.EIO
		}
		return f.Sync()
	}}, func(Pos, []byte) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	p, err := l.Append([]byte("first"))
	if err != nil {
		t.Fatal(err)
	}
	fail = true
	if err := l.Sync(p); !errors.Is(err, syscall.EIO) || !errors.Is(err, ErrBroken) {
		t.Fatalf("Sync with a failing fsync: %v, want EIO and ErrBroken", err)
	}
	fail = false // the disk "recovers": fsync would now report success
	if err := l.Sync(p); !errors.Is(err, ErrBroken) {
		t.Fatalf("Sync again after a failed fsync: %v, want ErrBroken", err)
	}
	if _, err := l.Append([]byte("second")); !errors.Is(err, ErrBroken) {
		t.Fatalf("Append after a failed fsync: %v, want ErrBroken", err)
	}
	if err := l.Err(); !errors.Is(err, ErrBroken) {
		t.Fatalf("Err after a failed fsync: %v, want ErrBroken", err)
	}
	_ = l.Close()
}
