package spool

import (
	"errors"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcpready/mcpready/agent/receipt"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
)

func mkRange(from, to int) []*mcpreadyv1.Receipt {
	var rs []*mcpreadyv1.Receipt
	for i := from; i < to; i++ {
		rs = append(rs, mk(i))
	}
	return rs
}

func TestAppendBatch(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(*Options)
		// run appends and returns the receipts expected after reopening.
		run func(t *testing.T, s *Spool, reg *prometheus.Registry) []string
	}{
		{"durable across reopen and rotation", func(o *Options) { o.SegmentBytes = 2048 }, func(t *testing.T, s *Spool, _ *prometheus.Registry) []string {
			for _, g := range [][2]int{{0, 1}, {1, 40}, {40, 41}, {41, 100}} {
				if err := s.AppendBatch(mkRange(g[0], g[1])); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.AppendBatch(nil); err != nil {
				t.Fatal(err)
			}
			return want(0, 100)
		}},
		{"group over the bound is refused whole", func(o *Options) { o.MaxBytes = 4096; o.SegmentBytes = 1024 }, func(t *testing.T, s *Spool, reg *prometheus.Registry) []string {
			if err := s.AppendBatch(mkRange(0, 5)); err != nil {
				t.Fatal(err)
			}
			if err := s.AppendBatch(mkRange(5, 200)); !errors.Is(err, ErrSpoolFull) {
				t.Fatalf("oversized group: %v", err)
			}
			if got := s.Stats().Dropped; got != 195 {
				t.Fatalf("dropped %d, want 195", got)
			}
			for name, v := range map[string]float64{"emitted": 200, "spooled": 5, "dropped": 195} {
				if got := gauge(t, reg, "mcpready_receipts_"+name+"_total"); got != v {
					t.Fatalf("%s metric %v, want %v", name, got, v)
				}
			}
			if err := s.AppendBatch(mkRange(5, 8)); err != nil { // a group that fits is still accepted
				t.Fatal(err)
			}
			return want(0, 8)
		}},
		{"concurrent groups and single appends", func(o *Options) { o.BatchInterval = 5 * time.Millisecond; o.SegmentBytes = 8192 }, func(t *testing.T, s *Spool, _ *prometheus.Registry) []string {
			var wg sync.WaitGroup
			for w := 0; w < 4; w++ {
				wg.Go(func() {
					for i := 0; i < 10; i++ {
						if err := s.AppendBatch(mkRange(0, 7)); err != nil {
							t.Error(err)
						}
						if err := s.Append(mk(0)); err != nil {
							t.Error(err)
						}
					}
				})
			}
			wg.Wait()
			return nil // 4*10*8 receipts, checked by count
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
			exp := tc.run(t, s, reg)
			s.Close()
			s = open(t, dir, key, tc.mod)
			defer s.Close()
			if err := s.Flush(); err != nil {
				t.Fatal(err)
			}
			got, _ := drain(t, s, key, receipt.Head{}, true)
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

// A group torn by a crash in the middle of its write keeps its whole
// records and loses only the torn one (none of the group was acknowledged
// to its caller, so nothing acknowledged is lost).
func TestAppendBatchTornTail(t *testing.T) {
	dir, key := t.TempDir(), testKey(t)
	s := open(t, dir, key, nil)
	if err := s.AppendBatch(mkRange(0, 6)); err != nil {
		t.Fatal(err)
	}
	s.Close()
	p := lastSegment(t, dir)
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(p, fi.Size()-3); err != nil {
		t.Fatal(err)
	}
	s = open(t, dir, key, nil)
	defer s.Close()
	if err := s.AppendBatch(mkRange(6, 8)); err != nil {
		t.Fatal(err)
	}
	s.Flush()
	got, _ := drain(t, s, key, receipt.Head{}, true)
	eq(t, got, append(want(0, 5), want(6, 8)...))
}

func TestAppendBatchAfterClose(t *testing.T) {
	s := open(t, t.TempDir(), testKey(t), nil)
	s.Close()
	if err := s.AppendBatch(mkRange(0, 2)); !errors.Is(err, ErrClosed) {
		t.Fatalf("append after close: %v", err)
	}
}
