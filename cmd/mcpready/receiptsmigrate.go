package main

import (
	"fmt"
	"os"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/mcpready/mcpready/controlplane/receiptdb"
	"github.com/mcpready/mcpready/controlplane/receiptstore"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/ledger"
)

// receiptsMigrateOptions are the flags of receipts migrate.
type receiptsMigrateOptions struct {
	from   []string
	to     string
	output string
}

// migrateSummary is what receipts migrate did.
type migrateSummary struct {
	Imported int `json:"imported"`
	Skipped  int `json:"skipped"`
	Receipts int `json:"receipts"`
}

func newReceiptsMigrateCmd() *cobra.Command {
	o := &receiptsMigrateOptions{}
	cmd := &cobra.Command{
		Use:   "migrate --from DIR [--from DIR...] [--to postgres://…] [-o table|json|yaml]",
		Short: "Copy segment receipt stores into a receipt database",
		Long: `Copy every batch of one or more segment receipt stores (a control plane's
DATA/receipts directory; stop that control plane first) into the receipt
database, byte for byte as signed, and set each agent's chain head to the
highest sequence stored. Give every replica's store: the batches of one
agent's chain may be spread over them, and they may be migrated in any
order. Running it again skips what is already there; a batch stored with
another digest at the same agent and sequence (a fork between stores) stops
it with an error. --to defaults to $` + receiptsStoreEnv + ` and must use TLS off
loopback.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd) },
	}
	addOutputFlag(cmd, &o.output)
	cmd.Flags().StringArrayVar(&o.from, "from", nil, "segment receipt store directory (repeatable)")
	cmd.Flags().StringVar(&o.to, "to", "", "receipt database URL (default $"+receiptsStoreEnv+")")
	return cmd
}

func (o *receiptsMigrateOptions) run(cmd *cobra.Command) error {
	if err := checkOutput(cmd, o.output); err != nil {
		return err
	}
	to := receiptsStore(o.to)
	if len(o.from) == 0 || !receiptdb.IsDSN(to) {
		return usagef("migrate: --from and a postgres:// --to (or $%s) are required", receiptsStoreEnv)
	}
	if _, err := receiptdb.ParseConfig(to); err != nil {
		return usagef("migrate: --to: %w", err)
	}
	for _, dir := range o.from {
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			return usagef("migrate: --from %s: not a directory", dir)
		}
	}
	ctx := cmd.Context()
	db, err := receiptdb.Open(ctx, to, receiptdb.Options{Timeout: 30 * time.Second})
	if err != nil {
		return err
	}
	defer db.Close()
	var sum migrateSummary
	for _, dir := range o.from {
		st, err := receiptstore.Open(dir, receiptstore.Options{})
		if err != nil {
			return fmt.Errorf("migrate: %s: %w", dir, err)
		}
		err = st.Export(ctx, time.Time{}, "", func(b *ledger.Batch) error {
			rs := make([]*mcpreadyv1.Receipt, len(b.Receipts))
			ds := make([]string, len(b.Receipts))
			for i, e := range b.Receipts {
				if rs[i], err = ledger.DecodeSummary(e); err != nil {
					return fmt.Errorf("batch %s receipt %d: %w", b.BatchID, i, err)
				}
				ds[i] = ledger.Digest(e)
			}
			res, err := db.Import(ctx, b, rs, ds)
			if err != nil {
				return fmt.Errorf("batch %s (agent %s, sequence %d): %w", b.BatchID, b.AgentID, b.Sequence, err)
			}
			if res == receiptdb.AlreadyStored {
				sum.Skipped++
				return nil
			}
			sum.Imported++
			sum.Receipts += len(b.Receipts)
			return nil
		})
		st.Close()
		if err != nil {
			return fmt.Errorf("migrate: %s: %w", dir, err)
		}
	}
	return printOutput(cmd.OutOrStdout(), o.output, sum, func(tw *tabwriter.Writer) {
		fmt.Fprintln(tw, "IMPORTED\tSKIPPED\tRECEIPTS")
		fmt.Fprintf(tw, "%d\t%d\t%d\n", sum.Imported, sum.Skipped, sum.Receipts)
	})
}
