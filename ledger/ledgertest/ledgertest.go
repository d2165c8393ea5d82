// Package ledgertest provides realistic receipts for tests and benchmarks
// of the receipt format and of the code that moves receipts (spool,
// ingest, store). It must not be used by production code, and it does not
// use the agent's receipt builder: its receipts are shaped like the
// builder's, field by field, so control-plane tests need nothing of the
// agent.
package ledgertest

import (
	"fmt"
	"syscall"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/mcpready/mcpready/artifact"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/internal/canonjson"
	"github.com/mcpready/mcpready/ledger"
)

// Receipt returns a minimal receipt as the agent's builder starts one:
// a new id, the emitter and the default redaction policy version, emitted
// and started at at.
func Receipt(emitter string, at time.Time) *mcpreadyv1.Receipt {
	ts := timestamppb.New(at)
	return &mcpreadyv1.Receipt{ReceiptId: ledger.NewID(), EmitterId: emitter, RedactionPolicyVersion: "digest-only/v1", EmittedAt: ts, StartedAt: ts}
}

// Realistic returns a receipt shaped like the agent's: three candidates
// (two rejected), one attempt, a selection and digests.
func Realistic(i int, at time.Time) *mcpreadyv1.Receipt {
	r := Receipt("agent-1", at)
	r.EmitterVersion = "0.1.0"
	r.RequestId, r.WorkflowId, r.TraceId = fmt.Sprintf("req-%d", i), "wf-research", fmt.Sprintf("%032x", i)
	r.Requested, r.PrincipalClass, r.TenantClass, r.Region = "docs_lookup", "employee", "acme", "eu-west"
	r.ArgumentsDigest = jsonDigest(fmt.Sprintf(`{"query":"q%d"}`, i))
	r.Candidates = []*mcpreadyv1.Candidate{
		{Entry: "docs-a/lookup@1.4.2", ServerName: "com.example/docs-a", ToolName: "lookup", Endpoint: "https://docs-a.example/mcp", Selected: true},
		{Entry: "docs-b/lookup@2.0.0", ServerName: "com.example/docs-b", ToolName: "lookup", Endpoint: "https://docs-b.example/mcp", RejectedAtStep: 6, RejectionCode: "CIRCUIT_OPEN", RejectionReason: "circuit open after 5 failures"},
		{Entry: "docs-us/lookup@1.0.0", ServerName: "com.example/docs-us", ToolName: "lookup", Endpoint: "https://docs-us.example/mcp", RejectedAtStep: 3, RejectionCode: "RESIDENCY", RejectionReason: "region us-east not allowed"},
	}
	r.EvidenceIds, r.PolicyVersion = []string{"passive/docs-a/lookup/1"}, "acme-policy@7"
	r.Selected = &mcpreadyv1.Selection{Entry: "docs-a/lookup@1.4.2", Endpoint: "https://docs-a.example/mcp", ServerName: "com.example/docs-a", ServerVersion: "1.4.2",
		ToolName: "lookup", InputSchemaDigest: artifact.Digest([]byte("in")), OutputSchemaDigest: artifact.Digest([]byte("out")), ProtocolVersion: "2025-11-25"}
	r.ProviderSideEffect, r.ConsumerSideEffect, r.Approval = mcpreadyv1.SideEffectClass_SIDE_EFFECT_CLASS_READ_ONLY, mcpreadyv1.SideEffectClass_SIDE_EFFECT_CLASS_READ_ONLY, mcpreadyv1.ApprovalState_APPROVAL_STATE_NOT_REQUIRED
	r.Deadline, r.PerAttemptTimeout = durationpb.New(5*time.Second), durationpb.New(2*time.Second)
	lat := time.Duration(20+i%50) * time.Millisecond
	r.Attempts = []*mcpreadyv1.Attempt{{Number: 1, Entry: "docs-a/lookup@1.4.2", StartedAt: timestamppb.New(at), Latency: durationpb.New(lat), Outcome: mcpreadyv1.OutcomeClass_OUTCOME_CLASS_SUCCESS, TransportStatus: "200"}}
	r.Outcome, r.TransportStatus, r.SchemaValidation = mcpreadyv1.OutcomeClass_OUTCOME_CLASS_SUCCESS, "200", "valid" // no actions: none were needed
	r.ResultDigest = jsonDigest(fmt.Sprintf(`{"content":[{"type":"text","text":"r%d"}]}`, i))
	end := timestamppb.New(at.Add(lat))
	r.EndedAt, r.EmittedAt, r.Latency, r.AttemptCount = end, end, durationpb.New(lat), int32(len(r.Attempts))
	return r
}

// jsonDigest digests canonical JSON as the builder digests arguments.
func jsonDigest(s string) string {
	c, err := canonjson.Transform([]byte(s))
	if err != nil {
		panic(err)
	}
	return artifact.Digest(c)
}

// CPUTime is the process's user+system CPU time so far (getrusage), for
// benchmarks that report per-core throughput on a shared machine where
// wall time includes run-queue waits.
func CPUTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
