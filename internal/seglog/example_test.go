package seglog_test

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/mcpready/mcpready/internal/seglog"
)

// logger writes seglog's warnings to stdout without the time, and with
// file names relative to the log's directory.
func logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			switch a.Key {
			case slog.TimeKey:
				return slog.Attr{}
			case "file":
				return slog.String("file", filepath.Base(a.Value.String()))
			}
			return a
		},
	}))
}

// An owner (here counting records) appends records and syncs them; each
// new segment starts with the owner's checkpoint, so old segments can be
// removed. After a crash that tore the last record, Open replays the
// whole records, cuts the torn tail off and logs it, and appending goes
// on after the last whole record.
func ExampleOpen() {
	dir, err := os.MkdirTemp("", "seglog")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)

	count := 0 // the owner's state
	opts := seglog.Options{
		Prefix:       "receipts",
		SegmentBytes: 64,
		Checkpoint:   func() []byte { return fmt.Appendf(nil, "checkpoint: %d records", count) },
		Logger:       logger(),
	}
	replay := func(p seglog.Pos, payload []byte) error {
		fmt.Printf("replay %d@%d %s\n", p.Segment, p.Offset, payload)
		return nil
	}
	l, err := seglog.Open(dir, opts, replay)
	if err != nil {
		panic(err)
	}
	for _, r := range []string{"batch host-1/1", "batch host-1/2", "batch host-1/3", "batch host-1/4"} {
		p, err := l.Append([]byte(r))
		if err != nil {
			panic(err)
		}
		if err := l.Sync(p); err != nil { // durable before it is acknowledged
			panic(err)
		}
		count++
	}
	fmt.Println("segments", l.Segments())
	if err := l.Close(); err != nil {
		panic(err)
	}

	// The crash: half a record's header at the end of the last segment.
	segs, _ := filepath.Glob(filepath.Join(dir, "receipts-*.log"))
	f, err := os.OpenFile(segs[len(segs)-1], os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		panic(err)
	}
	if _, err := f.Write([]byte{0x0e, 0x00, 0x00}); err != nil {
		panic(err)
	}
	f.Close()

	fmt.Println("reopen:")
	l, err = seglog.Open(dir, opts, replay)
	if err != nil {
		panic(err)
	}
	defer l.Close()
	p, err := l.Append([]byte("batch host-1/5"))
	fmt.Println("appended at", p.Segment, p.Offset, err)

	// The oldest segment is no longer needed: the checkpoints carry on.
	if err := l.Remove(l.Segments()[0].Num); err != nil {
		panic(err)
	}
	fmt.Println("segments", l.Segments())
	// Output:
	// segments [{0 73} {1 73}]
	// reopen:
	// replay 0@0 checkpoint: 0 records
	// replay 0@29 batch host-1/1
	// replay 0@51 batch host-1/2
	// replay 1@0 checkpoint: 2 records
	// replay 1@29 batch host-1/3
	// replay 1@51 batch host-1/4
	// level=WARN msg="cutting torn tail off log segment" file=receipts-0000000000000001.log offset=73 cut_bytes=3 reason="corrupt record: 3-byte partial header"
	// appended at 2 29 <nil>
	// segments [{1 73} {2 51}]
}
