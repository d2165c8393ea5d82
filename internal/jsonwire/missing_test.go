package jsonwire

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"
)

func TestMissingKey(t *testing.T) {
	for _, tc := range []struct {
		data    string
		keys    []string
		missing string
		err     error
	}{
		{`{"text":"x","lang":"en"}`, []string{"text", "lang"}, "", nil},
		{`{"text":"x"}`, []string{"text", "lang"}, "lang", nil},
		{`{}`, []string{"text"}, "text", nil},
		{``, []string{"text"}, "text", nil},
		{` null `, []string{"text"}, "text", nil},
		{`{"Text":"x"}`, []string{"text"}, "text", nil},     // keys are exact: MCP servers read them so
		{`{"\u0074ext":"x"}`, []string{"text"}, "", nil},    // escaped, the same key
		{`{"a":{"text":1}}`, []string{"text"}, "text", nil}, // only the top level counts
		{`{"text":null}`, []string{"text"}, "", nil},        // present; its value is the schema's business
		{`{"x":[1,{"y":2}],"text":"z"}`, []string{"text"}, "", nil},
		{`{"text":"x"}`, nil, "", nil},
		{`[1]`, []string{"text"}, "", ErrSyntax},
		{`{"text":`, []string{"text"}, "", ErrSyntax},
		{`{"text":"x"} {}`, []string{"text"}, "", ErrSyntax},
	} {
		got, err := MissingKey([]byte(tc.data), tc.keys)
		if got != tc.missing || !errors.Is(err, tc.err) {
			t.Errorf("MissingKey(%s, %q) = %q, %v; want %q, %v", tc.data, tc.keys, got, err, tc.missing, tc.err)
		}
	}
	data, keys := []byte(`{"text":"hello","n":[1,2,{"a":"b"}]}`), []string{"text", "n"}
	if n := testing.AllocsPerRun(100, func() { _, _ = MissingKey(data, keys) }); n != 0 {
		t.Errorf("%v allocations for plain keys", n)
	}
}

// FuzzMissingKey checks MissingKey against encoding/json: for data that
// decodes to one object with no repeated key, the missing key is the
// first of keys the decoded map lacks.
func FuzzMissingKey(f *testing.F) {
	for _, s := range []string{`{"text":"x"}`, `{}`, `{"\u0074ext":1,"b":{"text":2}}`, `null`, `[]`, `{"a":"b","a":"c"}`} {
		f.Add(s, "text", "b")
	}
	f.Fuzz(func(t *testing.T, data, k1, k2 string) {
		keys := []string{k1, k2}
		got, err := MissingKey([]byte(data), keys)
		var m map[string]json.RawMessage
		if RepeatedKey([]byte(data)) != nil || json.Unmarshal([]byte(data), &m) != nil {
			return // malformed or ambiguous: the pipeline refuses it before
		}
		if m == nil { // null
			if err != nil || got != k1 {
				t.Fatalf("%q: %q, %v; want %q", data, got, err, k1)
			}
			return
		}
		want := ""
		if i := slices.IndexFunc(keys, func(k string) bool { _, ok := m[k]; return !ok }); i >= 0 {
			want = keys[i]
		}
		if err != nil || got != want {
			t.Fatalf("%q %q: %q, %v; want %q", data, keys, got, err, want)
		}
	})
}

func TestCaseVariant(t *testing.T) {
	for _, tc := range []struct {
		data, key, name string
	}{
		{`{"amount":5}`, "", ""},
		{`{"AMOUNT":5}`, "AMOUNT", "amount"},
		{`{"recipient":"bob","Amount":5}`, "Amount", "amount"},
		{`{"\u0041mount":5}`, "Amount", "amount"},
		{`{"order":{"AMOUNT":5}}`, "", ""},   // top level only
		{`{"ſecret":1}`, "ſecret", "secret"}, // long s folds to S, as encoding/json matches
		{``, "", ""},
	} {
		key, name, err := CaseVariant([]byte(tc.data), []string{"amount", "secret"})
		if err != nil || key != tc.key || name != tc.name {
			t.Errorf("CaseVariant(%s) = %q, %q, %v; want %q, %q", tc.data, key, name, err, tc.key, tc.name)
		}
	}
	data, names := []byte(`{"recipient":"bob","amount":5}`), []string{"amount", "recipient"}
	if n := testing.AllocsPerRun(100, func() { _, _, _ = CaseVariant(data, names) }); n != 0 {
		t.Errorf("%v allocations for plain keys", n)
	}
}
