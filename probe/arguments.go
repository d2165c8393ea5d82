package probe

// ExampleArguments returns arguments valid against a simple JSON Schema:
// required properties of objects, const/enum/default first, minimums,
// minimum lengths and item counts. It is how the probe (and enrolment's
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
		b := make([]byte, n)
		for i := range b {
			b[i] = 'a'
		}
		return string(b)
	case "integer", "number":
		if m, ok := num("minimum"); ok {
			return m
		}
		if m, ok := num("exclusiveMinimum"); ok {
			return m + 1
		}
		return 1
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
