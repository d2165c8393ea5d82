package spool

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/internal/recordio"
	"github.com/mcpready/mcpready/ledger"
)

func mkRange(from, to int) []*mcpreadyv1.Receipt {
	var rs []*mcpreadyv1.Receipt
	for i := from; i < to; i++ {
		rs = append(rs, mk(i))
	}
	return rs
}

// groupsBySegment returns, for each segment file in dir, the receipt
// counts of its group records in order.
func groupsBySegment(t *testing.T, dir string) [][]uint64 {
	t.Helper()
	names, _ := filepath.Glob(filepath.Join(dir, "spool-*.log"))
	var out [][]uint64
	for _, name := range names {
		data, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		var counts []uint64
		if _, err := recordio.Scan(data, func(_ int64, p []byte) error {
			if p[0] == recGroup {
				d := recordio.Decoder{B: p[1:]}
				counts = append(counts, d.Uvarint())
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		out = append(out, counts)
	}
	return out
}

func TestAppendBatch(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(*Options)
		// run appends and returns the receipts expected after reopening
		// (nil: only their number, 320, is checked).
		run func(t *testing.T, dir string, s *Spool, reg *prometheus.Registry) []string
	}{
		{"durable across reopen and rotation", func(o *Options) { o.SegmentBytes = 2048 }, func(t *testing.T, _ string, s *Spool, _ *prometheus.Registry) []string {
			for _, g := range [][2]int{{0, 1}, {1, 40}, {40, 41}, {41, 100}} {
				if n, err := s.AppendBatch(mkRange(g[0], g[1])); err != nil || n != g[1]-g[0] {
					t.Fatalf("appended %d: %v", n, err)
				}
			}
			if n, err := s.AppendBatch(nil); err != nil || n != 0 {
				t.Fatalf("empty group: %d %v", n, err)
			}
			return want(0, 100)
		}},
		{"a group crossing the segment size stays in one segment", func(o *Options) { o.SegmentBytes = 1024; o.BatchSize = 1000 }, func(t *testing.T, dir string, s *Spool, _ *prometheus.Registry) []string {
			// 8 receipts (~700 bytes) leave segment 0 under 1024 bytes, so
			// the next group of 30 (~2.6 KB) goes there whole; the group
			// after it starts segment 1.
			for _, g := range [][2]int{{0, 8}, {8, 38}, {38, 40}} {
				if _, err := s.AppendBatch(mkRange(g[0], g[1])); err != nil {
					t.Fatal(err)
				}
			}
			if got := groupsBySegment(t, dir); len(got) != 2 || len(got[0]) != 2 || got[0][0] != 8 || got[0][1] != 30 || len(got[1]) != 1 || got[1][0] != 2 {
				t.Fatalf("groups by segment %v, want [[8 30] [2]]", got)
			}
			return want(0, 40)
		}},
		{"overflow appends the prefix that fits and refuses the rest", func(o *Options) { o.MaxBytes = 4096; o.SegmentBytes = 1024; o.RefusedBytes = -1; o.BatchSize = 1000 }, func(t *testing.T, _ string, s *Spool, reg *prometheus.Registry) []string {
			if _, err := s.AppendBatch(mkRange(0, 5)); err != nil {
				t.Fatal(err)
			}
			n, err := s.AppendBatch(mkRange(5, 200))
			if !errors.Is(err, ErrSpoolFull) || n == 0 || n >= 195 {
				t.Fatalf("oversized group: appended %d: %v", n, err)
			}
			if b := s.Stats().Bytes; b > 4096 { // nothing is sealed (BatchSize), so receipts are all there is
				t.Fatalf("spool files %d bytes, over MaxBytes", b)
			}
			if got := s.Stats().Dropped; got != uint64(195-n) {
				t.Fatalf("dropped %d, want %d", got, 195-n)
			}
			if m, err := s.AppendBatch(mkRange(200, 210)); !errors.Is(err, ErrSpoolFull) || m != 0 {
				t.Fatalf("group into a full spool: appended %d: %v", m, err)
			}
			for name, v := range map[string]float64{"emitted": 210, "spooled": float64(5 + n), "dropped": float64(205 - n)} {
				if got := gauge(t, reg, "mcpready_receipts_"+name+"_total"); got != v {
					t.Fatalf("%s metric %v, want %v", name, got, v)
				}
			}
			return want(0, 5+n)
		}},
		{"concurrent groups and single appends", func(o *Options) { o.BatchInterval = 5 * time.Millisecond; o.SegmentBytes = 8192 }, func(t *testing.T, _ string, s *Spool, _ *prometheus.Registry) []string {
			var wg sync.WaitGroup
			for w := 0; w < 4; w++ {
				wg.Go(func() {
					for i := 0; i < 10; i++ {
						if _, err := s.AppendBatch(mkRange(0, 7)); err != nil {
							t.Error(err)
						}
						if err := s.Append(mk(0)); err != nil {
							t.Error(err)
						}
					}
				})
			}
			wg.Wait()
			return nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, key := t.TempDir(), testKey(t)
			reg := prometheus.NewRegistry()
			s := open(t, dir, key, func(o *Options) {
				o.Registry = reg
				if tc.mod != nil {
					tc.mod(o)
				}
			})
			t.Cleanup(func() { s.Close() }) // also when run fails
			exp := tc.run(t, dir, s, reg)
			s.Close()
			s = open(t, dir, key, tc.mod)
			defer s.Close()
			if err := s.Flush(); err != nil {
				t.Fatal(err)
			}
			got, _ := drain(t, s, key, ledger.Head{}, true)
			if exp == nil {
				if len(got) != 320 {
					t.Fatalf("%d receipts, want 320", len(got))
				}
				return
			}
			eq(t, got, exp)
		})
	}
}

// A crash while a group is written (its caller not yet answered) leaves a
// torn tail; wherever the cut falls, the whole group is gone after reopen
// and everything before it is intact.
func TestAppendBatchTornGroupIsAllOrNothing(t *testing.T) {
	dir, key := t.TempDir(), testKey(t)
	s := open(t, dir, key, func(o *Options) { o.BatchSize = 1000 })
	if _, err := s.AppendBatch(mkRange(0, 4)); err != nil {
		t.Fatal(err)
	}
	before := s.Stats().Bytes
	if _, err := s.AppendBatch(mkRange(4, 10)); err != nil {
		t.Fatal(err)
	}
	groupBytes := s.Stats().Bytes - before
	s.Close()
	seg, err := os.ReadFile(lastSegment(t, dir))
	if err != nil {
		t.Fatal(err)
	}
	for _, cut := range []int64{1, 3, recordio.HeaderSize, groupBytes / 2, groupBytes - recordio.HeaderSize, groupBytes - 1} {
		crashed := t.TempDir()
		name := filepath.Join(crashed, filepath.Base(lastSegment(t, dir)))
		if err := os.WriteFile(name, seg[:int64(len(seg))-cut], 0o600); err != nil {
			t.Fatal(err)
		}
		s := open(t, crashed, key, nil)
		if err := s.Flush(); err != nil {
			t.Fatal(err)
		}
		got, _ := drain(t, s, key, ledger.Head{}, true)
		eq(t, got, want(0, 4))
		if _, err := s.AppendBatch(mkRange(10, 12)); err != nil {
			t.Fatalf("cut %d: append after recovery: %v", cut, err)
		}
		s.Close()
	}
}

func TestAppendBatchWritesNothingOnError(t *testing.T) {
	s := open(t, t.TempDir(), testKey(t), nil)
	bad := mk(1)
	bad.Requested = "\xff" // not UTF-8: cannot be encoded
	if n, err := s.AppendBatch([]*mcpreadyv1.Receipt{mk(0), bad, mk(2)}); !errors.Is(err, ErrEncode) || n != 0 {
		t.Fatalf("group with an unencodable receipt: appended %d: %v", n, err)
	}
	if st := s.Stats(); st.Unsealed != 0 {
		t.Fatalf("stats %+v after a refused group", st)
	}
	s.Close()
	if _, err := s.AppendBatch(mkRange(0, 2)); !errors.Is(err, ErrClosed) {
		t.Fatalf("append after close: %v", err)
	}
}
