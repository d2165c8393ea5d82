package front

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// appendResult writes what MarshalJSON writes, and leaves every result it
// does not handle to it.
func TestAppendResult(t *testing.T) {
	text := func(s ...string) []mcp.Content {
		var cs []mcp.Content
		for _, x := range s {
			cs = append(cs, &mcp.TextContent{Text: x})
		}
		return cs
	}
	var decoded mcp.CallToolResult
	if err := decoded.UnmarshalJSON([]byte(`{"content":[{"type":"text","text":"t"}],"resultType":"complete"}`)); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		res     *mcp.CallToolResult
		handled bool
	}{
		"echo":                 {&mcp.CallToolResult{Content: text("benchmark"), StructuredContent: map[string]any{"echo": "benchmark"}}, true},
		"escapes":              {&mcp.CallToolResult{Content: text("<b> & é \u2028 \"q\" \x01", "\xff\xfe"), IsError: true}, true},
		"no content":           {&mcp.CallToolResult{}, true},
		"empty":                {&mcp.CallToolResult{Content: []mcp.Content{}}, true},
		"meta":                 {&mcp.CallToolResult{Meta: mcp.Meta{"b": 1, "a": []any{"x", nil}}, Content: text("")}, true},
		"numbers":              {&mcp.CallToolResult{Content: text("n"), StructuredContent: map[string]any{"n": json.Number("12345678901234567890"), "f": 1.5, "z": nil}}, true},
		"structured empty map": {&mcp.CallToolResult{StructuredContent: map[string]any{}}, true},
		"image":                {&mcp.CallToolResult{Content: []mcp.Content{&mcp.ImageContent{Data: []byte("x"), MIMEType: "image/png"}}}, false},
		"text meta":            {&mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "x", Meta: mcp.Meta{"k": "v"}}}}, false},
		"annotations":          {&mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "x", Annotations: &mcp.Annotations{Priority: 1}}}}, false},
		"request state":        {&mcp.CallToolResult{RequestState: "s"}, false},
		"result type":          {&decoded, false},
	} {
		want, err := tc.res.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		out.WriteString("prefix")
		ok, err := appendResult(&out, tc.res)
		switch {
		case err != nil:
			t.Errorf("%s: %v", name, err)
		case ok != tc.handled:
			t.Errorf("%s: handled %v, want %v", name, ok, tc.handled)
		case ok && out.String() != "prefix"+string(want):
			t.Errorf("%s:\n wrote %s\n  want %s", name, out.String()[6:], want)
		case !ok && out.String() != "prefix":
			t.Errorf("%s: left to MarshalJSON but wrote %q", name, out.String())
		}
	}
}

// FuzzAppendResult: for any texts and structured value, the bytes are
// MarshalJSON's.
func FuzzAppendResult(f *testing.F) {
	f.Add("benchmark", `{"echo":"benchmark"}`, false)
	f.Add("<&>\u2028\xff", `[1,2.5e10,"x",null,{"a":{}}]`, true)
	f.Fuzz(func(t *testing.T, text, structured string, isError bool) {
		res := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}, IsError: isError}
		var sc any
		if json.Unmarshal([]byte(structured), &sc) == nil {
			res.StructuredContent = sc
		}
		want, err := res.MarshalJSON()
		if err != nil {
			return
		}
		var out bytes.Buffer
		if ok, err := appendResult(&out, res); !ok || err != nil || !bytes.Equal(out.Bytes(), want) {
			t.Fatalf("appendResult %v %v %s, MarshalJSON %s", ok, err, out.Bytes(), want)
		}
	})
}

// appendValue writes what json.Marshal writes for decoded JSON trees, and
// leaves every other value (and non-finite numbers, cycles' depth) to it.
func TestAppendValue(t *testing.T) {
	deep := any("x")
	for range maxAppendDepth + 1 {
		deep = []any{deep}
	}
	for name, tc := range map[string]struct {
		v       any
		handled bool
	}{
		"tree":          {map[string]any{"b": []any{1.0, -0.0, 1e21, 1e-7, 123456789.0, 0.1, true, false, nil}, "a": map[string]any{}, "": []any{}, "<&>": "\u2029\x7f\x00\ufffd\xc3"}, true},
		"many keys":     {map[string]any{"k1": 1.0, "k2": 2.0, "k3": 3.0, "k4": 4.0, "k5": 5.0, "k6": 6.0, "k7": 7.0, "k8": 8.0, "k9": 9.0, "K": "é"}, true},
		"nil map":       {map[string]any(nil), true},
		"nil slice":     {[]any(nil), true},
		"small floats":  {[]any{5e-324, 1e-6, 9.99e-7, -1e-10, 1.7976931348623157e308}, true},
		"number":        {json.Number("1"), false},
		"nested number": {map[string]any{"a": []any{json.Number("1")}}, false},
		"NaN":           {[]any{math.NaN()}, false},
		"struct":        {struct{ A int }{1}, false},
		"too deep":      {deep, false},
	} {
		got, ok := appendValue([]byte("prefix"), tc.v, 0)
		if ok != tc.handled {
			t.Errorf("%s: handled %v, want %v", name, ok, tc.handled)
			continue
		}
		if !ok {
			continue
		}
		want, err := json.Marshal(tc.v)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if string(got) != "prefix"+string(want) {
			t.Errorf("%s:\n wrote %s\n  want %s", name, got[6:], want)
		}
	}
}

// FuzzAppendValue: for any JSON document decoded into any, and any string,
// the bytes are json.Marshal's.
func FuzzAppendValue(f *testing.F) {
	f.Add(`{"echo":"benchmark","n":[1,2.5e-10,1e21,-0,null,true]}`, "<&>\u2028\xff\x01\"\\")
	f.Add(`[{"b":{},"a":[]},"\u007f\ud800"]`, "é\t\n\r\b\f")
	f.Fuzz(func(t *testing.T, doc, s string) {
		var v any
		if json.Unmarshal([]byte(doc), &v) == nil {
			want, err := json.Marshal(v)
			if err != nil {
				t.Fatal(err)
			}
			if got, ok := appendValue(nil, v, 0); !ok || !bytes.Equal(got, want) {
				t.Fatalf("appendValue %v %s, json.Marshal %s", ok, got, want)
			}
		}
		want, _ := json.Marshal(s)
		if got := appendString(nil, s); !bytes.Equal(got, want) {
			t.Fatalf("appendString %s, json.Marshal %s", got, want)
		}
	})
}

// BenchmarkAppendResult: the echo answer of the proxy benchmarks.
func BenchmarkAppendResult(b *testing.B) {
	res := &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: `{"echo":"benchmark"}`}}, StructuredContent: map[string]any{"echo": "benchmark"}}
	var out bytes.Buffer
	b.ReportAllocs()
	for range b.N {
		out.Reset()
		if ok, err := appendResult(&out, res); !ok || err != nil {
			b.Fatal(ok, err)
		}
	}
}

// encodeResponse writes one JSON-RPC message and nothing after it: a
// result, or a call's error as an internal error that keeps the request's
// id.
func TestEncodeResponse(t *testing.T) {
	for name, tc := range map[string]struct {
		res  *mcp.CallToolResult
		err  error
		want string
	}{
		"result": {&mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "hi"}}}, nil,
			`{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"hi"}]}}`},
		"error": {nil, errors.New("encoding result: <bad>"),
			`{"jsonrpc":"2.0","id":7,"error":{"code":-32603,"message":"encoding result: \u003cbad\u003e"}}`},
	} {
		var out bytes.Buffer
		if err := encodeResponse(&out, json.RawMessage("7"), tc.res, tc.err); err != nil || out.String() != tc.want {
			t.Errorf("%s: %q (%v), want %q", name, out.String(), err, tc.want)
		}
	}
}
