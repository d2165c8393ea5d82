package prober

import (
	"testing"

	"github.com/mcpready/mcpready/probe"
)

// A canary becomes a target only where the registry has its tool as
// READ_ONLY (the target calls it): same endpoint and registry answers,
// that tool alone, the canary's arguments and class.
func TestWithCanaries(t *testing.T) {
	versions := map[string]string{"search": "4"}
	targets := []probe.Target{
		{URL: "https://docs.example/mcp", Options: probe.Options{Server: "com.example/docs", ReadOnly: []string{"lookup", "search"}, RecordVersions: versions}},
		{URL: "https://mail.example/mcp", Options: probe.Options{Server: "com.example/mail", ReadOnly: []string{"list"}}},
	}
	canaries := []Canary{
		{Server: "com.example/docs", Tool: "search", InputClass: "long-query", Arguments: map[string]any{"query": "q"}},
		{Server: "com.example/mail", Tool: "send", InputClass: "bulk", Arguments: map[string]any{}},  // not READ_ONLY
		{Server: "com.example/other", Tool: "list", InputClass: "bulk", Arguments: map[string]any{}}, // not registered
	}
	out, unmatched := withCanaries(targets, canaries)
	if len(out) != 3 || len(unmatched) != 2 || unmatched[0].Tool != "send" || unmatched[1].Server != "com.example/other" {
		t.Fatalf("targets %+v, unmatched %+v", out, unmatched)
	}
	c := out[2]
	if c.URL != targets[0].URL || len(c.Options.ReadOnly) != 1 || c.Options.ReadOnly[0] != "search" || c.Options.InputClass != "long-query" ||
		c.Options.Arguments["query"] != "q" || c.Options.RecordVersions["search"] != "4" || c.Options.Server != "com.example/docs" {
		t.Fatalf("canary target %+v", c)
	}
	if len(targets[0].Options.ReadOnly) != 2 || targets[0].Options.InputClass != "" {
		t.Fatalf("the registry's target changed: %+v", targets[0])
	}
}
