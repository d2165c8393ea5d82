package receipt_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/mcpready/mcpready/agent/receipt"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/internal/canonjson"
)

// FuzzRedact: for any arguments and any allow-list (comma-separated in
// keep), Redact never panics; it keeps only listed top-level fields of a
// JSON object, each as the field's string or its canonical JSON; and the
// arguments digest is that of their canonical form, so that two spellings
// of the same arguments digest alike.
func FuzzRedact(f *testing.F) {
	f.Add([]byte(`{"path":"/tmp/x","token":"s3cret"}`), "path")
	f.Add([]byte(`{"n":1e2,"o":{"b":1,"a":[true,null]}}`), "n,o")
	f.Add([]byte(`{"a":"x","a":"s3cret"}`), "a")
	f.Add([]byte(`["path","s3cret"]`), "path")
	f.Add([]byte(`{"path":"\ud800"}`), "path")
	f.Add([]byte(`not json`), "")
	f.Add([]byte(``), "path")
	f.Fuzz(func(t *testing.T, args []byte, keep string) {
		var pol receipt.Redaction
		if keep != "" {
			pol.KeepArguments = strings.Split(keep, ",")
		}
		var r mcpreadyv1.Receipt
		receipt.Redact(&r, args, pol)
		if r.ArgumentsDigest != receipt.ArgumentsDigest(args) {
			t.Fatalf("arguments digest %s, want ArgumentsDigest's %s", r.ArgumentsDigest, receipt.ArgumentsDigest(args))
		}
		if c, err := canonjson.Transform(args); err == nil && receipt.ArgumentsDigest(c) != r.ArgumentsDigest {
			t.Fatalf("canonical form %s digests differently from %q", c, args)
		}
		if len(r.KeptArguments) == 0 {
			return
		}
		var obj map[string]json.RawMessage
		if json.Unmarshal(args, &obj) != nil {
			t.Fatalf("kept %v from arguments that are not a JSON object: %q", r.KeptArguments, args)
		}
		for name, kept := range r.KeptArguments {
			if !slices.Contains(pol.KeepArguments, name) {
				t.Fatalf("kept %q, which the allow-list %q does not name", name, keep)
			}
			v, ok := obj[name]
			if !ok {
				t.Fatalf("kept %q, which the arguments do not have", name)
			}
			var s string
			if json.Unmarshal(v, &s) == nil {
				if kept != s {
					t.Fatalf("kept %q as %q, want the string %q", name, kept, s)
				}
				continue
			}
			if c, err := canonjson.Transform(v); err != nil || kept != string(c) {
				t.Fatalf("kept %q as %q, want its canonical JSON %q (%v)", name, kept, c, err)
			}
		}
	})
}
