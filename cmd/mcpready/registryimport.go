package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
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

Without --out the drafts are listed and nothing is written. With --out DIR
each draft is written to DIR/<name>.yaml, "/" in the name written as "_"; a
file name longer than 255 bytes is cut and suffixed with 12 hex digits of
the SHA-256 of the draft's name. A file of that name is replaced. Every
draft is written or none: the drafts are first written whole into a staging
directory inside DIR (.registry-import-*), then moved in, each file they
replace kept there until all are in. If one cannot be written or moved in
(a directory has its name, the disk is full), the import fails naming it,
the drafts already moved in are removed and the replaced files restored:
DIR is as it was. Two drafts whose file names differ at most in case are
refused before anything is written.`,
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
	var files []stagedDraft
	byFile := map[string]string{} // lower-cased file name: draft name
	drafts := mcpregistry.Drafts(o.from, l.Records)
	for _, d := range drafts {
		y, err := d.YAML()
		if err != nil {
			return err
		}
		file := "-"
		if o.out != "" {
			base := draftFileName(d.Metadata.Name)
			file = filepath.Join(o.out, base)
			if other, ok := byFile[strings.ToLower(base)]; ok {
				return fmt.Errorf("registry import: drafts %q and %q would share the file %s (file names are compared ignoring case): nothing was written", other, d.Metadata.Name, file)
			}
			byFile[strings.ToLower(base)] = d.Metadata.Name
			files = append(files, stagedDraft{path: file, data: y})
		}
		id := d.Spec.(*mcpreadyv1.RegistryEntry).GetIdentity()
		rows = append(rows, row{Name: d.Metadata.Name, Server: id.GetServerName(), Version: id.GetServerVersion(), Endpoint: id.GetEndpoint(),
			Status: d.Metadata.Labels[mcpregistry.LabelRegistryStatus], File: file})
	}
	if o.out != "" {
		if err := writeAll(o.out, files); err != nil {
			return fmt.Errorf("registry import: %w", err)
		}
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "%d record(s) on %d page(s), %d draft(s)\n", len(l.Records), l.Pages, len(drafts))
	return printOutput(cmd.OutOrStdout(), o.output, rows, func(tw *tabwriter.Writer) {
		fmt.Fprintln(tw, "DRAFT\tENDPOINT\tREGISTRY STATUS\tFILE")
		for _, r := range rows {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.Name, r.Endpoint, r.Status, r.File)
		}
	})
}

// maxFileName bounds the file name of a draft: NAME_MAX of most file
// systems.
const maxFileName = 255

// draftFileName is the file name of the draft named name: the name with
// "/" as "_", bounded with mcpregistry.ShortenName so that with ".yaml"
// it has at most maxFileName bytes.
func draftFileName(name string) string {
	const ext = ".yaml"
	return strings.ReplaceAll(mcpregistry.ShortenName(name, maxFileName-len(ext)), "/", "_") + ext
}

// stagedDraft is a draft's YAML and the path it is written to.
type stagedDraft struct {
	path string
	data []byte
}

// writeAll writes every file into dir, or none: each is written whole and
// synced into a staging directory inside dir (so on dir's file system),
// then moved into place, a file it replaces hard-linked into the staging
// directory first. If a file cannot be staged or moved in, the files
// already moved in are removed and the replaced ones restored, and the
// staging directory is removed: dir is as it was.
func writeAll(dir string, files []stagedDraft) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	stage, err := os.MkdirTemp(dir, ".registry-import-")
	if err != nil {
		return err
	}
	type moved struct{ path, backup string } // backup is "" when path was new
	var done []moved
	undo := func(cause error) error {
		var errs []error
		for i := len(done) - 1; i >= 0; i-- {
			m := done[i]
			if m.backup != "" {
				errs = append(errs, os.Rename(m.backup, m.path))
			} else {
				errs = append(errs, os.Remove(m.path))
			}
		}
		if err := errors.Join(errs...); err != nil {
			return fmt.Errorf("%w; undoing the import failed (%v): replaced files are kept in %s", cause, err, stage)
		}
		if err := os.RemoveAll(stage); err != nil {
			return fmt.Errorf("%w; nothing was written, but the staging directory is left: %v", cause, err)
		}
		return fmt.Errorf("%w: nothing was written", cause)
	}
	for i, f := range files {
		if err := atomicfile.CreateNew(filepath.Join(stage, strconv.Itoa(i)), f.data, 0o644); err != nil {
			return undo(fmt.Errorf("staging %s: %w", f.path, err))
		}
	}
	for i, f := range files {
		staged, backup := filepath.Join(stage, strconv.Itoa(i)), ""
		fi, err := os.Lstat(f.path)
		switch {
		case err == nil && fi.IsDir():
			return undo(fmt.Errorf("%s is a directory", f.path))
		case err == nil:
			backup = staged + ".old"
			if err := os.Link(f.path, backup); err != nil {
				return undo(fmt.Errorf("keeping %s until the import is done: %w", f.path, err))
			}
		case !errors.Is(err, fs.ErrNotExist):
			return undo(err)
		}
		if err := os.Rename(staged, f.path); err != nil {
			return undo(err)
		}
		done = append(done, moved{f.path, backup})
	}
	d, err := os.Open(dir)
	if err == nil {
		err = d.Sync()
		d.Close()
	}
	if err != nil {
		return undo(fmt.Errorf("syncing %s: %w", dir, err))
	}
	if err := os.RemoveAll(stage); err != nil {
		return fmt.Errorf("every draft was written, but the staging directory is left: %w", err)
	}
	return nil
}
