package front

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/internal/safebuf"
)

// A capability is listed only when its members share one input schema.
func TestAggregateClassSchema(t *testing.T) {
	h := newHarness(t)
	p := testPolicy()
	p.Principals[0].Allow = append(p.Principals[0].Allow, "same_schema", "mixed_schema")
	p.EquivalenceClasses = append(p.EquivalenceClasses,
		&mcpreadyv1.EquivalenceClass{Name: "same_schema", Members: []string{"test/ask", "test/poison"}},   // both take no arguments
		&mcpreadyv1.EquivalenceClass{Name: "mixed_schema", Members: []string{"test/echo", "test/poison"}}) // echo takes text
	h.install(t, p)
	var logged safebuf.Buffer
	h.front.opts.Logger = slog.New(slog.NewTextHandler(&logged, nil))
	cs := h.connect(t, "/mcp", devToken, nil, "2025-11-25")
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	// A client listing again and again does not write a warning each time:
	// the snapshot's warnings name the class once, when it is installed
	// (decide TestMixedSchemaClassWarned). Failed before: one per listing.
	for range 20 {
		if _, err := cs.ListTools(context.Background(), nil); err != nil {
			t.Fatal(err)
		}
	}
	if n := strings.Count(logged.String(), "schemas differ"); n > 0 {
		t.Errorf("%d warnings logged for 21 listings", n)
	}
	tools := map[string]*mcp.Tool{}
	for _, x := range res.Tools {
		tools[x.Name] = x
	}
	if tools["mixed_schema"] != nil {
		t.Error("a class whose members' input schemas differ is listed")
	}
	// Nor can it be called by name: no member is attempted.
	wantToolError(t, call(t, cs, "mixed_schema", map[string]any{"text": "x"}), "REFUSED", "class_schema_mismatch")
	h.mu.Lock()
	last := h.recs[len(h.recs)-1]
	h.mu.Unlock()
	if len(last.GetAttempts()) != 0 || last.GetSelected() != nil {
		t.Errorf("a call of a class with mixed schemas was attempted: %v", last.GetAttempts())
	}
	same, echo := tools["same_schema"], tools["echo_anything"]
	if same == nil || echo == nil {
		t.Fatalf("classes with one schema not listed: %v", toolNames(t, cs))
	}
	want, _ := json.Marshal(tools["test__ask"].InputSchema)
	if got, _ := json.Marshal(same.InputSchema); string(got) != string(want) {
		t.Errorf("same_schema input schema %s, want the members' %s", got, want)
	}
	want, _ = json.Marshal(tools["test__echo"].InputSchema)
	if got, _ := json.Marshal(echo.InputSchema); string(got) != string(want) || !strings.Contains(string(got), "text") {
		t.Errorf("echo_anything input schema %s, want %s", got, want)
	}
}
