package main

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/readiness"
)

func newRegistryCmd() *cobra.Command {
	return newGroupCmd("registry", "Inspect the tool registry lifecycle, re-qualify entries, import candidates from the MCP Registry", newRegistryStatusCmd(), newRegistryQualifyCmd(), newRegistryImportCmd())
}

// registryStatusOptions are the flags of registry status.
type registryStatusOptions struct {
	serverOptions
	output string
}

func newRegistryStatusCmd() *cobra.Command {
	o := &registryStatusOptions{}
	cmd := &cobra.Command{
		Use:   "status [NAME] [-o table|json|yaml]",
		Short: "Show each registry identity's lifecycle state, last evidence age and drift history",
		Long: `Show the effective lifecycle state (CANDIDATE, QUALIFIED, STALE, SUSPENDED,
REVOKED) of every registry entry, or of one NAME, with the age of the latest
matching evidence, the entry that supersedes it after drift, and, for one
NAME, its full event history.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return o.run(cmd, args) },
	}
	addOutputFlag(cmd, &o.output)
	o.serverOptions.addFlags(cmd)
	return cmd
}

func (o *registryStatusOptions) run(cmd *cobra.Command, args []string) error {
	if err := checkOutput(cmd, o.output); err != nil {
		return err
	}
	req := &mcpreadyv1.RegistryStatusRequest{}
	if len(args) == 1 {
		req.Name = args[0]
	}
	r, err := adminCall(cmd, &o.serverOptions, func(ctx context.Context, cli mcpreadyv1.AdminServiceClient) (*mcpreadyv1.RegistryStatusResponse, error) {
		return cli.RegistryStatus(ctx, req)
	})
	if err != nil {
		return err
	}
	return printOutput(cmd.OutOrStdout(), o.output, r, func(tw *tabwriter.Writer) {
		fmt.Fprintln(tw, "NAME\tSTATE\tLAST EVIDENCE\tDRIFT\tSUPERSEDED BY")
		for _, e := range r.Entries {
			ev := "-"
			if e.LastEvidenceAt != nil {
				ev = age(e.LastEvidenceAt.AsTime()) + " ago"
			}
			drift := "-"
			if n := len(e.Events); n > 0 && len(e.Events[n-1].Drift) > 0 {
				drift = driftNames(e.Events[n-1].Drift)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", e.Name, stateName(e.State), ev, drift, orDash(e.SupersededBy))
		}
		if req.Name != "" && len(r.Entries) == 1 {
			fmt.Fprintln(tw, "\nWHEN\tFROM\tTO\tDRIFT\tREASON")
			for _, ev := range r.Entries[0].Events {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", ev.At.AsTime().Format(time.RFC3339), stateName(ev.From), stateName(ev.To), orDash(driftNames(ev.Drift)), ev.Reason)
			}
		}
	})
}

func stateName(s mcpreadyv1.LifecycleState) string {
	if s == mcpreadyv1.LifecycleState_LIFECYCLE_STATE_UNSPECIFIED {
		return "-"
	}
	return strings.TrimPrefix(s.String(), "LIFECYCLE_STATE_")
}

func driftNames(ds []mcpreadyv1.DriftLabel) string {
	var out []string
	for _, d := range ds {
		out = append(out, readiness.DriftName(d))
	}
	return strings.Join(out, ",")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
