// Package explain turns one stored receipt into plain words: what was
// requested and for whom, every candidate and why each rejected one was
// excluded, the policy and evidence used, every attempt and the outcome;
// for a workflow receipt, how the workflow ended, its calls, and whether
// a fallback route answered.
// `mcpready explain` prints it as text and the control plane's console
// renders the same paragraphs as HTML, so both say the same thing.
//
// It must not fetch receipts, verify them or decide anything: it only
// words what the receipt records.
package explain

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/readiness"
)

// Line is one sentence of a paragraph; an indented line is an item under
// the paragraph's lead (a candidate, an attempt, a detail).
type Line struct {
	Text     string `json:"text"`
	Indented bool   `json:"indented,omitempty"`
}

// Paragraph is one part of an explanation: the receipt, the request, the
// decision, the execution, the outcome, the recorder.
type Paragraph []Line

// Write writes the explanation of sr as text, paragraphs separated by a
// blank line and items indented by two spaces: what `mcpready explain`
// prints.
func Write(w io.Writer, sr *mcpreadyv1.StoredReceipt) error {
	for i, para := range Of(sr) {
		if i > 0 {
			if _, err := io.WriteString(w, "\n"); err != nil {
				return err
			}
		}
		for _, l := range para {
			indent := ""
			if l.Indented {
				indent = "  "
			}
			if _, err := io.WriteString(w, indent+l.Text+"\n"); err != nil {
				return err
			}
		}
	}
	return nil
}

// OutcomeWord is an outcome without its enum prefix, lower case.
func OutcomeWord(o mcpreadyv1.OutcomeClass) string {
	return EnumWord(o.String(), "OUTCOME_CLASS_")
}

// EnumWord is an enum value name without prefix, lower case, with dashes.
func EnumWord(s, prefix string) string {
	return strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(s, prefix), "_", "-"))
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

// Of explains the decision recorded in sr in plain words, as paragraphs.
func Of(sr *mcpreadyv1.StoredReceipt) []Paragraph {
	r := sr.GetReceipt()
	if r.GetWorkflow() != nil {
		return workflow(sr)
	}
	out := []Paragraph{{}}
	p := func(format string, args ...any) {
		if format == "" {
			out = append(out, Paragraph{})
			return
		}
		text := fmt.Sprintf(format, args...)
		last := &out[len(out)-1]
		*last = append(*last, Line{Text: strings.TrimPrefix(text, "  "), Indented: strings.HasPrefix(text, "  ")})
	}
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
		p("  Routed to %s version %s, tool %s at %s over protocol %s (input schema %s, output schema %s)%s.",
			s.GetServerName(), or(s.GetServerVersion(), "?"), s.GetToolName(), s.GetEndpoint(), or(s.GetProtocolVersion(), "?"),
			or(s.GetInputSchemaDigest(), "?"), or(s.GetOutputSchemaDigest(), "?"), authNote(r))
		if o := s.GetIncidentOwner(); o != "" {
			p("  Incidents of this route go to %s.", o)
		}
	}
	p("  Side effects: provider declares %s, consumer classifies %s; approval %s.",
		EnumWord(r.GetProviderSideEffect().String(), "SIDE_EFFECT_CLASS_"), EnumWord(r.GetConsumerSideEffect().String(), "SIDE_EFFECT_CLASS_"),
		EnumWord(r.GetApproval().String(), "APPROVAL_STATE_"))
	p("")
	p("Execution: deadline %s, per-attempt timeout %s, %d attempt(s)%s.", r.GetDeadline().AsDuration(), r.GetPerAttemptTimeout().AsDuration(),
		r.GetAttemptCount(), keyRef(r))
	for _, a := range r.GetAttempts() {
		hedged := ""
		if a.GetHedged() {
			hedged = " (hedged)"
		}
		p("  %d. %s%s: %s after %s%s%s.", a.GetNumber(), or(a.GetEntry(), "?"), hedged, OutcomeWord(a.GetOutcome()), a.GetLatency().AsDuration(),
			prefixed(", transport ", a.GetTransportStatus()), jsonrpcNote(a.GetJsonrpcCode()))
	}
	if acts := r.GetActions(); len(acts) > 0 {
		p("  Actions: %s.", strings.Join(readiness.ActionStrings(acts), ", "))
	}
	for _, l := range recovery(r) {
		p("  %s", l)
	}
	p("")
	p("Outcome: %s%s after %s%s%s.", OutcomeWord(r.GetOutcome()), failedAt(r), r.GetLatency().AsDuration(),
		prefixed(", transport ", r.GetTransportStatus()), jsonrpcNote(r.GetJsonrpcCode()))
	if r.GetIsError() {
		p("  The tool answered with isError: a tool failure inside a protocol success.")
	}
	p("  Result digest %s; schema validation %s; semantic validation %s.", or(r.GetResultDigest(), "(none)"), or(r.GetSchemaValidation(), "not run"),
		semanticWords(r))
	if r.GetErrorMessage() != "" {
		p("  Error: %s", r.GetErrorMessage())
	}
	if r.GetWorkflowOutcome() != "" {
		p("  Workflow outcome: %s.", r.GetWorkflowOutcome())
	}
	p("")
	p("Recorded by %s %s under redaction policy %s; receipt digest %s.", or(r.GetEmitterId(), "?"), r.GetEmitterVersion(), or(r.GetRedactionPolicyVersion(), "?"), or(sr.GetDigest(), "?"))
	return out
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
		return " at the " + EnumWord(l.String(), "READINESS_LAYER_") + " layer"
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
