package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/mcpready/mcpready/internal/atomicfile"
	"github.com/mcpready/mcpready/probe/analyze"
)

// probeAnalyzeOptions are the flags of probe analyze.
type probeAnalyzeOptions struct {
	sha256, svg, output string
}

func newProbeAnalyzeCmd() *cobra.Command {
	o := &probeAnalyzeOptions{}
	cmd := &cobra.Command{
		Use:   "analyze FILE.csv [--sha256 HEX] [--svg FILE] [-o table|json|yaml]",
		Short: "Reproduce the readiness paper's figures from a 12-column probe export",
		Long: `Read a probe export in the paper's 12-column format (` + analyze.Header + `),
refuse it unless its SHA-256 is the expected digest (the paper's frozen file,
` + analyze.FrozenSHA256 + `, unless --sha256 names another) and its header
is exactly that one, then print every figure of the paper's Appendix C list
with its denominator. The result is labelled as what it is: ` + analyze.Label + `.

Exit 0 on success, 3 when the digest differs, 1 when the file is missing or
a header or value is wrong (the message names the line), 2 for usage errors.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return o.run(cmd, args[0]) },
	}
	cmd.Flags().StringVar(&o.sha256, "sha256", "", "expected SHA-256 (hex) of the file (default: the paper's frozen file)")
	cmd.Flags().StringVar(&o.svg, "svg", "", "also write the funnel and the latency bands as an SVG chart to this file")
	addOutputFlag(cmd, &o.output)
	return cmd
}

func (o *probeAnalyzeOptions) run(cmd *cobra.Command, file string) error {
	if err := checkOutput(cmd, o.output); err != nil {
		return err
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("probe analyze: %w", err)
	}
	r, err := analyze.Analyze(data, analyze.Options{SHA256: o.sha256})
	if errors.Is(err, analyze.ErrDigest) {
		return withCode(exitVerify, fmt.Errorf("probe analyze: %s: %w", file, err))
	} else if err != nil {
		return fmt.Errorf("probe analyze: %s: %w", file, err)
	}
	if o.svg != "" {
		var svg bytes.Buffer
		if err := analyze.WriteSVG(&svg, r); err != nil {
			return err
		}
		if err := atomicfile.WriteFile(o.svg, svg.Bytes(), 0o644); err != nil {
			return err
		}
	}
	return printOutput(cmd.OutOrStdout(), o.output, r, func(tw *tabwriter.Writer) { analyzeTable(tw, r) })
}

func analyzeTable(tw *tabwriter.Writer, r *analyze.Result) {
	p := func(k, format string, a ...any) { fmt.Fprintf(tw, "%s\t"+format+"\n", append([]any{k}, a...)...) }
	c := func(k string, x analyze.Count) { p(k, "%d of %d %s (%.3f%%)", x.N, x.Denominator, x.Of, x.Percent) }
	p("what this is", "%s", r.Label)
	p("sha256", "%s", r.SHA256)
	p("records", "%d (%d duplicate rows)", r.Records, r.DuplicateRows)
	p("unique names / URLs", "%d / %d", r.UniqueServers, r.UniqueURLs)
	c("list_ok", r.Listed)
	c("call_ok", r.Called)
	c("call_ok among listed", r.CalledAmongListed)
	c("listed, call not completed", r.ListedNotCalled)
	c("call not completed", r.NotCalled)
	p("probed", "%s to %s (%d s; dates %s)", r.First.UTC().Format(time.RFC3339), r.Last.UTC().Format(time.RFC3339), r.SpanSeconds, strings.Join(r.Dates, ", "))
	p("successful listing", "median %g ms over %d", r.Listing.MedianMs, r.Listing.N)
	p("successful call", "median %g ms over %d; P95 %g ms nearest-rank, %g ms interpolated (N-1); fastest %g ms, slowest %g ms",
		r.Call.MedianMs, r.Call.N, r.Call.P95NearestMs, r.Call.P95LinearMs, r.Call.MinMs, r.Call.MaxMs)
	c("calls at or above 1 s", r.CallsOverOneSec)
	for _, b := range r.Bands {
		p("  "+b.Label, "%d", b.Calls)
	}
	c("streak >= 3", r.StreakAtLeast3)
	var vals []int
	for v := range r.Streaks {
		vals = append(vals, v)
	}
	sort.Ints(vals)
	for _, v := range vals {
		p(fmt.Sprintf("  streak %d", v), "%d", r.Streaks[v])
	}
	p("tools column", "over %d records: sum %d, max %d (%d at max), median %g, %d with one, %d above ten, %d in 51-100",
		r.ToolsRecords, r.ToolsSum, r.ToolsMax, r.ToolsAtMax, r.ToolsMedian, r.ToolsOne, r.ToolsAboveTen, r.Tools51To100)
	p("no probed_tool", "%d (%d of them listed)", r.NoProbedTool, r.NoProbedToolListed)
	p("distinct probed tools", "%d", r.DistinctProbed)
	cols := make([]string, 0, len(r.Blanks))
	for k := range r.Blanks {
		cols = append(cols, k)
	}
	sort.Strings(cols)
	for _, k := range cols {
		if r.Blanks[k] > 0 {
			p("blank "+k, "%d", r.Blanks[k])
		}
	}
}
