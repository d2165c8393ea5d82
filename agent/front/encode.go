package front

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"slices"
	"strconv"
	"unicode/utf8"

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
		out.WriteString(`"_meta":`)
		if err := writeValue(out, map[string]any(res.Meta)); err != nil {
			return fail(err)
		}
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
			out.WriteString(`{"type":"text","text":`)
			out.Write(appendString(out.AvailableBuffer(), c.(*mcp.TextContent).Text))
			out.WriteByte('}')
		}
		out.WriteByte(']')
	}
	if res.StructuredContent != nil {
		out.WriteString(`,"structuredContent":`)
		if err := writeValue(out, res.StructuredContent); err != nil {
			return fail(err)
		}
	}
	if res.IsError {
		out.WriteString(`,"isError":true`)
	}
	out.WriteByte('}')
	return true, nil
}

// writeValue writes v as json.Marshal writes it: directly (appendValue)
// when v is a decoded JSON tree, else through json.Marshal.
func writeValue(out *bytes.Buffer, v any) error {
	if b, ok := appendValue(out.AvailableBuffer(), v, 0); ok {
		out.Write(b)
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	out.Write(b)
	return nil
}

// maxAppendDepth bounds appendValue's recursion; deeper values (and
// cycles, which encoding/json reports) are left to encoding/json.
const maxAppendDepth = 1000

// appendValue appends v as json.Marshal writes it, for the values a JSON
// tree decoded into any holds (nil, bool, finite float64, string,
// map[string]any with its keys sorted, []any), without reflection; ok is
// false, and what was appended is to be dropped, for any other value.
// TestAppendValue and FuzzAppendValue compare it with json.Marshal.
func appendValue(dst []byte, v any, depth int) (_ []byte, ok bool) {
	if depth > maxAppendDepth {
		return dst, false
	}
	switch x := v.(type) {
	case nil:
		return append(dst, "null"...), true
	case bool:
		return strconv.AppendBool(dst, x), true
	case string:
		return appendString(dst, x), true
	case float64:
		if math.IsInf(x, 0) || math.IsNaN(x) {
			return dst, false // encoding/json's error
		}
		return appendFloat(dst, x), true
	case []any:
		if x == nil {
			return append(dst, "null"...), true
		}
		dst = append(dst, '[')
		for i, e := range x {
			if i > 0 {
				dst = append(dst, ',')
			}
			if dst, ok = appendValue(dst, e, depth+1); !ok {
				return dst, false
			}
		}
		return append(dst, ']'), true
	case map[string]any:
		if x == nil {
			return append(dst, "null"...), true
		}
		var small [8]string
		keys := small[:0]
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		dst = append(dst, '{')
		for i, k := range keys {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(appendString(dst, k), ':')
			if dst, ok = appendValue(dst, x[k], depth+1); !ok {
				return dst, false
			}
		}
		return append(dst, '}'), true
	}
	return dst, false
}

// appendFloat appends a finite f as encoding/json writes a float64: like
// ES6 number to string conversion, exponents unpadded.
func appendFloat(dst []byte, f float64) []byte {
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	dst = strconv.AppendFloat(dst, f, format, -1, 64)
	if n := len(dst); format == 'e' && n >= 4 && dst[n-4] == 'e' && dst[n-3] == '-' && dst[n-2] == '0' {
		dst[n-2] = dst[n-1] // e-09 to e-9
		dst = dst[:n-1]
	}
	return dst
}

// appendString appends s quoted as encoding/json writes a string (HTML
// characters, U+2028 and U+2029 escaped, invalid UTF-8 as U+FFFD).
func appendString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' && b != '<' && b != '>' && b != '&' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '\\', '"':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[b>>4], hex[b&0xF])
			}
			i++
			start = i
			continue
		}
		c, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case c == utf8.RuneError && size == 1:
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
		case c == '\u2028' || c == '\u2029':
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hex[c&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
