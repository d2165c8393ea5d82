package main

import (
	"github.com/spf13/cobra"

	"github.com/mcpready/mcpready/explain"
)

// explainOptions are the flags of explain.
type explainOptions struct {
	serverOptions
	output string
}

func newExplainCmd() *cobra.Command {
	o := &explainOptions{}
	cmd := &cobra.Command{
		Use:   "explain RECEIPT_ID [-o table|json|yaml]",
		Short: "Explain in plain words why a call was routed, refused or failed",
		Long: `Reconstruct one decision from its signed receipt: what was requested and
for whom, which candidates were considered and why each rejected one was
excluded, the policy version and evidence used, every attempt (with the
idempotency binding, the failure domains tried, the quota and cost effect,
whether the call met a cold upstream session), and the outcome (with the
semantic validators' versions). A workflow receipt is explained as its
workflow: how it ended and who said so, each call with the route that
answered it, and whether a fallback route answered a contributing call.
The default (table) prints the explanation in words; -o json or yaml
prints the stored receipt itself.`,
		Args: oneArg,
		RunE: func(cmd *cobra.Command, args []string) error { return o.run(cmd, args) },
	}
	addOutputFlag(cmd, &o.output)
	o.serverOptions.addFlags(cmd)
	return cmd
}

func (o *explainOptions) run(cmd *cobra.Command, args []string) error {
	if o.output == "text" { // the name this format had before -o was table|json|yaml everywhere
		o.output = "table"
	}
	if err := checkOutput(cmd, o.output); err != nil {
		return err
	}
	sr, err := getReceipt(cmd.Context(), &o.serverOptions, args[0])
	if err != nil {
		return err
	}
	if o.output != "table" {
		return printOutput(cmd.OutOrStdout(), o.output, sr, nil)
	}
	return explain.Write(cmd.OutOrStdout(), sr)
}
