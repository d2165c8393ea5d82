package front

import (
	"bytes"
	"encoding/json"
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
