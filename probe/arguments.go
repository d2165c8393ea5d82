package probe

import "math"

// ExampleArguments returns arguments valid against a simple JSON Schema:
// required properties of objects, const/enum/default first, numbers within
// their minimums and maximums (exclusive or not, whole for integers),
// strings within their minimum and maximum lengths, and minimum item
// counts. It is how the probe (and enrolment's
// qualification) builds a safe canary call.
//
// The schema comes from the endpoint, so what it may ask for is bounded: a
// string is at most MaxExampleLength bytes, an array at most
// MaxExampleItems items, nesting at most 8 levels, and the whole value at
// most MaxExampleValues values. A schema that asks for more gets the
// bounded value, which the endpoint may reject (invocation not ready:
// arguments-rejected), never an unbounded allocation.
func ExampleArguments(schema map[string]any) map[string]any {
	budget := MaxExampleValues
	v, _ := example(schema, 0, &budget).(map[string]any)
	if v == nil {
		v = map[string]any{}
	}
	return v
}

// Bounds of ExampleArguments.
const (
	MaxExampleLength = 1024
	MaxExampleItems  = 16
	MaxExampleValues = 1024
)

func example(s map[string]any, depth int, budget *int) any {
	if s == nil || depth > 8 || *budget <= 0 {
		return nil
	}
	*budget--
	if c, ok := s["const"]; ok {
		return c
	}
	if e, ok := s["enum"].([]any); ok && len(e) > 0 {
		return e[0]
	}
	if d, ok := s["default"]; ok {
		return d
	}
	typ, _ := s["type"].(string)
	if ts, ok := s["type"].([]any); ok && len(ts) > 0 {
		typ, _ = ts[0].(string)
	}
	num := func(key string) (float64, bool) { f, ok := s[key].(float64); return f, ok }
	switch typ {
	case "object", "":
		out := map[string]any{}
		props, _ := s["properties"].(map[string]any)
		req, _ := s["required"].([]any)
		for _, r := range req {
			name, _ := r.(string)
			ps, _ := props[name].(map[string]any)
			out[name] = example(ps, depth+1, budget)
		}
		return out
	case "string":
		n := 4
		if m, ok := num("minLength"); ok && m > float64(n) {
			n = int(min(m, MaxExampleLength))
		}
		if m, ok := num("maxLength"); ok && m >= 0 && m < float64(n) {
			n = int(m)
		}
		b := make([]byte, n)
		for i := range b {
			b[i] = 'a'
		}
		return string(b)
	case "integer", "number":
		return exampleNumber(num, typ == "integer")
	case "boolean":
		return false
	case "array":
		out := []any{}
		if m, ok := num("minItems"); ok && m > 0 {
			items, _ := s["items"].(map[string]any)
			for range int(min(m, MaxExampleItems)) {
				out = append(out, example(items, depth+1, budget))
			}
		}
		return out
	}
	return nil
}

// exampleNumber is a number within the bounds num reads (minimum,
// exclusiveMinimum, maximum, exclusiveMaximum): the lower bound (plus one
// when exclusive), else 1, brought under the upper bound; a whole number
// when integer. Bounds that leave no such number give one that breaks
// them.
func exampleNumber(num func(string) (float64, bool), integer bool) float64 {
	lo, hasLo := num("minimum")
	strictLo := false
	if m, ok := num("exclusiveMinimum"); ok && (!hasLo || m >= lo) {
		lo, hasLo, strictLo = m, true, true
	}
	hi, hasHi := num("maximum")
	strictHi := false
	if m, ok := num("exclusiveMaximum"); ok && (!hasHi || m <= hi) {
		hi, hasHi, strictHi = m, true, true
	}
	v := 1.0
	if hasLo {
		v = lo
		if strictLo {
			v = lo + 1
		}
	}
	if integer {
		v = math.Ceil(v)
	}
	if hasHi && (v > hi || strictHi && v >= hi) {
		switch {
		case integer && strictHi:
			v = math.Ceil(hi) - 1
		case integer:
			v = math.Floor(hi)
		case !strictHi:
			v = hi
		case hasLo:
			v = lo + (hi-lo)/2
		default:
			v = hi - 1
		}
	}
	return v
}
