package front

// SEP-2243 parameter headers: a 2026-07-28 tools/call carries, for every
// argument its tool's input schema marks with "x-mcp-header": NAME, an
// Mcp-Param-NAME header holding the same value (Base64 inside
// "=?base64?...?=" when it is not plain ASCII). Intermediaries route on
// these headers, so a request whose headers and body disagree is refused
// with HTTP 400 and HeaderMismatch (-32020) before anything is decided.
// The go-sdk checks this only for tools its own server registered; the
// front's tools are the upstream's, so the front checks it here.

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"

	"github.com/mcpready/mcpready/agent/upstream"
	"github.com/mcpready/mcpready/internal/jsonwire"
)

// codeHeaderMismatch is the SEP-2243 JSON-RPC error code.
const codeHeaderMismatch = -32020

// ErrParamHeader is the error of a tools/call whose Mcp-Param-* headers do
// not match its arguments.
var ErrParamHeader = errors.New("header mismatch")

// schemaProp is the part of a JSON Schema property parameter headers use.
type schemaProp struct {
	Type       any                   `json:"type"`
	Header     *string               `json:"x-mcp-header"`
	Properties map[string]schemaProp `json:"properties"`
}

// headerBinding is one argument (a property path) carried in a header.
type headerBinding struct {
	path   []string
	header string
}

// headerBindings lists the x-mcp-header annotations of an input schema
// (any JSON-encodable form), at any depth.
func headerBindings(schema any) []headerBinding {
	raw, err := json.Marshal(schema)
	if err != nil {
		return nil
	}
	var root schemaProp
	if jsonwire.Unmarshal(raw, &root) != nil { // by exact key, as MCP clients read the schema
		return nil
	}
	var out []headerBinding
	var walk func(props map[string]schemaProp, at []string)
	walk = func(props map[string]schemaProp, at []string) {
		for name, p := range props {
			path := append(append([]string(nil), at...), name)
			if p.Header != nil && *p.Header != "" {
				out = append(out, headerBinding{path: path, header: *p.Header})
			}
			walk(p.Properties, path)
		}
	}
	walk(root.Properties, nil)
	return out
}

// checkParamHeaders reports (ErrParamHeader) the first binding whose header
// in h disagrees with the call's arguments.
func checkParamHeaders(h http.Header, bindings []headerBinding, arguments json.RawMessage) error {
	if len(bindings) == 0 {
		return nil
	}
	var args map[string]json.RawMessage
	_ = json.Unmarshal(arguments, &args)
	for _, b := range bindings {
		name := "Mcp-Param-" + b.header
		got, present := h.Get(name), len(h.Values(name)) > 0
		value, ok := argumentAt(args, b.path)
		if !ok {
			if present {
				return fmt.Errorf("%w: %s is set but argument %s is absent", ErrParamHeader, name, strings.Join(b.path, "."))
			}
			continue
		}
		if !present {
			return fmt.Errorf("%w: %s is missing for argument %s", ErrParamHeader, name, strings.Join(b.path, "."))
		}
		decoded, err := decodeParamHeader(got)
		if err != nil {
			return fmt.Errorf("%w: %s: %w", ErrParamHeader, name, err)
		}
		if !sameValue(decoded, value) {
			return fmt.Errorf("%w: %s does not match argument %s", ErrParamHeader, name, strings.Join(b.path, "."))
		}
	}
	return nil
}

// argumentAt is the value at path in args; absent and null are not found.
func argumentAt(args map[string]json.RawMessage, path []string) (json.RawMessage, bool) {
	cur := args
	for i, key := range path {
		v, ok := cur[key]
		if !ok || string(v) == "null" {
			return nil, false
		}
		if i == len(path)-1 {
			return v, true
		}
		cur = nil
		if json.Unmarshal(v, &cur) != nil {
			return nil, false
		}
	}
	return nil, false
}

// decodeParamHeader undoes the "=?base64?...?=" wrapping (strict
// standard Base64); other values are literal.
func decodeParamHeader(v string) (string, error) {
	inner, ok := strings.CutPrefix(v, "=?base64?")
	if !ok {
		return v, nil
	}
	inner, ok = strings.CutSuffix(inner, "?=")
	if !ok {
		return v, nil
	}
	b, err := base64.StdEncoding.Strict().DecodeString(inner)
	if err != nil {
		return "", errors.New("invalid Base64 value")
	}
	return string(b), nil
}

// sameValue reports whether header value h carries the JSON primitive v
// (a string, a boolean or an integer; anything else never matches).
func sameValue(h string, v json.RawMessage) bool {
	var x any
	if json.Unmarshal(v, &x) != nil {
		return false
	}
	switch x := x.(type) {
	case string:
		return h == x
	case bool:
		return h == strconv.FormatBool(x)
	case float64:
		n, err := strconv.ParseFloat(h, 64)
		return err == nil && x == math.Trunc(x) && n == x
	}
	return false
}

// paramHeadersMatch checks the parameter headers of a stateless tools/call
// on a transparent view against the tool's listed input schema, answering
// HTTP 400 HeaderMismatch when they disagree; it reports whether r may go on.
func (v *view) paramHeadersMatch(w http.ResponseWriter, r *http.Request, env *envelope) bool {
	if v.server == "" || env.Method == nil || *env.Method != "tools/call" {
		return true
	}
	var p struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	if jsonwire.Unmarshal(env.Params, &p) != nil { // by exact key, as the go-sdk reads them
		return true // the go-sdk answers malformed params
	}
	tools, err := v.f.pins.tools(r.Context(), v.f.state.Load(), upstream.Target{Server: v.server})
	if err != nil || tools[p.Name] == nil {
		return true // the call itself fails, with a receipt
	}
	if err := checkParamHeaders(r.Header, headerBindings(tools[p.Name].InputSchema), p.Arguments); err != nil {
		writeRPCError(w, http.StatusBadRequest, env.ID, codeHeaderMismatch, err.Error())
		return false
	}
	return true
}
