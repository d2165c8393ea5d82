package demo

import (
	"encoding/json"
	"testing"
)

func TestApprovalContent(t *testing.T) {
	schema := map[string]any{
		"type": "object",
		"properties": map[string]any{
			"approve":  map[string]any{"type": "boolean"},
			"decision": map[string]any{"type": "string", "enum": []any{"deny", "approve"}},
			"note":     map[string]any{"type": "string"},
			"count":    map[string]any{"type": "integer"},
		},
	}
	got := approvalContent(schema)
	want := map[string]any{"approve": true, "decision": "approve", "note": "approved by mcpready demo"}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	if len(approvalContent(nil)) != 0 || len(approvalContent("not a schema")) != 0 {
		t.Error("a missing schema must give empty content")
	}
}

// FuzzApprovalContent: any JSON an agent sends as requestedSchema is
// answered without panicking, with values only for declared properties.
func FuzzApprovalContent(f *testing.F) {
	f.Add([]byte(`{"type":"object","properties":{"approve":{"type":"boolean"}}}`))
	f.Add([]byte(`{"properties":{"x":{"type":"string","enum":[1,"approve",null]}}}`))
	f.Add([]byte(`{"properties":[]}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var schema any
		if json.Unmarshal(data, &schema) != nil {
			return
		}
		out := approvalContent(schema)
		m, _ := schema.(map[string]any)
		props, _ := m["properties"].(map[string]any)
		for k := range out {
			if _, ok := props[k]; !ok {
				t.Fatalf("answered undeclared property %q", k)
			}
		}
	})
}
