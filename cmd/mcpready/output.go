package main

import (
	"bytes"
	"encoding/json"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"sigs.k8s.io/yaml"
)

// addOutputFlag adds -o/--output, the output format: table (default),
// json or yaml. Commands that print a stream print json as JSON lines.
func addOutputFlag(cmd *cobra.Command, dst *string) {
	cmd.Flags().StringVarP(dst, "output", "o", "table", "output format: table, json or yaml")
}

// checkOutput rejects an unknown -o value with the usage exit code.
func checkOutput(cmd *cobra.Command, format string) error {
	switch format {
	case "table", "json", "yaml":
		return nil
	}
	return usagef("%s: -o %q (want table, json or yaml)", cmd.Name(), format)
}

// marshal is v as JSON: protojson field names for a proto.Message.
func marshal(v any) ([]byte, error) {
	if m, ok := v.(proto.Message); ok {
		return protojson.Marshal(m)
	}
	return json.Marshal(v)
}

// printStreamItem writes one item of a stream: json as one compact line
// (JSON lines), yaml as one document starting with "---".
func printStreamItem(w io.Writer, format string, v any) error {
	b, err := encode(v, format, true)
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
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
	b, err := encode(v, format, false)
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

// encode renders v as yaml (a "---" document when stream) or as json,
// indented, or compact on one line when stream; both end in a newline.
func encode(v any, format string, stream bool) ([]byte, error) {
	raw, err := marshal(v)
	if err != nil {
		return nil, err
	}
	if format == "yaml" {
		y, err := yaml.JSONToYAML(raw)
		if err != nil || !stream {
			return y, err
		}
		return append([]byte("---\n"), y...), nil
	}
	var buf bytes.Buffer
	if stream {
		err = json.Compact(&buf, raw)
	} else {
		err = json.Indent(&buf, raw, "", "  ")
	}
	if err != nil {
		return nil, err
	}
	buf.WriteByte('\n')
	return buf.Bytes(), nil
}
