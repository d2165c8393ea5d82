package pin

import (
	"encoding/json"
	"testing"

	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
)

// refHints reads the hints the way the MCP schema defines them, through a
// generic decode: the annotations are a JSON object, each hint is its exact
// (case-sensitive) key, a boolean, null or absent meaning unset; any other
// value, or annotations that are not an object, give no hints.
func refHints(ann json.RawMessage) (readOnly, idempotent bool, destructive *bool, ok bool) {
	var v any
	if absent(ann) || json.Unmarshal(ann, &v) != nil {
		return false, false, nil, false
	}
	m, isObject := v.(map[string]any)
	if !isObject {
		return false, false, nil, false
	}
	hint := func(key string) (*bool, bool) {
		switch x := m[key].(type) {
		case nil:
			return nil, true
		case bool:
			return &x, true
		}
		return nil, false
	}
	r, ok1 := hint("readOnlyHint")
	d, ok2 := hint("destructiveHint")
	i, ok3 := hint("idempotentHint")
	if !ok1 || !ok2 || !ok3 {
		return false, false, nil, false
	}
	return r != nil && *r, i != nil && *i, d, true
}

// FuzzParseHints: parseHints agrees with a generic encoding/json decode of
// the same annotations read by exact key, and the classes derived from the
// hints follow from them.
func FuzzParseHints(f *testing.F) {
	for _, s := range []string{
		`{"readOnlyHint":true}`, "{\n \"readOnlyHint\": true\n}", `{"readOnlyHint":false}`, `{"destructiveHint":true}`,
		`{"destructiveHint":false}`, `{"destructiveHint":false,"idempotentHint":true}`, `{"readOnlyHint":true,"title":"x"}`,
		``, `null`, ` null `, `{}`, `[]`, `true`, `"readOnlyHint"`, `{"readOnlyHint":1}`, `{"destructiveHint":null}`,
		`{"readOnlyHint":"true"}`, `{"READONLYHINT":true}`, `{"readOnlyHint":false,"ReadOnlyHint":true}`,
		`{"destructiveHint":true,"destructiveHint":false}`, `{"idempotentHint":true,"readOnlyHint":{}}`, `{"readOnlyHint":true`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		ann := json.RawMessage(b)
		h, ok := parseHints(ann)
		readOnly, idempotent, destructive, refOK := refHints(ann)
		if ok != refOK {
			t.Fatalf("%q: parsed %v, reference %v", b, ok, refOK)
		}
		if !ok {
			if h != (hints{}) {
				t.Fatalf("%q: refused, but hints %+v", b, h)
			}
			return
		}
		if h.ReadOnly != readOnly || h.Idempotent != idempotent || (h.Destructive == nil) != (destructive == nil) ||
			h.Destructive != nil && *h.Destructive != *destructive {
			t.Fatalf("%q: hints %+v, reference readOnly=%v idempotent=%v destructive=%v", b, h, readOnly, idempotent, destructive)
		}
		wantSide := mcpreadyv1.SideEffectClass_SIDE_EFFECT_CLASS_UNKNOWN
		switch {
		case readOnly:
			wantSide = mcpreadyv1.SideEffectClass_SIDE_EFFECT_CLASS_READ_ONLY
		case destructive != nil && *destructive:
			wantSide = mcpreadyv1.SideEffectClass_SIDE_EFFECT_CLASS_DESTRUCTIVE
		case destructive != nil:
			wantSide = mcpreadyv1.SideEffectClass_SIDE_EFFECT_CLASS_STATE_CHANGING
		}
		if got := SideEffectOf(ann); got != wantSide {
			t.Fatalf("%q: side effect %v, want %v", b, got, wantSide)
		}
		if natural := IdempotencyOf(ann) == mcpreadyv1.IdempotencyClass_IDEMPOTENCY_CLASS_NATURALLY_IDEMPOTENT; natural != (readOnly || idempotent) {
			t.Fatalf("%q: naturally idempotent %v", b, natural)
		}
	})
}
