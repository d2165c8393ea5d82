package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"text/tabwriter"

	"github.com/spf13/cobra"
)

// versionInfo is what `mcpready version` prints, read from the build
// information the Go toolchain embeds in the binary.
type versionInfo struct {
	Version   string `json:"version"`
	Revision  string `json:"revision,omitempty"`
	Time      string `json:"time,omitempty"`
	Modified  bool   `json:"modified,omitempty"`
	GoVersion string `json:"goVersion"`
	Platform  string `json:"platform"`
}

// buildVersion reads the module version and the VCS stamp of this binary.
// A binary built without module information reports version "unknown".
func buildVersion() versionInfo {
	v := versionInfo{Version: "unknown", GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return v
	}
	if bi.Main.Version != "" {
		v.Version = bi.Main.Version
	}
	if bi.GoVersion != "" {
		v.GoVersion = bi.GoVersion
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Revision = s.Value
		case "vcs.time":
			v.Time = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	return v
}

// versionOptions are the flags of version.
type versionOptions struct{ output string }

func newVersionCmd() *cobra.Command {
	o := &versionOptions{}
	cmd := &cobra.Command{
		Use:   "version [-o table|json|yaml]",
		Short: "Print the version of this binary, from its build information",
		Long: `Print the module version, VCS revision and time, whether the tree was
modified, the Go version and the platform, as recorded by the Go toolchain
in this binary.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(cmd, o.output); err != nil {
				return err
			}
			v := buildVersion()
			return printOutput(cmd.OutOrStdout(), o.output, v, func(tw *tabwriter.Writer) {
				fmt.Fprintf(tw, "Version:\t%s\n", v.Version)
				fmt.Fprintf(tw, "Revision:\t%s\n", orDash(v.Revision))
				fmt.Fprintf(tw, "Time:\t%s\n", orDash(v.Time))
				fmt.Fprintf(tw, "Modified:\t%v\n", v.Modified)
				fmt.Fprintf(tw, "Go:\t%s\n", v.GoVersion)
				fmt.Fprintf(tw, "Platform:\t%s\n", v.Platform)
			})
		},
	}
	addOutputFlag(cmd, &o.output)
	return cmd
}
