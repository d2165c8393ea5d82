package front

import (
	"context"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpready/mcpready/agent/config"
	"github.com/mcpready/mcpready/agent/idempotency"
	"github.com/mcpready/mcpready/agent/internal/mcptest"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/readiness"
)

// An idempotency key in _meta that is not a string (a number, an object)
// is refused as malformed, with a receipt, before any upstream sees it.
// Before, it was read as "no key": the call went through unkeyed (for a
// provider with key support the agent allocated a key of its own), so the
// client's retry with the same key was charged again.
func TestNonStringKeyRefused(t *testing.T) {
	h := newHarness(t)
	ledger := mcptest.NewLedger("", "", idempotency.MetaKey)
	mcptest.AddChargeTool(h.up.Server, ledger)
	h.enrollQualified(t, config.Upstream{Name: "test", URL: h.up.URL})
	h.install(t, testPolicy())
	cs := h.connect(t, "/mcp/servers/test", devToken, nil, "2025-11-25")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, key := range []any{42, map[string]any{"id": "order-42"}, nil} {
		for range 2 { // the client's retry
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "charge", Arguments: map[string]any{"amount": 5},
				Meta: mcp.Meta{idempotency.MetaKey: key}})
			if err != nil {
				t.Fatal(err)
			}
			te := wantToolError(t, res, "REFUSED", readiness.CodeIdempotencyKeyInvalid)
			var rec *mcpreadyv1.Receipt
			for _, r := range h.receiptsFor("charge") {
				if r.GetReceiptId() == te.Receipt {
					rec = r
				}
			}
			if rec.GetOutcome() != mcpreadyv1.OutcomeClass_OUTCOME_CLASS_REFUSED || len(rec.GetAttempts()) != 0 {
				t.Fatalf("key %v: receipt %v", key, rec)
			}
		}
	}
	if ledger.Calls() != 0 {
		t.Fatalf("%s: a call with a malformed key reached the upstream", ledger)
	}
	// A string key goes through, and reaches the upstream in _meta.
	for range 2 {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "charge", Arguments: map[string]any{"amount": 5},
			Meta: mcp.Meta{idempotency.MetaKey: "order-42"}})
		if err != nil || res.IsError {
			t.Fatalf("string key: %+v %v", res, err)
		}
	}
	if ledger.Calls() != 2 || ledger.Effects() != 1 {
		t.Fatalf("%s: want 2 calls, 1 effect", ledger)
	}
}
