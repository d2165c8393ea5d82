package validate

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

const echoSchema = `{"type":"object","required":["echo"],"properties":{"echo":{"type":"string","description":"text"}},"additionalProperties":false}`

var simpleSchemas = []string{
	echoSchema,
	`{"type":"object","properties":{"n":{"type":"integer"},"tags":{"type":"array","items":{"type":"string"}},"opt":{"type":["null","string"]}},"required":["n"]}`,
	`{"type":"array","items":{"type":"object","properties":{"x":{"type":"number"},"ok":{"type":"boolean"}},"additionalProperties":false}}`,
	`{"title":"any object","type":"object"}`,
	`{}`,
}

var simpleInstances = []string{
	`{"echo":"benchmark"}`, `{"echo":7}`, `{}`, `{"echo":"x","extra":1}`, `{"n":3}`, `{"n":3.5}`, `{"n":1.0}`, `{"n":1e2}`,
	`{"n":-12,"tags":["a","b"],"opt":null}`, `{"n":1,"tags":["a",2]}`, `{"n":1,"opt":true}`, `[{"x":1.5,"ok":true},{"x":"no"}]`,
	`[{"x":1},{"y":2}]`, `[]`, `null`, `"s"`, `{"n":123456789012345678901234567890}`,
}

// TestSimpleSchemaAgrees: the schemas the go-sdk derives from Go structs
// take the simple path, and on them it gives the full validator's verdict
// both ways (passes exactly what it passes), for instances decoded with
// json.Number (jsonschema.UnmarshalJSON) and with float64 numbers.
func TestSimpleSchemaAgrees(t *testing.T) {
	for _, s := range simpleSchemas {
		p, err := compile(json.RawMessage(s))
		if err != nil {
			t.Fatal(err)
		}
		if p.simple == nil {
			t.Fatalf("%s: not taken as simple", s)
		}
		for _, in := range simpleInstances {
			for _, v := range decodings(t, []byte(in)) {
				full := p.full.Validate(v) == nil
				fast := p.simple.passes(v)
				if fast && !full {
					t.Errorf("%s on %s (%T): simple passes what the full validator fails", s, in, v)
				}
				if full && !fast && !needsFull(in) {
					t.Errorf("%s on %s: simple leaves a valid instance to the full validator", s, in)
				}
			}
		}
	}
	for _, s := range []string{`{"type":"object","properties":{"n":{"type":"number","minimum":0}}}`, `{"$schema":"https://json-schema.org/draft/2020-12/schema"}`,
		`{"type":"object","additionalProperties":{"type":"string"}}`, `{"enum":[1,2]}`, `true`, `{"properties":{"a":true}}`} {
		if p, err := compile(json.RawMessage(s)); err != nil || p.simple != nil {
			t.Errorf("%s: taken as simple (%v)", s, err)
		}
	}
}

// needsFull: instances whose integers the simple check leaves to the full
// validator (1.0, 1e2, beyond 2^53).
func needsFull(in string) bool {
	return in == `{"n":1.0}` || in == `{"n":1e2}` || in == `{"n":123456789012345678901234567890}`
}

func decodings(t testing.TB, b []byte) []any {
	var out []any
	if v, err := jsonschema.UnmarshalJSON(bytes.NewReader(b)); err == nil {
		out = append(out, v)
	}
	var f any
	if json.Unmarshal(b, &f) == nil {
		out = append(out, f)
	}
	return out
}

// FuzzSimpleSchema: for any schema the simple path takes and any JSON
// instance, it never passes what the full validator fails.
func FuzzSimpleSchema(f *testing.F) {
	for _, s := range simpleSchemas {
		for _, in := range simpleInstances {
			f.Add([]byte(s), []byte(in))
		}
	}
	f.Fuzz(func(t *testing.T, schema, instance []byte) {
		p, err := compile(schema)
		if err != nil || p.simple == nil {
			return
		}
		for _, v := range decodings(t, instance) {
			if p.simple.passes(v) && p.full.Validate(v) != nil {
				t.Fatalf("schema %s, instance %s (%T): simple passes what the full validator fails", schema, instance, v)
			}
		}
	})
}
