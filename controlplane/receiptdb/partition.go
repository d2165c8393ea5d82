package receiptdb

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// partitionedTables are split by the day a batch was received.
var partitionedTables = []string{"receipt_batches", "receipts"}

// dayOf is the UTC day holding t.
func dayOf(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
}

func partitionName(table string, day time.Time) string {
	return table + "_p" + day.Format("20060102")
}

// ensurePartition creates the partitions of every partitioned table for
// the day holding t, once per process; replicas creating the same day
// together serialise on an advisory lock.
func (d *DB) ensurePartition(ctx context.Context, t time.Time) error {
	day := dayOf(t)
	key := day.Format("20060102")
	d.partMu.Lock()
	defer d.partMu.Unlock()
	if d.parts[key] {
		return nil
	}
	err := d.inTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(7240160002)`); err != nil {
			return err
		}
		for _, table := range partitionedTables {
			q := fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s PARTITION OF %s FOR VALUES FROM ('%s') TO ('%s')`,
				partitionName(table, day), table, day.Format(time.RFC3339), day.AddDate(0, 0, 1).Format(time.RFC3339))
			if _, err := tx.Exec(ctx, q); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	d.parts[key] = true
	return nil
}

// Maintain creates today's and tomorrow's partitions and applies
// retention; the control plane calls it periodically.
func (d *DB) Maintain(ctx context.Context) (dropped int, err error) {
	now := d.o.Now()
	for _, t := range []time.Time{now, now.Add(24 * time.Hour)} {
		if err := d.ensurePartition(ctx, t); err != nil {
			return 0, err
		}
	}
	return d.ApplyRetention(ctx)
}

// ApplyRetention drops every daily partition whose whole day ended before
// now - Options.Retention and returns how many days it dropped. Chain
// heads are kept. Zero retention keeps everything.
func (d *DB) ApplyRetention(ctx context.Context) (int, error) {
	if d.o.Retention <= 0 {
		return 0, nil
	}
	cutoff := d.o.Now().Add(-d.o.Retention)
	var days []string
	err := d.inTx(ctx, func(ctx context.Context, tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
			JOIN pg_class p ON p.oid = i.inhparent WHERE p.relname = 'receipts'`)
		if err != nil {
			return err
		}
		names, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		for _, n := range names {
			key, ok := strings.CutPrefix(n, "receipts_p")
			day, perr := time.Parse("20060102", key)
			if !ok || perr != nil || !day.AddDate(0, 0, 1).Before(cutoff) {
				continue
			}
			for _, table := range partitionedTables {
				if _, err := tx.Exec(ctx, `DROP TABLE IF EXISTS `+partitionName(table, day)); err != nil {
					return err
				}
			}
			days = append(days, key)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	d.partMu.Lock()
	for _, k := range days {
		delete(d.parts, k)
		d.log.Info("retention dropped receipt partition", "day", k)
	}
	d.partMu.Unlock()
	return len(days), nil
}
