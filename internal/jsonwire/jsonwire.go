// Package jsonwire decodes the JSON of MCP messages on the agent's call
// path (JSON-RPC envelopes, tools/call parameters and results) by the
// go-sdk's own rules: object keys match struct fields exactly (never
// case-insensitively, so the agent and a go-sdk peer cannot read one
// message two ways), nesting is bounded, and nothing may follow the value.
// It is faster than encoding/json, which the call path's decoding was
// measured to spend most of its time in.
//
// It only decodes. It must not be used for configuration, signed artifacts
// or receipts, which keep encoding/json's and protojson's rules.
package jsonwire

import (
	"bytes"
	"errors"
	"fmt"

	segjson "github.com/segmentio/encoding/json"
)

// MaxDepth is the deepest nesting of objects and arrays accepted, the
// go-sdk's bound.
const MaxDepth = 1000

// ErrTooDeep is returned for a value nested deeper than MaxDepth.
var ErrTooDeep = fmt.Errorf("json: nesting deeper than %d", MaxDepth)

// ErrTrailing is returned for data that goes on after its value.
var ErrTrailing = errors.New("json: data after the value")

// Unmarshal decodes the JSON value data into v: numbers into an
// interface as float64, as encoding/json does.
func Unmarshal(data []byte, v any) error { return parse(data, v, 0) }

// UnmarshalShared is Unmarshal with json.RawMessage fields sharing data's
// bytes instead of copies: data must then not change while v is in use.
func UnmarshalShared(data []byte, v any) error { return parse(data, v, segjson.DontCopyRawMessage) }

// UnmarshalNumber is Unmarshal with numbers into an interface as
// json.Number (encoding/json's UseNumber): exact.
func UnmarshalNumber(data []byte, v any) error { return parse(data, v, segjson.UseNumber) }

func parse(data []byte, v any, flags segjson.ParseFlags) error {
	if err := checkDepth(data); err != nil {
		return err
	}
	rest, err := segjson.Parse(data, v, flags|segjson.DontMatchCaseInsensitiveStructFields)
	if err != nil {
		return err
	}
	for _, c := range rest {
		if c != ' ' && c != '\t' && c != '\r' && c != '\n' {
			return ErrTrailing
		}
	}
	return nil
}

// checkDepth returns ErrTooDeep when data nests deeper than MaxDepth.
// The depth never exceeds the number of opening brackets (those inside
// strings included), which is counted first, vectorised: only data with
// more than MaxDepth of them is scanned (scanDepth).
func checkDepth(data []byte) error {
	if len(data) <= MaxDepth || bytes.Count(data, openObject)+bytes.Count(data, openArray) <= MaxDepth {
		return nil
	}
	return scanDepth(data)
}

var openObject, openArray = []byte{'{'}, []byte{'['}

// scanDepth scans data once for its nesting, skipping string contents.
func scanDepth(data []byte) error {
	depth := 0
	for i := 0; i < len(data); i++ {
		switch data[i] {
		case '"':
			for i++; i < len(data) && data[i] != '"'; i++ {
				if data[i] == '\\' {
					i++
				}
			}
		case '{', '[':
			if depth++; depth > MaxDepth {
				return ErrTooDeep
			}
		case '}', ']':
			depth--
		}
	}
	return nil
}
