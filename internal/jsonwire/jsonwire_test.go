package jsonwire

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

type envelope struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  *string         `json:"method"`
	Params  json.RawMessage `json:"params"`
}

func TestUnmarshal(t *testing.T) {
	var e envelope
	if err := Unmarshal([]byte(` {"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"x","arguments":{"a":[1,2]}}} `+"\n"), &e); err != nil {
		t.Fatal(err)
	}
	if e.JSONRPC != "2.0" || string(e.ID) != "7" || e.Method == nil || *e.Method != "tools/call" || string(e.Params) != `{"name":"x","arguments":{"a":[1,2]}}` {
		t.Fatalf("decoded %+v", e)
	}

	// Keys match exactly, as in the go-sdk: a differently cased key is
	// another field (encoding/json would take it for "method").
	var c envelope
	if err := Unmarshal([]byte(`{"jsonrpc":"2.0","Method":"tools/call"}`), &c); err != nil || c.Method != nil {
		t.Fatalf("case-insensitive match: %v %+v", err, c)
	}

	for name, tc := range map[string]struct {
		in   string
		want error
	}{
		"trailing value":   {`{"jsonrpc":"2.0"} {}`, ErrTrailing},
		"trailing garbage": {`{"jsonrpc":"2.0"}x`, ErrTrailing},
		"too deep":         {strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1), ErrTooDeep},
		"truncated":        {`{"jsonrpc":"2.0"`, nil},
		"not json":         {`{jsonrpc:1}`, nil},
		"wrong type":       {`{"jsonrpc":2}`, nil},
		"empty":            {``, nil},
	} {
		var e envelope
		err := Unmarshal([]byte(tc.in), &e)
		if err == nil || tc.want != nil && !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", name, err, tc.want)
		}
	}
	// Brackets inside strings do not count towards the depth.
	var s []string
	if err := Unmarshal([]byte(`["`+strings.Repeat("[", 2*MaxDepth)+`\"["]`), &s); err != nil || len(s) != 1 {
		t.Fatalf("brackets in a string: %v", err)
	}
}

func TestUnmarshalNumber(t *testing.T) {
	var v any
	if err := UnmarshalNumber([]byte(`{"n":12345678901234567890,"f":1.5}`), &v); err != nil {
		t.Fatal(err)
	}
	m := v.(map[string]any)
	if n, ok := m["n"].(json.Number); !ok || n.String() != "12345678901234567890" || m["f"].(json.Number).String() != "1.5" {
		t.Fatalf("numbers %#v", m)
	}
	if err := Unmarshal([]byte(`{"n":2}`), &v); err != nil || v.(map[string]any)["n"] != float64(2) {
		t.Fatalf("float64 numbers: %v %#v", err, v)
	}
}

// FuzzUnmarshal: never a panic; what is accepted is valid JSON, decoded as
// encoding/json decodes it when every key is written as its field's tag.
func FuzzUnmarshal(f *testing.F) {
	for _, s := range []string{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{}}`, `{"id":"a\"b","result":{"x":[1,{"y":null}]}}`,
		`[[[]]]`, `{"jsonrpc":"2.0"}  `, `"\u00e9\ud800"`, `{"method":"a","method":"b"}`, "{\"jsonrpc\":\"\xff\"}"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var e envelope
		if Unmarshal(data, &e) != nil {
			return
		}
		if !json.Valid(data) {
			t.Fatalf("accepted invalid JSON %q", data)
		}
		for _, raw := range []json.RawMessage{e.ID, e.Params} {
			if len(raw) > 0 && !json.Valid(raw) {
				t.Fatalf("raw field %q of %q is not JSON", raw, data)
			}
		}
		var std envelope
		if exactKeys(data) { // keys differing in case only are fields to encoding/json
			if err := json.Unmarshal(data, &std); err != nil {
				t.Fatalf("encoding/json refuses %q: %v", data, err)
			}
			if std.JSONRPC != e.JSONRPC || string(std.ID) != string(e.ID) || string(std.Params) != string(e.Params) || (std.Method == nil) != (e.Method == nil) ||
				std.Method != nil && *std.Method != *e.Method {
				t.Fatalf("%q: decoded %+v, encoding/json %+v", data, e, std)
			}
		}
	})
}

// exactKeys reports whether every key of data's top-level object that
// matches a field case-insensitively matches it exactly.
func exactKeys(data []byte) bool {
	var m map[string]json.RawMessage
	if json.Unmarshal(data, &m) != nil {
		return false
	}
	for k := range m {
		for _, f := range []string{"jsonrpc", "id", "method", "params"} {
			if strings.EqualFold(k, f) && k != f {
				return false
			}
		}
	}
	return true
}

// UnmarshalShared decodes as Unmarshal does, its raw fields sharing the
// input's bytes.
func TestUnmarshalShared(t *testing.T) {
	data := []byte(`{"jsonrpc":"2.0","id":1,"params":{"a":1}}`)
	var e, copied envelope
	if err := UnmarshalShared(data, &e); err != nil {
		t.Fatal(err)
	}
	if err := Unmarshal(data, &copied); err != nil {
		t.Fatal(err)
	}
	if string(e.Params) != `{"a":1}` || string(e.Params) != string(copied.Params) || e.JSONRPC != "2.0" {
		t.Fatalf("shared %+v, copied %+v", e, copied)
	}
	data[len(data)-3] = '2' // the value of "a"
	if string(e.Params) != `{"a":2}` || string(copied.Params) != `{"a":1}` {
		t.Fatalf("after a change of the input: shared %s, copied %s", e.Params, copied.Params)
	}
}

// FuzzCheckDepth: checkDepth, which scans only data with more than
// MaxDepth opening brackets, answers as the full scan (scanDepth) does.
func FuzzCheckDepth(f *testing.F) {
	deep := strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1)
	for _, s := range []string{`{"a":[1,{"b":"["}]}`, deep, deep[1 : len(deep)-1], `["` + strings.Repeat("{", 2*MaxDepth) + `"]`,
		strings.Repeat(`{"a":`, MaxDepth) + `"\"` + strings.Repeat("[", 5) + `"` + strings.Repeat("}", MaxDepth), strings.Repeat("[]", MaxDepth+1)} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if got, want := checkDepth(data), scanDepth(data); got != want {
			t.Fatalf("checkDepth %v, scanDepth %v, for %q", got, want, data)
		}
	})
}

// TestCheckDepth: data at the bound and beyond it, with brackets in
// strings, siblings and a long but shallow value.
func TestCheckDepth(t *testing.T) {
	for name, tc := range map[string]struct {
		in   string
		want error
	}{
		"at the bound":       {strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth), nil},
		"beyond it":          {strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1), ErrTooDeep},
		"objects beyond it":  {strings.Repeat(`{"a":`, MaxDepth+1) + "1" + strings.Repeat("}", MaxDepth+1), ErrTooDeep},
		"many siblings":      {"[" + strings.Repeat("[],", 2*MaxDepth) + "[]]", nil},
		"brackets in string": {`["` + strings.Repeat("[", 2*MaxDepth) + `"]`, nil},
		"long and shallow":   {`{"text":"` + strings.Repeat("x", 4*MaxDepth) + `"}`, nil},
	} {
		if got := checkDepth([]byte(tc.in)); got != tc.want {
			t.Errorf("%s: %v, want %v", name, got, tc.want)
		}
	}
}

// BenchmarkCheckDepth: a tools/call answer's size, where the scan is skipped.
func BenchmarkCheckDepth(b *testing.B) {
	data := []byte(`{"jsonrpc":"2.0","id":"mcpready-1","result":{"content":[{"type":"text","text":"` + strings.Repeat("benchmark ", 30) + `"}],"structuredContent":{"echo":"benchmark"}}}`)
	b.SetBytes(int64(len(data)))
	for range b.N {
		if checkDepth(data) != nil {
			b.Fatal("too deep")
		}
	}
}
