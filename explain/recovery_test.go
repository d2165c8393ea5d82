package explain_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/mcpready/mcpready/explain"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
)

// explain words what a receipt records about recovery and results: the
// semantic validator versions, the idempotency binding, the failure
// domains of the routes tried, the quota and cost effect, whether the
// call was cold and how the agent authenticated. Before, none of these
// was shown.
func TestExplainRecoveryFields(t *testing.T) {
	r := &mcpreadyv1.Receipt{ReceiptId: "r3", Requested: "pay",
		Selected:           &mcpreadyv1.Selection{ServerName: "pay", ToolName: "charge", Endpoint: "https://pay/mcp"},
		SemanticValidation: "failed:fresh", SemanticValidatorVersion: "fresh=cel:0123456789ab,nonempty=cel:ba9876543210",
		IdempotencyKeyRef: "hmac-sha256:abcd",
		Idempotency: &mcpreadyv1.IdempotencyRecord{KeyRef: "hmac-sha256:abcd", Scope: "employee/pay", Retention: durationpb.New(24 * time.Hour),
			Allocated: true, Repeat: true, Carried: []string{"header:Idempotency-Key"}},
		FailureDomains: []string{"cloud:aws/eu-west-1", "operator:acme"},
		Quota:          "1 call (2/10 per 1m0s)", Cost: "0.02 EUR (workflow 0.04 of 0.05)",
		Warmth: mcpreadyv1.CallWarmth_CALL_WARMTH_COLD_IDLE, AuthClass: "oauth:token_exchange",
	}
	var buf bytes.Buffer
	if err := explain.Write(&buf, &mcpreadyv1.StoredReceipt{Receipt: r}); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{
		"semantic validation failed:fresh (validators fresh=cel:0123456789ab, nonempty=cel:ba9876543210)",
		"Idempotency key hmac-sha256:abcd (a keyed reference, never the key), scoped to employee/pay, kept 24h0m0s; allocated by the agent; forwarded as a repeat of an earlier call with the same payload; carried in header:Idempotency-Key and _meta.",
		"Failure domains of the routes tried: cloud:aws/eu-west-1, operator:acme.",
		"Local quota: 1 call (2/10 per 1m0s).",
		"Cost: 0.02 EUR (workflow 0.04 of 0.05).",
		"cold: the upstream session had been idle past the agent's threshold",
		"authenticated to the upstream as oauth:token_exchange",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("explain lacks %q:\n%s", want, out)
		}
	}
	// Without those fields, nothing is said about them.
	buf.Reset()
	explain.Write(&buf, &mcpreadyv1.StoredReceipt{Receipt: &mcpreadyv1.Receipt{ReceiptId: "r4"}})
	for _, absent := range []string{"Idempotency key", "Failure domains", "Local quota", "Cost:", "cold", "warm"} {
		if strings.Contains(buf.String(), absent) {
			t.Errorf("explain of an empty receipt says %q:\n%s", absent, buf.String())
		}
	}
}
