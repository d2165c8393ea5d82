package validate

import (
	"encoding/json"
	"testing"

	"github.com/mcpready/mcpready/artifact"
)

// BenchmarkCheck is the result check of the proxy-overhead benchmark's
// echo call (agent.BenchmarkProxyOverhead): a small text result and its
// structuredContent, decoded by the upstream client (Value), checked
// against the echo tool's output schema with the injection tripwire on.
func BenchmarkCheck(b *testing.B) {
	schema := json.RawMessage(`{"type":"object","required":["echo"],"properties":{"echo":{"type":"string"}},"additionalProperties":false}`)
	d, err := artifact.CanonicalDigest(schema)
	if err != nil {
		b.Fatal(err)
	}
	c := NewChecker(Rules{Tripwire: true})
	if err := c.Pin(d, schema); err != nil {
		b.Fatal(err)
	}
	raw := `{"content":[{"type":"text","text":"{\"echo\":\"benchmark\"}"}],"structuredContent":{"echo":"benchmark"}}`
	r := Result{Size: len(raw), Structured: json.RawMessage(`{"echo":"benchmark"}`), Value: map[string]any{"echo": "benchmark"},
		Text: []string{`{"echo":"benchmark"}`}}
	b.ReportAllocs()
	for b.Loop() {
		if err := c.Check(d, r); err != nil {
			b.Fatal(err)
		}
	}
}
