package probe_test

import (
	"encoding/json"
	"fmt"

	"github.com/mcpready/mcpready/probe"
)

// The probe's canary call needs arguments the tool accepts: built from the
// tool's input schema (as listed, decoded from JSON), required properties
// only, each its const, enum, default or a value within its bounds.
func ExampleExampleArguments() {
	var schema map[string]any
	_ = json.Unmarshal([]byte(`{
		"type": "object",
		"required": ["query", "limit", "mode", "code"],
		"properties": {
			"query":   {"type": "string", "minLength": 6},
			"limit":   {"type": "integer", "minimum": 1, "maximum": 50, "default": 10},
			"mode":    {"enum": ["fast", "exact"]},
			"code":    {"type": "string", "maxLength": 2},
			"verbose": {"type": "boolean"}
		}
	}`), &schema)
	b, _ := json.Marshal(probe.ExampleArguments(schema))
	fmt.Println(string(b))
	// Output:
	// {"code":"aa","limit":10,"mode":"fast","query":"aaaaaa"}
}
