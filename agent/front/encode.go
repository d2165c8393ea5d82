package front

import (
	"bytes"
	"encoding/json"
	"reflect"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// resultTypeField is the index of CallToolResult's unexported result type
// (which MarshalJSON writes as "resultType"); nil when the go-sdk has no
// such string field, and appendResult then always leaves results to
// MarshalJSON.
var resultTypeField = func() []int {
	f, ok := reflect.TypeFor[mcp.CallToolResult]().FieldByName("resultType")
	if !ok || f.Type.Kind() != reflect.String {
		return nil
	}
	return f.Index
}()

// appendResult appends the JSON of res exactly as res.MarshalJSON writes
// it, for the common result (text contents without _meta or annotations,
// no result type, input requests or request state) without its
// reflection over an embedded wire struct and a second encoding of every
// content; ok is false, and nothing is appended, for any other result.
// TestAppendResult compares the two.
func appendResult(out *bytes.Buffer, res *mcp.CallToolResult) (ok bool, err error) {
	if resultTypeField == nil || res.InputRequests != nil || res.RequestState != "" ||
		reflect.ValueOf(res).Elem().FieldByIndex(resultTypeField).String() != "" {
		return false, nil
	}
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); !ok || t == nil || t.Meta != nil || t.Annotations != nil {
			return false, nil
		}
	}
	start := out.Len()
	fail := func(err error) (bool, error) {
		out.Truncate(start)
		return true, err
	}
	out.WriteByte('{')
	if len(res.Meta) > 0 {
		b, err := json.Marshal(res.Meta)
		if err != nil {
			return fail(err)
		}
		out.WriteString(`"_meta":`)
		out.Write(b)
		out.WriteByte(',')
	}
	out.WriteString(`"content":`)
	if res.Content == nil {
		out.WriteString("null")
	} else {
		out.WriteByte('[')
		for i, c := range res.Content {
			if i > 0 {
				out.WriteByte(',')
			}
			b, err := json.Marshal(c.(*mcp.TextContent).Text)
			if err != nil {
				return fail(err)
			}
			out.WriteString(`{"type":"text","text":`)
			out.Write(b)
			out.WriteByte('}')
		}
		out.WriteByte(']')
	}
	if res.StructuredContent != nil {
		b, err := json.Marshal(res.StructuredContent)
		if err != nil {
			return fail(err)
		}
		out.WriteString(`,"structuredContent":`)
		out.Write(b)
	}
	if res.IsError {
		out.WriteString(`,"isError":true`)
	}
	out.WriteByte('}')
	return true, nil
}
