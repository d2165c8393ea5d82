// Package seglog is an append-only log of records split into numbered
// segment files ("<prefix>-<16-digit number>.log"), framed by
// internal/recordio.
//
// It recovers on open (a torn or corrupt tail of the last segment is cut
// off and logged; damage in an older, already fsync'd segment is an
// error), group-commits fsyncs, rotates segments by size (starting each new
// segment with a checkpoint record supplied by the owner so that old
// segments can be deleted without losing state) and deletes whole
// segments. It does not interpret records; the spool and the receipt store
// do.
package seglog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"sync"

	"github.com/mcpready/mcpready/internal/recordio"
)

// ErrCorrupt is damage that cannot be a torn write: a bad record in a
// segment other than the last, or an unexpected file name.
var ErrCorrupt = errors.New("log segment corrupt")

// ErrClosed is an operation on a closed log.
var ErrClosed = errors.New("log closed")

// ErrBroken is every operation after a failed fsync or a write that could
// not be undone: the log refuses appends and syncs for good (until it is
// opened again), because a retried fsync can report success for data the
// kernel already dropped.
var ErrBroken = errors.New("log broken")

// Options configures a log.
type Options struct {
	// Prefix names segment files; required.
	Prefix string
	// SegmentBytes rotates the current segment once it is at least this
	// large; default 64 MiB.
	SegmentBytes int64
	// Checkpoint returns the record written first in every new segment,
	// or nil for none. It is called from inside Append and Open, so it
	// sees the owner's state as of just before the record being appended.
	Checkpoint func() []byte
	// Logger; nil discards.
	Logger *slog.Logger
	// Fsync makes a segment file durable; nil is (*os.File).Sync. It is
	// the seam where tests inject a failing disk.
	Fsync func(*os.File) error
}

// Pos locates one record.
type Pos struct {
	Segment uint64
	Offset  int64
	// end is the logical position just after the record, for Sync.
	end int64
}

// Segment describes one segment file.
type Segment struct {
	Num  uint64
	Size int64
}

// Log is a segmented append-only log, safe for concurrent use. Owners that
// need record order to match their own state order call Append under
// their own lock.
type Log struct {
	dir  string
	opts Options
	log  *slog.Logger

	syncMu sync.Mutex // held while fsyncing or rotating
	synced int64

	mu      sync.Mutex
	closed  bool
	broken  error // wraps ErrBroken: a failed fsync, or a write that could not be undone
	cur     *os.File
	segs    []Segment
	written int64 // logical bytes written since Open (including recovered)
	readers map[uint64]*os.File
}

// Open opens the log in dir (creating it), calls replay for every whole
// record in order, and truncates a torn tail of the last segment. The
// payload passed to replay stays valid (it is not reused).
func Open(dir string, opts Options, replay func(p Pos, payload []byte) error) (*Log, error) {
	if opts.Prefix == "" {
		return nil, errors.New("seglog: prefix required")
	}
	if opts.SegmentBytes <= 0 {
		opts.SegmentBytes = 64 << 20
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Fsync == nil {
		opts.Fsync = (*os.File).Sync
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("seglog: %w", err)
	}
	l := &Log{dir: dir, opts: opts, log: opts.Logger, readers: map[uint64]*os.File{}}
	names, err := filepath.Glob(filepath.Join(dir, opts.Prefix+"-*.log"))
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	for i, name := range names {
		var num uint64
		if _, err := fmt.Sscanf(filepath.Base(name), opts.Prefix+"-%016d.log", &num); err != nil || filepath.Base(name) != filepath.Base(l.path(num)) {
			return nil, fmt.Errorf("%w: unexpected file %s", ErrCorrupt, name)
		}
		data, err := os.ReadFile(name)
		if err != nil {
			return nil, fmt.Errorf("seglog: %w", err)
		}
		end, scanErr := recordio.Scan(data, func(off int64, p []byte) error {
			return replay(Pos{Segment: num, Offset: off}, p)
		})
		if scanErr != nil {
			if !errors.Is(scanErr, recordio.ErrCorrupt) || i != len(names)-1 {
				return nil, fmt.Errorf("%w: %s at offset %d: %w", ErrCorrupt, name, end, scanErr)
			}
			l.log.Warn("cutting torn tail off log segment", "file", name, "offset", end, "cut_bytes", int64(len(data))-end, "reason", scanErr.Error())
			if err := os.Truncate(name, end); err != nil {
				return nil, fmt.Errorf("seglog: truncate: %w", err)
			}
		}
		l.segs = append(l.segs, Segment{Num: num, Size: end})
		l.written += end
	}
	if len(l.segs) == 0 {
		if err := l.rotateLocked(); err != nil {
			return nil, err
		}
		return l, nil
	}
	last := l.segs[len(l.segs)-1]
	f, err := os.OpenFile(l.path(last.Num), os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("seglog: %w", err)
	}
	if err := opts.Fsync(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("seglog: %w", err)
	}
	l.cur, l.synced = f, l.written
	return l, nil
}

func (l *Log) path(num uint64) string {
	return filepath.Join(l.dir, fmt.Sprintf("%s-%016d.log", l.opts.Prefix, num))
}

// Append writes one record (not yet durable; see Sync), rotating first
// when the current segment is full.
func (l *Log) Append(payload []byte) (Pos, error) {
	return l.AppendFramed(recordio.Append(make([]byte, 0, recordio.Size(len(payload))), payload))
}

// AppendFramed is Append for a record already framed by recordio.Frame
// (saves copying a large payload).
func (l *Log) AppendFramed(rec []byte) (Pos, error) {
	l.mu.Lock()
	if err := l.errIfClosedLocked(); err != nil {
		l.mu.Unlock()
		return Pos{}, err
	}
	if l.segs[len(l.segs)-1].Size >= l.opts.SegmentBytes {
		l.mu.Unlock()
		l.syncMu.Lock()
		l.mu.Lock()
		err := l.errIfClosedLocked()
		if err == nil && l.segs[len(l.segs)-1].Size >= l.opts.SegmentBytes {
			err = l.rotateLocked()
		}
		l.syncMu.Unlock()
		if err != nil {
			l.mu.Unlock()
			return Pos{}, err
		}
	}
	defer l.mu.Unlock()
	cur := &l.segs[len(l.segs)-1]
	p := Pos{Segment: cur.Num, Offset: cur.Size}
	if err := l.writeLocked(rec); err != nil {
		return Pos{}, err
	}
	p.end = l.written
	return p, nil
}

// errIfClosedLocked returns ErrClosed after Close, and the reason the log
// is broken after a write that could not be undone. Caller holds mu.
func (l *Log) errIfClosedLocked() error {
	if l.closed {
		return ErrClosed
	}
	return l.broken
}

// writeLocked appends rec to the current segment. A failed (possibly
// partial) write is cut off again, so that later records do not follow
// garbage that recovery would truncate together with them; if it cannot
// be cut off, the log refuses further appends.
func (l *Log) writeLocked(rec []byte) error {
	if _, err := l.cur.Write(rec); err != nil {
		if terr := l.cur.Truncate(l.segs[len(l.segs)-1].Size); terr != nil {
			l.broken = fmt.Errorf("seglog: %w: segment left with a partial record (%v) after: %w", ErrBroken, terr, err)
		}
		return fmt.Errorf("seglog: write: %w", err)
	}
	l.written += int64(len(rec))
	l.segs[len(l.segs)-1].Size += int64(len(rec))
	return nil
}

// Sync returns once the record at p (and everything before it) is on disk.
// Concurrent callers share one fsync. A failed fsync breaks the log
// (ErrBroken): it and every later Append and Sync fail.
func (l *Log) Sync(p Pos) error {
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	l.mu.Lock()
	if err := l.errIfClosedLocked(); err != nil {
		l.mu.Unlock()
		return err
	}
	if l.synced >= p.end {
		l.mu.Unlock()
		return nil
	}
	f, w := l.cur, l.written
	l.mu.Unlock()
	if err := l.opts.Fsync(f); err != nil {
		return l.breakOn(err)
	}
	l.synced = w
	return nil
}

// Err is nil while the log accepts appends, else why not (ErrClosed, or
// an error wrapping ErrBroken).
func (l *Log) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.errIfClosedLocked()
}

// breakOn records that fsync failed with err and returns the error every
// later operation gets. Caller holds syncMu, not mu.
func (l *Log) breakOn(err error) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.broken == nil {
		l.broken = fsyncFailed(err)
		l.log.Error("log broken: fsync failed; no further records are accepted", "err", err)
	}
	return l.broken
}

func fsyncFailed(err error) error { return fmt.Errorf("seglog: %w: fsync failed: %w", ErrBroken, err) }

// rotateLocked fsyncs and closes the current segment and starts the next
// with the owner's checkpoint. Caller holds syncMu and mu (or is opening).
func (l *Log) rotateLocked() error {
	var num uint64
	if len(l.segs) > 0 {
		num = l.segs[len(l.segs)-1].Num + 1
	}
	if l.cur != nil {
		if err := l.opts.Fsync(l.cur); err != nil {
			l.broken = fsyncFailed(err)
			return l.broken
		}
		l.cur.Close()
		l.cur = nil
	}
	f, err := os.OpenFile(l.path(num), os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("seglog: %w", err)
	}
	l.cur = f
	l.segs = append(l.segs, Segment{Num: num})
	if l.opts.Checkpoint != nil {
		if cp := l.opts.Checkpoint(); cp != nil {
			if err := l.writeLocked(recordio.Append(nil, cp)); err != nil {
				return err
			}
		}
	}
	if err := l.opts.Fsync(f); err != nil {
		l.broken = fsyncFailed(err)
		return l.broken
	}
	if err := syncDir(l.dir); err != nil {
		return err
	}
	l.synced = l.written
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("seglog: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("seglog: fsync dir: %w", err)
	}
	return nil
}

// Segments lists the segments, oldest first; the last is current.
func (l *Log) Segments() []Segment {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Segment(nil), l.segs...)
}

// Size is the total size of all segments.
func (l *Log) Size() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	var n int64
	for _, s := range l.segs {
		n += s.Size
	}
	return n
}

// Remove deletes segment num. The current segment cannot be removed.
func (l *Log) Remove(num uint64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, s := range l.segs {
		if s.Num != num {
			continue
		}
		if i == len(l.segs)-1 {
			return fmt.Errorf("seglog: segment %d is current", num)
		}
		if r := l.readers[num]; r != nil {
			r.Close()
			delete(l.readers, num)
		}
		if err := os.Remove(l.path(num)); err != nil {
			return fmt.Errorf("seglog: %w", err)
		}
		l.segs = append(l.segs[:i], l.segs[i+1:]...)
		return nil
	}
	return nil
}

// Scan calls fn for every record of segment num, in order, reading the
// segment file once (memory bounded by SegmentBytes). It is for segments
// already closed; records appended to the current segment meanwhile may
// or may not be seen.
func (l *Log) Scan(num uint64, fn func(p Pos, payload []byte) error) error {
	data, err := os.ReadFile(l.path(num))
	if err != nil {
		return fmt.Errorf("seglog: %w", err)
	}
	_, err = recordio.Scan(data, func(off int64, p []byte) error { return fn(Pos{Segment: num, Offset: off}, p) })
	if errors.Is(err, recordio.ErrCorrupt) {
		return fmt.Errorf("%w: %s: %w", ErrCorrupt, l.path(num), err)
	}
	return err // fn's
}

// ReadAt reads the record at p.
func (l *Log) ReadAt(p Pos) ([]byte, error) {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil, ErrClosed
	}
	r := l.readers[p.Segment]
	if r == nil {
		f, err := os.Open(l.path(p.Segment))
		if err != nil {
			l.mu.Unlock()
			return nil, fmt.Errorf("seglog: %w", err)
		}
		r, l.readers[p.Segment] = f, f
	}
	l.mu.Unlock()
	var h [recordio.HeaderSize]byte
	if _, err := r.ReadAt(h[:], p.Offset); err != nil {
		return nil, fmt.Errorf("seglog: read: %w", err)
	}
	n := int64(binary.LittleEndian.Uint32(h[0:4]))
	if n > recordio.MaxRecord {
		return nil, fmt.Errorf("%w: record of %d bytes", ErrCorrupt, n)
	}
	buf := make([]byte, recordio.HeaderSize+n)
	if _, err := r.ReadAt(buf, p.Offset); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("seglog: read: %w", err)
	}
	payload, _, err := recordio.Next(buf)
	if err != nil {
		return nil, fmt.Errorf("%w: %s at %d: %w", ErrCorrupt, l.path(p.Segment), p.Offset, err)
	}
	return payload, nil
}

// Close fsyncs and closes every file.
func (l *Log) Close() error {
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	l.closed = true
	for _, r := range l.readers {
		r.Close()
	}
	err := l.opts.Fsync(l.cur)
	if err == nil {
		l.synced = l.written
	}
	if cerr := l.cur.Close(); err == nil {
		err = cerr
	}
	return err
}
