package probe

// ExampleArguments returns arguments valid against a simple JSON Schema:
// required properties of objects, const/enum/default first, minimums,
// minimum lengths and item counts. It is how the probe (and enrolment's
// qualification) builds a safe canary call.
func ExampleArguments(schema map[string]any) map[string]any {
	v, _ := example(schema, 0).(map[string]any)
	if v == nil {
		v = map[string]any{}
	}
	return v
}

func example(s map[string]any, depth int) any {
	if s == nil || depth > 8 {
		return nil
	}
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
			out[name] = example(ps, depth+1)
		}
		return out
	case "string":
		n := 4
		if m, ok := num("minLength"); ok && int(m) > n {
			n = int(m)
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
		if m, ok := num("minItems"); ok {
			items, _ := s["items"].(map[string]any)
			for range int(m) {
				out = append(out, example(items, depth+1))
			}
		}
		return out
	}
	return nil
}
