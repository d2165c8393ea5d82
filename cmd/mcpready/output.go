package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"sigs.k8s.io/yaml"
)

// addOutputFlag adds -o/--output (table, json or yaml; default table).
func addOutputFlag(cmd *cobra.Command, dst *string) {
	cmd.Flags().StringVarP(dst, "output", "o", "table", "output format: table, json or yaml")
}

// checkOutput rejects an unknown -o value with the usage exit code.
func checkOutput(cmd *cobra.Command, format string) error {
	switch format {
	case "table", "json", "yaml":
		return nil
	}
	return withCode(exitUsage, fmt.Errorf("%s: -o %q (want table, json or yaml)", cmd.Name(), format))
}

// printOutput writes v as indented JSON or YAML, or, for "table", calls
// table with a tab writer that it flushes. v may be a proto.Message
// (protojson field names), json.RawMessage, or anything encoding/json takes.
func printOutput(w io.Writer, format string, v any, table func(tw *tabwriter.Writer)) error {
	if format == "table" {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		table(tw)
		return tw.Flush()
	}
	var raw []byte
	var err error
	if m, ok := v.(proto.Message); ok {
		raw, err = protojson.Marshal(m)
	} else {
		raw, err = json.Marshal(v)
	}
	if err != nil {
		return err
	}
	if format == "yaml" {
		y, err := yaml.JSONToYAML(raw)
		if err != nil {
			return err
		}
		_, err = w.Write(y)
		return err
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		return err
	}
	buf.WriteByte('\n')
	_, err = w.Write(buf.Bytes())
	return err
}
