package decide

// Interning: shared, immutable receipt records for request-independent
// outcomes, shared route lists and cached breaker pointers, so that a
// decision allocates nothing when it repeats an earlier one.

import (
	"github.com/mcpready/mcpready/agent/circuit"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/readiness"
)

type rejection struct {
	code   readiness.Code
	reason string
}

// Per-request rejections with fixed reasons. The request's own values
// (principal, tenant, region, workflow, protocol version) are recorded in
// the receipt beside the candidates, so reasons need not repeat them; each
// entry keeps one shared Candidate record per fixed rejection, so these
// outcomes allocate nothing per call.
var (
	rejDrift               = rejection{readiness.CodeDriftBlocked, "the live tool definition drifted from the pinned one"}
	rejWorkflow            = rejection{readiness.CodeWorkflow, "BLOCKED: the workflow is not on the entry's allowlist"}
	rejClientProtocol      = rejection{readiness.CodeProtocolVersion, "the client's protocol version is not permitted by policy"}
	rejEntryTenant         = rejection{readiness.CodeTenant, "the tenant class is outside the entry's tenant boundary"}
	rejRuleTenant          = rejection{readiness.CodeTenant, "no rule for the principal class covers the tenant class"}
	rejPrincipalDenied     = rejection{readiness.CodePrincipalDenied, "a rule denies the principal class this tool"}
	rejPrincipalNotAllowed = rejection{readiness.CodePrincipalDenied, "no rule allows the principal class this tool"}
	rejSameRegion          = rejection{readiness.CodeResidency, "same-region only: the server is not in the caller's region"}
	rejNotEquivalent       = rejection{readiness.CodeNotEquivalent, "same tool name only: not an approved member of the equivalence class"}
	rejApproval            = rejection{readiness.CodeApprovalUnavailable, "human approval is required and the client cannot be asked"}
	rejIdempotency         = rejection{readiness.CodeIdempotencyRequired, "policy requires an idempotency key for calls that may change state"}
	rejCircuit             = rejection{readiness.CodeCircuitOpen, "circuit breaker is open"}
	rejNoEvidence          = rejection{readiness.CodeEvidenceUnknown, "no accepted evidence covers this tool for this principal, tenant and region"}
	fixedRejections        = [...]struct {
		step readiness.Step
		rej  rejection
	}{
		{readiness.StepEligibility, rejDrift}, {readiness.StepEligibility, rejWorkflow}, {readiness.StepEligibility, rejClientProtocol},
		{readiness.StepTrust, rejEntryTenant}, {readiness.StepTrust, rejRuleTenant}, {readiness.StepTrust, rejPrincipalDenied}, {readiness.StepTrust, rejPrincipalNotAllowed},
		{readiness.StepResidency, rejSameRegion}, {readiness.StepSemantic, rejNotEquivalent},
		{readiness.StepSideEffect, rejApproval}, {readiness.StepSideEffect, rejIdempotency},
		{readiness.StepHealth, rejCircuit}, {readiness.StepHealth, rejNoEvidence},
	}
)

// record returns the Candidate of e for an outcome: a shared record for
// admission and for request-independent rejections, else a new one.
func (e *entry) record(step readiness.Step, rj rejection) *mcpreadyv1.Candidate {
	if step == 0 {
		return e.admitted
	}
	if pb := e.staticPB[step]; pb != nil && e.static[step] == rj {
		return pb
	}
	switch {
	case step == readiness.StepEligibility && e.expiresPB != nil && rj == e.expiresRej:
		return e.expiresPB
	case step == readiness.StepEligibility && e.endOfLifePB != nil && rj == e.endOfLifeRej:
		return e.endOfLifePB
	case step == readiness.StepBudget && e.unpricedPB != nil && rj == e.unpricedRej:
		return e.unpricedPB
	}
	for i := range fixedRejections {
		if f := &fixedRejections[i]; f.step == step && f.rej == rj {
			return e.fixedPB[i]
		}
	}
	return e.candidate(step, rj)
}

// candidate builds the receipt Candidate of e with rejection rj at step.
func (e *entry) candidate(step readiness.Step, rj rejection) *mcpreadyv1.Candidate {
	return &mcpreadyv1.Candidate{Entry: e.name, ServerName: e.server, ToolName: e.tool, Endpoint: e.spec.GetIdentity().GetEndpoint(),
		RejectedAtStep: step, RejectionCode: string(rj.code), RejectionReason: rj.reason}
}

// routeSet is a decision's routes and evidence ids, shared by later
// decisions with the same result.
type routeSet struct {
	routes   []Route
	evidence []string
}

type breakerCache struct {
	b []*circuit.Breaker // by entry index
}

// breakersFor returns the cached breakers of src, rebuilding the cache when
// src is a different set (detected by the first entry's breaker pointer).
func (s *Snapshot) breakersFor(src BreakerSource) []*circuit.Breaker {
	if len(s.entries) == 0 {
		return nil
	}
	first := src.Breaker(s.entries[0].circuitKey)
	if c := s.breakers.Load(); c != nil && c.b[0] == first {
		return c.b
	}
	c := &breakerCache{b: make([]*circuit.Breaker, len(s.entries))}
	for i, e := range s.entries {
		c.b[i] = src.Breaker(e.circuitKey)
	}
	s.breakers.Store(c)
	return c.b
}
