package explain_test

import (
	"os"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/mcpready/mcpready/explain"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
)

// Write prints why a call went where it did, from its stored receipt
// alone: the request, the candidates and why each was or was not used, the
// attempts and the outcome.
func ExampleWrite() {
	sr := &mcpreadyv1.StoredReceipt{
		AgentId: "host-7", BatchId: "b-42", Digest: "sha256:3f…",
		Receipt: &mcpreadyv1.Receipt{
			ReceiptId: "01JZ0000000000000000000000", Requested: "docs_lookup", PolicyVersion: "3.1.0",
			StartedAt:       timestamppb.New(time.Date(2026, 12, 2, 9, 30, 0, 0, time.UTC)),
			ArgumentsDigest: "sha256:9a0c…", ResultDigest: "sha256:c14e…",
			EmitterId: "host-7", EmitterVersion: "0.12.0", RedactionPolicyVersion: "default-v1",
			ProviderSideEffect: mcpreadyv1.SideEffectClass_SIDE_EFFECT_CLASS_READ_ONLY,
			ConsumerSideEffect: mcpreadyv1.SideEffectClass_SIDE_EFFECT_CLASS_READ_ONLY,
			Approval:           mcpreadyv1.ApprovalState_APPROVAL_STATE_NOT_REQUIRED,
			Deadline:           durationpb.New(30 * time.Second), PerAttemptTimeout: durationpb.New(10 * time.Second),
			PrincipalClass: "dev", TenantClass: "internal", Region: "eu-west-1",
			Candidates: []*mcpreadyv1.Candidate{
				{Entry: "docs/lookup", ServerName: "docs", ToolName: "lookup", Endpoint: "https://docs.example", Selected: true},
				{Entry: "wiki/lookup", ServerName: "wiki", ToolName: "lookup", RejectionCode: "stale_evidence", RejectedAtStep: 6},
			},
			Attempts: []*mcpreadyv1.Attempt{{Number: 1, Entry: "docs/lookup", Outcome: mcpreadyv1.OutcomeClass_OUTCOME_CLASS_SUCCESS,
				Latency: durationpb.New(42 * time.Millisecond)}},
			AttemptCount:     1,
			Outcome:          mcpreadyv1.OutcomeClass_OUTCOME_CLASS_SUCCESS,
			Latency:          durationpb.New(45 * time.Millisecond),
			SchemaValidation: "passed",
		},
	}
	_ = explain.Write(os.Stdout, sr)
	// Output:
	// Receipt 01JZ0000000000000000000000 (agent host-7, batch b-42).
	//
	// Request: an AI agent asked for "docs_lookup" at 2026-12-02T09:30:00Z, acting for principal class "dev", tenant class "internal" in region "eu-west-1" (request -, workflow -, trace -).
	// Arguments were recorded only as digest sha256:9a0c… (no argument kept).
	//
	// Decision under policy version 3.1.0:
	//   - docs/lookup at https://docs.example [docs/lookup]: selected.
	//   - wiki/lookup at (no endpoint) [wiki/lookup]: rejected at step 6 (current health): stale_evidence.
	//   No evidence was used (health was UNKNOWN or not required by the policy).
	//   Side effects: provider declares read-only, consumer classifies read-only; approval not-required.
	//
	// Execution: deadline 30s, per-attempt timeout 10s, 1 attempt(s).
	//   1. docs/lookup: success after 42ms.
	//
	// Outcome: success after 45ms.
	//   Result digest sha256:c14e…; schema validation passed; semantic validation not run.
	//
	// Recorded by host-7 0.12.0 under redaction policy default-v1; receipt digest sha256:3f….
}
