package decide

// Decisions that read the call's arguments: approval by value (policy
// approval rules that apply only when a number read from the arguments
// exceeds a threshold) and the registry entry's required arguments.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/mcpready/mcpready/internal/jsonwire"
	"github.com/mcpready/mcpready/readiness"
)

// valueRule requires approval when the number at path in the arguments
// exceeds above.
type valueRule struct {
	path  []string
	above float64
}

// aboveValue reports whether a value rule of e requires approval for the
// call: its value exceeds the threshold, or is missing or not a number
// (fail closed). Listings never are (they have no arguments).
func (x *call) aboveValue(e *entry) bool {
	if x.listing {
		return false
	}
	if !x.argsDone {
		x.argsDone, x.args = true, decodeArgs(x.req.Arguments)
	}
	for _, r := range e.valueRules {
		v, ok := number(lookup(x.args, r.path))
		if !ok || v > r.above {
			return true
		}
	}
	return false
}

func lookup(v any, path []string) any {
	for _, p := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[p]
	}
	return v
}

// number reads a JSON number or a numeric string.
func number(v any) (float64, bool) {
	var s string
	switch t := v.(type) {
	case json.Number:
		s = string(t)
	case string:
		s = t
	default:
		return 0, false
	}
	f, err := strconv.ParseFloat(s, 64)
	return f, err == nil && f == f // NaN is not a value
}

// decodeArgs decodes arguments keeping numbers exact (nil when they do not
// decode). A function of its own so that the per-call context does not
// escape to the heap.
func decodeArgs(b []byte) any {
	var v any
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if d.Decode(&v) != nil {
		return nil
	}
	return v
}

// missingArgument rejects e for arguments that lack one of its contract's
// required arguments, or cannot be read as an object.
func missingArgument(e *entry, args []byte) (rejection, bool) {
	name, err := jsonwire.MissingKey(args, e.required)
	switch {
	case err != nil:
		return rejection{readiness.CodeArgumentsMissing, "the arguments are not a JSON object, and the tool requires " + strings.Join(e.required, ", ")}, true
	case name != "":
		return rejection{readiness.CodeArgumentsMissing, fmt.Sprintf("the call lacks the required argument %q", name)}, true
	}
	return rejection{}, false
}

// ArgumentNames are the top-level argument names the snapshot's decisions
// read by exact name (approval value rules' paths), so that a caller can
// refuse arguments that name one of them in another case.
func (s *Snapshot) ArgumentNames() []string { return s.argNames }
