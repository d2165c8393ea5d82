package jsonwire

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
)

func TestRepeatedKey(t *testing.T) {
	many := func(n int, extra string) string {
		var b strings.Builder
		b.WriteString("{")
		for i := range n {
			if i > 0 {
				b.WriteString(",")
			}
			b.WriteString(`"k` + strings.Repeat("x", i) + `":1`)
		}
		return b.String() + extra + "}"
	}
	for _, tc := range []struct {
		in   string
		want error
	}{
		{`{"amount":5}`, nil},
		{`{"amount":5,"note":{"amount":500}}`, nil}, // one key at two levels
		{`[{"a":1},{"a":2}]`, nil},
		{`{"a":"\"a\"","b":["a","a"]}`, nil}, // values are not keys
		{`{}`, nil},
		{` {"a" : [ ] , "b" : { } } `, nil},
		{`"amount"`, nil},
		{`12.5e3`, nil},
		{many(40, ""), nil},
		{`{"amount":500,"amount":5}`, ErrRepeatedKey},
		{`{"amount":5,"Amount":500}`, ErrRepeatedKey},
		{`{"amount":5,"AMOUNT":500}`, ErrRepeatedKey},
		{`{"amount":5,"\u0061mount":500}`, ErrRepeatedKey}, // an escape
		{`{"kind":5,"\u212aind":500}`, ErrRepeatedKey},     // KELVIN SIGN folds to k
		{`{"status":5,"\u017ftatus":500}`, ErrRepeatedKey}, // LONG S folds to s
		{`{"σ":1,"Σ":2}`, ErrRepeatedKey},
		{`{"order":{"amount":5,"amount":500}}`, ErrRepeatedKey},
		{`[1,{"a":{"b":[{"c":1,"C":2}]}}]`, ErrRepeatedKey},
		{many(40, `,"KXXX":2`), ErrRepeatedKey}, // past the pairwise bound
		{many(16, `,"K":2`), ErrRepeatedKey},    // at the switch to a set
		{`{"a":1`, ErrSyntax},
		{`{"a" 1}`, ErrSyntax},
		{`{"a":1,}`, ErrSyntax},
		{`{a:1}`, ErrSyntax},
		{`[1,2`, ErrSyntax},
		{`{"a":1} x`, ErrSyntax},
		{`"abc`, ErrSyntax},
		{`"a\`, ErrSyntax},
		{``, ErrSyntax},
		{`{"\ud800x":1}`, nil},
		{strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1), ErrTooDeep},
		{strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth), nil},
	} {
		if got := RepeatedKey([]byte(tc.in)); !errors.Is(got, tc.want) {
			t.Errorf("RepeatedKey(%.60s) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

// FuzzRepeatedKey checks RepeatedKey against a reference built on
// encoding/json's tokenizer and its key folding, for valid JSON.
func FuzzRepeatedKey(f *testing.F) {
	for _, s := range []string{`{"a":1,"A":2}`, `{"a":{"b":1},"c":[{"d":1,"d":2}]}`, `{"\u212a":1,"k":2}`, `[1,"x",null,true]`, `{"é":1,"É":2}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got := RepeatedKey(data) // never panics
		if !json.Valid(data) {
			return
		}
		want, deep := referenceRepeated(data)
		switch {
		case deep:
			if !errors.Is(got, ErrTooDeep) {
				t.Fatalf("%q: %v, want ErrTooDeep", data, got)
			}
		case want != errors.Is(got, ErrRepeatedKey) || (!want && got != nil):
			t.Fatalf("%q: %v, reference repeated=%v", data, got, want)
		}
	})
}

// referenceRepeated reports whether valid JSON data has an object with a
// key twice under foldKey, and whether it nests deeper than MaxDepth.
func referenceRepeated(data []byte) (repeated, deep bool) {
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	type frame struct {
		object, wantKey bool
		keys            map[string]bool
	}
	var stack []*frame
	for {
		tok, err := d.Token()
		if err == io.EOF {
			return repeated, deep
		}
		if err != nil {
			panic(err)
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		switch v := tok.(type) {
		case json.Delim:
			switch v {
			case '{', '[':
				if top != nil && top.object {
					top.wantKey = true
				}
				stack = append(stack, &frame{object: v == '{', wantKey: true, keys: map[string]bool{}})
				if len(stack) > MaxDepth {
					deep = true
				}
			default:
				stack = stack[:len(stack)-1]
			}
		default:
			if top != nil && top.object {
				if top.wantKey {
					k := string(foldKey(v.(string)))
					repeated = repeated || top.keys[k]
					top.keys[k] = true
				}
				top.wantKey = !top.wantKey
			}
		}
	}
}

func BenchmarkRepeatedKey(b *testing.B) {
	args := []byte(`{"text":"hello, world","count":3,"options":{"lang":"en","tags":["a","b"],"dry":false}}`)
	b.ReportAllocs()
	for b.Loop() {
		if err := RepeatedKey(args); err != nil {
			b.Fatal(err)
		}
	}
}
