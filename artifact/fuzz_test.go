package artifact

import (
	"bytes"
	"testing"
)

// FuzzParse checks that Parse never panics and that whatever it accepts
// canonicalises to JSON that parses back to the same canonical bytes (the
// property signature verification relies on).
func FuzzParse(f *testing.F) {
	for _, s := range samples {
		f.Add([]byte(s))
	}
	f.Add([]byte(`{"apiVersion":"mcpready.dev/v1","kind":"Policy","metadata":{"name":"p"},"spec":null}`))
	f.Add([]byte(methodsPolicy))
	f.Add([]byte("apiVersion: mcpready.dev/v1\nkind: Policy\nmetadata: {name: p}\nspec:\n  inputClasses:\n  - {name: bulk, tools: \"a/*\", when: \"size(args.ids) > 2\"}\n"))
	f.Add([]byte("apiVersion: mcpready.dev/v1\nkind: Evidence\nmetadata: {name: e}\nspec: {windowStart: \"2026-01-01T00:00:00.000000001+01:00\"}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		obj, err := Parse(data)
		if err != nil {
			return
		}
		c1, err := obj.CanonicalJSON()
		if err != nil {
			t.Fatalf("parsed object does not canonicalise: %v", err)
		}
		again, err := Parse(c1)
		if err != nil {
			t.Fatalf("canonical JSON does not parse: %v\n%s", err, c1)
		}
		c2, err := again.CanonicalJSON()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(c1, c2) {
			t.Fatalf("canonical JSON not stable:\n%s\n%s", c1, c2)
		}
	})
}
