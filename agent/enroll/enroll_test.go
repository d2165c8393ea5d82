package enroll

import (
	"reflect"
	"testing"
)

func TestExample(t *testing.T) {
	tests := []struct {
		schema map[string]any
		want   map[string]any
	}{
		{map[string]any{"type": "object"}, map[string]any{}},
		{map[string]any{"type": "object", "required": []any{"q", "n", "ok", "kind", "tags"}, "properties": map[string]any{
			"q":    map[string]any{"type": "string", "minLength": 6.0},
			"n":    map[string]any{"type": "integer", "minimum": 3.0},
			"ok":   map[string]any{"type": "boolean"},
			"kind": map[string]any{"type": "string", "enum": []any{"a", "b"}},
			"tags": map[string]any{"type": "array", "minItems": 1.0, "items": map[string]any{"type": "string"}},
			"opt":  map[string]any{"type": "string"},
		}}, map[string]any{"q": "aaaaaa", "n": 3.0, "ok": false, "kind": "a", "tags": []any{"aaaa"}}},
	}
	for _, tt := range tests {
		if got := Example(tt.schema); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Example(%v) = %v, want %v", tt.schema, got, tt.want)
		}
	}
}
