package validate

import (
	"encoding/json"
	"math"
)

// simpleSchema is an output schema built only of "type", "properties",
// "required", "additionalProperties" (a boolean), "items" (one schema) and
// the annotations "title" and "description": the shape the go-sdk derives
// from a Go struct (the echo tool's, most tools'). Checking an instance
// against it needs no compiled-schema machinery, so Check asks it first and
// asks the full validator only when it does not pass: it passes only
// values the full validator passes too (FuzzSimpleSchema checks that), so
// every verdict and every failure detail is still the full validator's.
type simpleSchema struct {
	types      jsonTypes // 0: any
	properties map[string]*simpleSchema
	required   []string
	closed     bool          // additionalProperties: false
	items      *simpleSchema // nil: any
}

// jsonTypes is a set of JSON Schema type names.
type jsonTypes uint8

const (
	typeNull jsonTypes = 1 << iota
	typeBoolean
	typeNumber
	typeInteger
	typeString
	typeArray
	typeObject
)

var typeNames = map[string]jsonTypes{"null": typeNull, "boolean": typeBoolean, "number": typeNumber, "integer": typeInteger,
	"string": typeString, "array": typeArray, "object": typeObject}

// simpleOf returns doc (a schema as jsonschema.UnmarshalJSON decoded it,
// already compiled by the full validator) as a simpleSchema, or nil when
// it uses anything else: any other keyword ("$schema", "$ref", "enum",
// "minimum", "format", …), a boolean schema, or a value of another shape.
func simpleOf(doc any) *simpleSchema {
	m, ok := doc.(map[string]any)
	if !ok {
		return nil
	}
	s := &simpleSchema{}
	for k, v := range m {
		switch k {
		case "title", "description":
			if _, ok := v.(string); !ok {
				return nil
			}
		case "type":
			switch t := v.(type) {
			case string:
				if s.types = typeNames[t]; s.types == 0 {
					return nil
				}
			case []any:
				for _, e := range t {
					name, _ := e.(string)
					bit := typeNames[name]
					if bit == 0 || s.types&bit != 0 {
						return nil
					}
					s.types |= bit
				}
				if s.types == 0 {
					return nil
				}
			default:
				return nil
			}
		case "properties":
			props, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			s.properties = make(map[string]*simpleSchema, len(props))
			for name, p := range props {
				if s.properties[name] = simpleOf(p); s.properties[name] == nil {
					return nil
				}
			}
		case "required":
			req, ok := v.([]any)
			if !ok {
				return nil
			}
			for _, e := range req {
				name, ok := e.(string)
				if !ok {
					return nil
				}
				s.required = append(s.required, name)
			}
		case "additionalProperties":
			b, ok := v.(bool)
			if !ok {
				return nil
			}
			s.closed = !b
		case "items":
			if s.items = simpleOf(v); s.items == nil {
				return nil
			}
		default:
			return nil
		}
	}
	return s
}

// passes reports that v certainly matches s. false means "ask the full
// validator": v may fail, or be of a kind this check leaves to it (a
// number it would have to test for integrality, a Go type JSON decoding
// does not produce).
func (s *simpleSchema) passes(v any) bool {
	t, ok := typeOfValue(v)
	if !ok {
		return false
	}
	if s.types != 0 && s.types&t == 0 {
		if s.types&typeInteger == 0 || t&typeNumber == 0 || !integral(v) {
			return false
		}
	}
	switch x := v.(type) {
	case map[string]any:
		for _, name := range s.required {
			if _, ok := x[name]; !ok {
				return false
			}
		}
		for k, e := range x {
			p := s.properties[k]
			switch {
			case p != nil:
				if !p.passes(e) {
					return false
				}
			case s.closed:
				return false
			default:
				if !anyValue(e) {
					return false
				}
			}
		}
	case []any:
		for _, e := range x {
			if s.items != nil && !s.items.passes(e) || s.items == nil && !anyValue(e) {
				return false
			}
		}
	}
	return true
}

// typeOfValue is the JSON type of a decoded value: number for every
// number (integer is tested apart), false for any other Go type or a
// non-finite float.
func typeOfValue(v any) (jsonTypes, bool) {
	switch x := v.(type) {
	case nil:
		return typeNull, true
	case bool:
		return typeBoolean, true
	case string:
		return typeString, true
	case json.Number:
		return typeNumber, true
	case float64:
		return typeNumber, !math.IsNaN(x) && !math.IsInf(x, 0)
	case []any:
		return typeArray, true
	case map[string]any:
		return typeObject, true
	}
	return 0, false
}

// integral reports that a number is certainly an integer: a json.Number
// of digits only, or a float64 integer within ±2^53. Any other number
// (1.0, 1e3, larger floats) is left to the full validator.
func integral(v any) bool {
	switch x := v.(type) {
	case json.Number:
		s := string(x)
		if len(s) > 0 && s[0] == '-' {
			s = s[1:]
		}
		if s == "" {
			return false
		}
		for i := 0; i < len(s); i++ {
			if s[i] < '0' || s[i] > '9' {
				return false
			}
		}
		return true
	case float64:
		return math.Abs(x) <= 1<<53 && math.Trunc(x) == x
	}
	return false
}

// anyValue reports that v, which no subschema constrains, is a value the
// full validator accepts anywhere: JSON-decoded all the way down.
func anyValue(v any) bool {
	switch x := v.(type) {
	case map[string]any:
		for _, e := range x {
			if !anyValue(e) {
				return false
			}
		}
		return true
	case []any:
		for _, e := range x {
			if !anyValue(e) {
				return false
			}
		}
		return true
	}
	_, ok := typeOfValue(v)
	return ok
}
