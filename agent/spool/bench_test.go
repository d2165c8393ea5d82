package spool

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/ledger/ledgertest"
	"github.com/mcpready/mcpready/sign"
)

// BenchmarkSpoolAppend measures durable (fsync'd, group-committed)
// appends from 16 concurrent callers, with the sealer signing DefaultBatchSize-receipt
// manifests and a stand-in shipper acknowledging them, all on the same
// CPUs. receipts/s is wall time (bounded by fsync latency and group size);
// receipts/cpu-s divides by process CPU time.
func BenchmarkSpoolAppend(b *testing.B) {
	benchAppend(b, 1, func(s *Spool, rs []*mcpreadyv1.Receipt) error { return s.Append(rs[0]) })
}

// BenchmarkSpoolAppendBatch is BenchmarkSpoolAppend with one caller
// appending groups of 256 (the agent's receipt writer): one record and one
// fsync per group. An op is one receipt.
func BenchmarkSpoolAppendBatch(b *testing.B) {
	benchAppend(b, 256, func(s *Spool, rs []*mcpreadyv1.Receipt) error { _, err := s.AppendBatch(rs); return err })
}

// benchSpool opens a spool for a benchmark (closed at its end), signing
// with a fresh ECDSA P-256 key.
func benchSpool(b *testing.B) *Spool {
	key, err := sign.GenerateKey(sign.AlgorithmECDSAP256)
	if err != nil {
		b.Fatal(err)
	}
	s, err := Open(b.TempDir(), Options{AgentID: "agent-1", Signer: key, MaxBytes: 4 << 30})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

// benchAppend runs b.N receipts through add, per call group receipts from
// 16 (group 1) or 1 (larger groups) concurrent callers.
func benchAppend(b *testing.B, group int, add func(*Spool, []*mcpreadyv1.Receipt) error) {
	s := benchSpool(b)
	done := make(chan struct{})
	go func() { // acknowledge sealed batches so the spool stays small
		for {
			select {
			case <-done:
				return
			case <-s.Sealed():
				bts, err := s.Pending(0, 0)
				if err != nil {
					b.Error(err)
				}
				for _, bt := range bts {
					s.Ack(bt.Sequence)
				}
			}
		}
	}()
	defer close(done)
	rs := make([]*mcpreadyv1.Receipt, 1024)
	for i := range rs {
		rs[i] = ledgertest.Realistic(i, time.Now())
	}
	var n atomic.Int64
	b.ResetTimer()
	start, cpu := time.Now(), ledgertest.CPUTime()
	if group == 1 {
		b.SetParallelism(16)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				i := n.Add(1) % int64(len(rs))
				if err := add(s, rs[i:i+1]); err != nil {
					b.Error(err)
					return
				}
			}
		})
	} else {
		for done := 0; done < b.N; done += group {
			k := min(group, b.N-done)
			off := (done / group * group) % (len(rs) - group)
			if err := add(s, rs[off:off+k]); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "receipts/s")
	b.ReportMetric(float64(b.N)/(ledgertest.CPUTime()-cpu).Seconds(), "receipts/cpu-s")
}

// BenchmarkWriterRecord is what the answer of a read-only call waits for
// (Writer.Record of a queued receipt), one caller recording every 200 µs
// (a call rate like BenchmarkProxyOverhead's) while Run appends groups:
// record-ns is the mean time inside Record.
func BenchmarkWriterRecord(b *testing.B) {
	s := benchSpool(b)
	w := NewWriter(s, WriterOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { w.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	r := ledgertest.Realistic(0, time.Now())
	var in time.Duration
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		_ = w.Record(r, false)
		in += time.Since(t0)
		time.Sleep(200 * time.Microsecond)
	}
	b.ReportMetric(float64(in.Nanoseconds())/float64(b.N), "record-ns")
}
