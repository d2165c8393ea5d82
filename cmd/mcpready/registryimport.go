package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/internal/atomicfile"
	"github.com/mcpready/mcpready/mcpregistry"
)

// registryImportOptions are the flags of registry import.
type registryImportOptions struct {
	from, out, output string
	maxPages          int
	allVersions       bool
}

func newRegistryImportCmd() *cobra.Command {
	o := &registryImportOptions{}
	cmd := &cobra.Command{
		Use:   "import --from URL [--out DIR] [--all-versions] [-o table|json|yaml]",
		Short: "Read the MCP Registry's /v0/servers and write unsigned CANDIDATE drafts for review",
		Long: `Walk a registry's GET /v0/servers (cursor pagination, at most --max-pages
pages; a repeated cursor or the page limit stops the walk and is reported)
and turn each Streamable HTTP remote of each latest, non-deleted server
version into an unsigned RegistryEntry draft in state CANDIDATE. A draft
records the discovery source (the registry's record URL), the record's
version and status and whether the publisher supplied metadata, as labels,
apart from any operational claim. Nothing imported is ever QUALIFIED: enrol
and qualify a server before agents route to it.

Without --out the drafts are listed and nothing is written.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd) },
	}
	fl := cmd.Flags()
	fl.StringVar(&o.from, "from", "", "registry base URL, e.g. https://registry.modelcontextprotocol.io")
	fl.StringVar(&o.out, "out", "", "write one YAML draft per entry into this directory")
	fl.IntVar(&o.maxPages, "max-pages", 100, "most /v0/servers pages to read")
	fl.BoolVar(&o.allVersions, "all-versions", false, "keep every published version, not only the latest")
	addOutputFlag(cmd, &o.output)
	return cmd
}

func (o *registryImportOptions) run(cmd *cobra.Command) error {
	if err := checkOutput(cmd, o.output); err != nil {
		return err
	}
	if o.from == "" || o.maxPages <= 0 {
		return usagef("registry import: --from is required and --max-pages must be positive")
	}
	l, err := mcpregistry.List(cmd.Context(), o.from, mcpregistry.Options{MaxPages: o.maxPages, AllVersions: o.allVersions})
	if err != nil {
		return fmt.Errorf("registry import: %w", err)
	}
	if l.Partial != "" {
		fmt.Fprintf(cmd.ErrOrStderr(), "warning: the listing stopped early (%s) after %d page(s): later records were not read\n", l.Partial, l.Pages)
	}
	type row struct {
		Name, Server, Version, Endpoint, Status, File string
	}
	var rows []row
	drafts := mcpregistry.Drafts(o.from, l.Records)
	if o.out != "" {
		if err := os.MkdirAll(o.out, 0o755); err != nil {
			return err
		}
	}
	for _, d := range drafts {
		y, err := d.YAML()
		if err != nil {
			return err
		}
		file := "-"
		if o.out != "" {
			file = filepath.Join(o.out, strings.ReplaceAll(d.Metadata.Name, "/", "_")+".yaml")
			if err := atomicfile.WriteFile(file, y, 0o644); err != nil {
				return err
			}
		}
		id := d.Spec.(*mcpreadyv1.RegistryEntry).GetIdentity()
		rows = append(rows, row{Name: d.Metadata.Name, Server: id.GetServerName(), Version: id.GetServerVersion(), Endpoint: id.GetEndpoint(),
			Status: d.Metadata.Labels[mcpregistry.LabelRegistryStatus], File: file})
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "%d record(s) on %d page(s), %d draft(s)\n", len(l.Records), l.Pages, len(drafts))
	return printOutput(cmd.OutOrStdout(), o.output, rows, func(tw *tabwriter.Writer) {
		fmt.Fprintln(tw, "DRAFT\tENDPOINT\tREGISTRY STATUS\tFILE")
		for _, r := range rows {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.Name, r.Endpoint, r.Status, r.File)
		}
	})
}
