package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/readiness"
)

// explainOptions are the flags of explain.
type explainOptions struct {
	serverOptions
	output string
}

func newExplainCmd() *cobra.Command {
	o := &explainOptions{}
	cmd := &cobra.Command{
		Use:   "explain RECEIPT_ID [-o table|json|yaml]",
		Short: "Explain in plain words why a call was routed, refused or failed",
		Long: `Reconstruct one decision from its signed receipt: what was requested and
for whom, which candidates were considered and why each rejected one was
excluded, the policy version and evidence used, every attempt, and the
outcome. The default (table) prints the explanation in words; -o json or
yaml prints the stored receipt itself.`,
		Args: oneArg,
		RunE: func(cmd *cobra.Command, args []string) error { return o.run(cmd, args) },
	}
	addOutputFlag(cmd, &o.output)
	o.serverOptions.addFlags(cmd)
	return cmd
}

func (o *explainOptions) run(cmd *cobra.Command, args []string) error {
	if o.output == "text" { // the name this format had before -o was table|json|yaml everywhere
		o.output = "table"
	}
	if err := checkOutput(cmd, o.output); err != nil {
		return err
	}
	sr, err := getReceipt(cmd.Context(), &o.serverOptions, args[0])
	if err != nil {
		return err
	}
	if o.output != "table" {
		return printOutput(cmd.OutOrStdout(), o.output, sr, nil)
	}
	explain(cmd.OutOrStdout(), sr)
	return nil
}

// stepLabel is the short name of a decision step: its description up to
// the colon (the vocabulary is defined once, in package readiness).
func stepLabel(st readiness.Step) string {
	d := readiness.StepDescription(st)
	if i := strings.IndexByte(d, ':'); i > 0 {
		return d[:i]
	}
	return d
}

func or(s, dflt string) string {
	if s == "" {
		return dflt
	}
	return s
}

// explain writes the decision recorded in sr in plain words.
func explain(w io.Writer, sr *mcpreadyv1.StoredReceipt) {
	r := sr.GetReceipt()
	p := func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
	when := "at an unknown time"
	if t := r.GetStartedAt(); t != nil {
		when = "at " + t.AsTime().UTC().Format(time.RFC3339Nano)
	}
	p("Receipt %s (agent %s, batch %s).", r.GetReceiptId(), or(sr.GetAgentId(), r.GetEmitterId()), or(sr.GetBatchId(), "unknown"))
	p("")
	p("Request: %s asked for %q %s, acting for principal class %q, tenant class %q in region %q (request %s, workflow %s, trace %s).",
		"an AI agent", r.GetRequested(), when, r.GetPrincipalClass(), r.GetTenantClass(), r.GetRegion(),
		or(r.GetRequestId(), "-"), or(r.GetWorkflowId(), "-"), or(r.GetTraceId(), "-"))
	p("Arguments were recorded only as digest %s%s.", or(r.GetArgumentsDigest(), "(none)"), keptArgs(r))
	p("")
	p("Decision under policy version %s:", or(r.GetPolicyVersion(), "(unknown)"))
	if len(r.GetCandidates()) == 0 {
		p("  No candidate was considered (nothing in the approved inventory serves this capability).")
	}
	tried := map[string]int{} // attempts per entry
	for _, a := range r.GetAttempts() {
		tried[a.GetEntry()]++
	}
	for _, c := range r.GetCandidates() {
		id := fmt.Sprintf("%s/%s at %s", c.GetServerName(), c.GetToolName(), or(c.GetEndpoint(), "(no endpoint)"))
		if c.GetEntry() != "" {
			id += " [" + c.GetEntry() + "]"
		}
		switch {
		case c.GetSelected():
			p("  - %s: selected.", id)
		case c.GetRejectedAtStep() > 0 || c.GetRejectionCode() != "":
			step := stepLabel(c.GetRejectedAtStep())
			p("  - %s: rejected at step %d (%s): %s%s.", id, readiness.Number(c.GetRejectedAtStep()), or(step, "unknown step"), or(c.GetRejectionCode(), "rejected"),
				prefixed(": ", c.GetRejectionReason()))
		case tried[c.GetEntry()] > 0:
			p("  - %s: eligible, tried %d time(s) without success.", id, tried[c.GetEntry()])
		default:
			p("  - %s: eligible, not tried.", id)
		}
	}
	if ev := r.GetEvidenceIds(); len(ev) > 0 {
		p("  Evidence used: %s.", strings.Join(ev, ", "))
	} else {
		p("  No evidence was used (health was UNKNOWN or not required by the policy).")
	}
	if s := r.GetSelected(); s.GetToolName() != "" {
		p("  Routed to %s version %s, tool %s at %s over protocol %s (input schema %s, output schema %s).",
			s.GetServerName(), or(s.GetServerVersion(), "?"), s.GetToolName(), s.GetEndpoint(), or(s.GetProtocolVersion(), "?"),
			or(s.GetInputSchemaDigest(), "?"), or(s.GetOutputSchemaDigest(), "?"))
	}
	p("  Side effects: provider declares %s, consumer classifies %s; approval %s.",
		enumWord(r.GetProviderSideEffect().String(), "SIDE_EFFECT_CLASS_"), enumWord(r.GetConsumerSideEffect().String(), "SIDE_EFFECT_CLASS_"),
		enumWord(r.GetApproval().String(), "APPROVAL_STATE_"))
	p("")
	p("Execution: deadline %s, per-attempt timeout %s, %d attempt(s)%s.", r.GetDeadline().AsDuration(), r.GetPerAttemptTimeout().AsDuration(),
		r.GetAttemptCount(), prefixed(", idempotency key ", r.GetIdempotencyKeyRef()))
	for _, a := range r.GetAttempts() {
		hedged := ""
		if a.GetHedged() {
			hedged = " (hedged)"
		}
		p("  %d. %s%s: %s after %s%s%s.", a.GetNumber(), or(a.GetEntry(), "?"), hedged, outcomeWord(a.GetOutcome()), a.GetLatency().AsDuration(),
			prefixed(", transport ", a.GetTransportStatus()), jsonrpcNote(a.GetJsonrpcCode()))
	}
	if acts := r.GetActions(); len(acts) > 0 {
		p("  Actions: %s.", strings.Join(readiness.ActionStrings(acts), ", "))
	}
	p("")
	p("Outcome: %s%s after %s%s%s.", outcomeWord(r.GetOutcome()), failedAt(r), r.GetLatency().AsDuration(),
		prefixed(", transport ", r.GetTransportStatus()), jsonrpcNote(r.GetJsonrpcCode()))
	if r.GetIsError() {
		p("  The tool answered with isError: a tool failure inside a protocol success.")
	}
	p("  Result digest %s; schema validation %s; semantic validation %s.", or(r.GetResultDigest(), "(none)"), or(r.GetSchemaValidation(), "not run"),
		or(r.GetSemanticValidation(), "not run"))
	if r.GetErrorMessage() != "" {
		p("  Error: %s", r.GetErrorMessage())
	}
	if r.GetWorkflowOutcome() != "" {
		p("  Workflow outcome: %s.", r.GetWorkflowOutcome())
	}
	p("")
	p("Recorded by %s %s under redaction policy %s; receipt digest %s.", or(r.GetEmitterId(), "?"), r.GetEmitterVersion(), or(r.GetRedactionPolicyVersion(), "?"), or(sr.GetDigest(), "?"))
}

func prefixed(prefix, s string) string {
	if s == "" {
		return ""
	}
	return prefix + s
}

func jsonrpcNote(code int32) string {
	if code == 0 {
		return ""
	}
	return fmt.Sprintf(", JSON-RPC error %d", code)
}

func failedAt(r *mcpreadyv1.Receipt) string {
	if l := r.GetFailedLayer(); l != mcpreadyv1.ReadinessLayer_READINESS_LAYER_UNSPECIFIED {
		return " at the " + enumWord(l.String(), "READINESS_LAYER_") + " layer"
	}
	return ""
}

func keptArgs(r *mcpreadyv1.Receipt) string {
	if len(r.GetKeptArguments()) == 0 {
		return " (no argument kept)"
	}
	var kv []string
	for k, v := range r.GetKeptArguments() {
		kv = append(kv, fmt.Sprintf("%s=%q", k, v))
	}
	slices.Sort(kv)
	return "; allow-listed arguments kept: " + strings.Join(kv, ", ")
}
