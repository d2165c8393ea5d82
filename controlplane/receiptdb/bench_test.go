package receiptdb

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/mcpready/mcpready/controlplane/receiptstore"
	"github.com/mcpready/mcpready/internal/pgtest"
	"github.com/mcpready/mcpready/ledger"
	"github.com/mcpready/mcpready/ledger/ledgertest"
)

// stored is how many receipts BenchmarkReceiptQuery stores first.
const stored = 1_000_000

// BenchmarkReceiptQuery measures QueryReceipts' two point lookups with
// 1,000,000 receipts stored in today's partition (loaded in bulk by SQL,
// each a realistic encoded receipt of ~1.2 KB, ten per workflow): get by
// receipt id and by workflow (its ten receipts), random keys, one at a
// time. Reports p50 and p99 per kind.
func BenchmarkReceiptQuery(b *testing.B) {
	pg := pgtest.Start(b)
	d, err := Open(context.Background(), pg.DSN, Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	body, err := ledger.Encode(ledgertest.Realistic(1, time.Now()))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	start := time.Now()
	for lo := 0; lo < stored; lo += 100_000 {
		if _, err := d.pool.Exec(ctx, `INSERT INTO receipts (received, idx, agent_id, batch_id, receipt_id, workflow_id, server_name, tool_name, emitted_at, digest, body)
			SELECT now(), g % 512, 'agent-' || (g % 50), 'batch-' || (g / 512), 'r-' || g, 'wf-' || (g / 10), 'com.example/docs-a', 'lookup',
				now() - g * interval '1 ms', 'sha256:x', $3
			FROM generate_series($1::int, $2::int) g`, lo, lo+99_999, body); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := d.pool.Exec(ctx, `ANALYZE receipts`); err != nil {
		b.Fatal(err)
	}
	b.Logf("loaded %d receipts in %v", stored, time.Since(start).Round(time.Second))
	for _, kind := range []string{"id", "workflow"} {
		b.Run(kind, func(b *testing.B) {
			lat := make([]time.Duration, 0, b.N)
			for b.Loop() {
				g := rand.IntN(stored)
				q := receiptstore.Query{ReceiptID: fmt.Sprintf("r-%d", g), Limit: 1}
				want := 1
				if kind == "workflow" {
					q = receiptstore.Query{WorkflowID: fmt.Sprintf("wf-%d", g/10), Limit: 100}
					want = 10
					if g/10 == 0 || g/10 == stored/10 {
						want = 0 // the partial first and last workflow
					}
				}
				t0 := time.Now()
				rs, _, err := d.Query(ctx, q)
				lat = append(lat, time.Since(t0))
				if err != nil || (want > 0 && len(rs) != want) {
					b.Fatalf("%+v: %d receipts, %v", q, len(rs), err)
				}
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
		})
	}
}
