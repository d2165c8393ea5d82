package main

import (
	"bytes"
	"strings"
	"testing"

	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
)

// A candidate that was tried before a fallback is explained as tried, one
// that was never reached as not tried.
func TestExplainTriedCandidates(t *testing.T) {
	r := &mcpreadyv1.Receipt{
		ReceiptId: "r1", Requested: "docs_lookup",
		Candidates: []*mcpreadyv1.Candidate{
			{Entry: "a/lookup", ServerName: "a", ToolName: "lookup", Endpoint: "http://a"},
			{Entry: "b/lookup", ServerName: "b", ToolName: "lookup", Endpoint: "http://b", Selected: true},
			{Entry: "c/lookup", ServerName: "c", ToolName: "lookup", Endpoint: "http://c"},
		},
		Attempts: []*mcpreadyv1.Attempt{{Number: 1, Entry: "a/lookup"}, {Number: 2, Entry: "a/lookup"}, {Number: 3, Entry: "b/lookup"}},
	}
	var buf bytes.Buffer
	explain(&buf, &mcpreadyv1.StoredReceipt{Receipt: r})
	for _, want := range []string{
		"a/lookup at http://a [a/lookup]: eligible, tried 2 time(s) without success.",
		"b/lookup at http://b [b/lookup]: selected.",
		"c/lookup at http://c [c/lookup]: eligible, not tried.",
	} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("explain lacks %q:\n%s", want, buf.String())
		}
	}
}
