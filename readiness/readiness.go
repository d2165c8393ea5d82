// Package readiness is the one vocabulary of what receipts record: the
// decision steps (capability resolution and the eight hard filters of the
// agent's decision), the stable rejection codes, the executor's actions and
// the outcome classes, each defined once with a one-line description, and
// Terms, the table that lists them all (for the generated reference, the
// CLI's explanations and the control plane).
//
// Steps, actions and outcomes are the proto enums that travel in receipts;
// rejection codes are strings on the wire (Candidate.rejection_code), typed
// here. The package holds names only: it must not import anything from
// agent/ or controlplane/, and must not decide, execute or store anything.
package readiness

import (
	"slices"
	"strings"

	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
)

// Step is a decision step (Candidate.rejected_at_step).
type Step = mcpreadyv1.DecisionStep

// Decision steps, in the order the agent runs them. StepNone on a candidate
// means no step rejected it.
const (
	StepNone        Step = mcpreadyv1.DecisionStep_DECISION_STEP_UNSPECIFIED
	StepResolve     Step = mcpreadyv1.DecisionStep_DECISION_STEP_RESOLVE
	StepEligibility Step = mcpreadyv1.DecisionStep_DECISION_STEP_ELIGIBILITY
	StepTrust       Step = mcpreadyv1.DecisionStep_DECISION_STEP_TRUST
	StepResidency   Step = mcpreadyv1.DecisionStep_DECISION_STEP_RESIDENCY
	StepSemantic    Step = mcpreadyv1.DecisionStep_DECISION_STEP_SEMANTIC
	StepSideEffect  Step = mcpreadyv1.DecisionStep_DECISION_STEP_SIDE_EFFECT
	StepHealth      Step = mcpreadyv1.DecisionStep_DECISION_STEP_HEALTH
	StepBudget      Step = mcpreadyv1.DecisionStep_DECISION_STEP_BUDGET
	StepLatency     Step = mcpreadyv1.DecisionStep_DECISION_STEP_LATENCY
)

// Filters are the eight hard filters in order (StepResolve precedes them).
var Filters = [...]Step{StepEligibility, StepTrust, StepResidency, StepSemantic, StepSideEffect, StepHealth, StepBudget, StepLatency}

// Number is the step's number in the decision order as the AI agent sees it
// in a structured tool error: 1-8 for the filters, 0 for resolution.
func Number(s Step) int {
	if s == StepResolve {
		return 0
	}
	return int(s)
}

// Code is a stable rejection code (Candidate.rejection_code, and the code of
// a refused call's structured tool error).
type Code string

// Rejection codes recorded by the decision (the step that records each is in
// Terms).
const (
	CodeUnknownTool            Code = "unknown_tool"
	CodeNotInInventory         Code = "not_in_inventory"
	CodeEndpointNotApproved    Code = "endpoint_not_approved"
	CodeLifecycle              Code = "lifecycle_not_qualified"
	CodeEntryExpired           Code = "entry_expired"
	CodeEndOfLife              Code = "end_of_life"
	CodeDriftBlocked           Code = "drift_blocked"
	CodeWorkflow               Code = "workflow_not_allowlisted"
	CodeProtocolVersion        Code = "protocol_version"
	CodeOwnerNotApproved       Code = "owner_not_approved"
	CodeIssuerNotPermitted     Code = "issuer_not_permitted"
	CodeAuthScheme             Code = "auth_scheme"
	CodeScopeNotPermitted      Code = "scope_not_permitted"
	CodePrincipalDenied        Code = "principal_denied"
	CodeTenant                 Code = "tenant_out_of_boundary"
	CodeResidency              Code = "residency"
	CodeDataHandling           Code = "data_handling"
	CodeDataClass              Code = "data_class"
	CodeNotEquivalent          Code = "not_equivalent"
	CodeApprovalUnavailable    Code = "approval_required_unavailable"
	CodeIdempotencyRequired    Code = "idempotency_required"
	CodeCircuitOpen            Code = "circuit_open"
	CodeEvidenceUnknown        Code = "evidence_unknown"
	CodeEvidenceExpired        Code = "evidence_expired"
	CodeEvidenceNotIndependent Code = "evidence_not_independent"
	CodeEvidenceLowConfidence  Code = "evidence_low_confidence"
	CodeEvidenceDrift          Code = "evidence_drift_observed"
	CodeDeadlineBudget         Code = "deadline_budget"
	CodeCost                   Code = "cost"
	CodeCostUnknown            Code = "cost_unknown"
	CodeQuotaExhausted         Code = "quota_exhausted"
	CodeCostCeiling            Code = "cost_ceiling"
)

// Codes of refusals and failures decided around the decision (by the call
// pipeline rather than the filters).
const (
	CodeUnauthenticated Code = "unauthenticated"
	CodeNoPolicy        Code = "no_policy"
	// CodeConfigurationStale refuses every request while the host's
	// TrustPolicy or Policy was signed longer ago than its maximum
	// staleness.
	CodeConfigurationStale  Code = "configuration_stale"
	CodeClassSchemaMismatch Code = "class_schema_mismatch"
	CodeApprovalDenied      Code = "approval_denied"
	CodeInputRoute          Code = "input_route_unavailable"
	CodeInputUnavailable    Code = "input_unavailable"
	CodeInputFailed         Code = "input_failed"
	// CodeClientRequestNotPermitted: the upstream asked the client for
	// something (sampling, elicitation, roots) Policy.clientRequests does
	// not grant it.
	CodeClientRequestNotPermitted Code = "client_request_not_permitted"
	// CodeMethodNotPermitted refuses a resources, prompts, completion or
	// subscription request no method rule of the principal grants for the
	// server (and initialize or logging/setLevel of a principal with no
	// tool and no method rule there).
	CodeMethodNotPermitted Code = "method_not_permitted"
	// CodeResourceNotPermitted refuses a resource URI (read, subscribe,
	// completion ref) outside the resources of every method rule granting
	// the method.
	CodeResourceNotPermitted Code = "resource_not_permitted"
	// CodePromptNotPermitted refuses a prompt name (get, completion ref)
	// outside the prompts of every method rule granting the method.
	CodePromptNotPermitted Code = "prompt_not_permitted"
	// CodeEndpointOutOfScope rejects an entry whose endpoint host is outside
	// its networkScope, for listing and calling alike.
	CodeEndpointOutOfScope Code = "endpoint_out_of_scope"
	// CodeReceiptsUnavailable refuses a call before it starts because the
	// host cannot record its receipt (spool full or broken).
	CodeReceiptsUnavailable Code = "receipts_unavailable"
	// CodeReceiptNotDurable withholds the answer of a state-changing call
	// whose receipt could not be made durable (the call may have run).
	CodeReceiptNotDurable Code = "receipt_not_durable"
	// CodeAgentCapacity refuses a call the agent's own bounds cannot take:
	// a dedicated or owner upstream session, or an upstream call held open
	// for input, past its cap overall or for the principal. Nothing was
	// sent upstream; retrying after other calls end may succeed.
	CodeAgentCapacity Code = "agent_capacity"
	// CodeArgumentsAmbiguous refuses a call whose arguments have an object
	// with one key twice (compared ignoring case, as encoding/json matches
	// keys to fields): parsers differ on which value such an object holds,
	// so the call the policy checked might not be the call an upstream ran.
	CodeArgumentsAmbiguous Code = "arguments_ambiguous"
	// CodeArgumentsMissing rejects a candidate whose registry entry's
	// argument contract requires an argument the call does not have (by
	// exact name, at the top level of the arguments).
	CodeArgumentsMissing Code = "arguments_missing"
	// CodeAmbiguousTool refuses a requested "<server>/<tool>" name (or an
	// aggregate view name) that more than one server and tool pair spells:
	// a tool name may contain '/', so one name could mean two tools.
	CodeAmbiguousTool Code = "ambiguous_tool"
)

// Codes of workflow tracking and workflow reports (agent/workflow): a call
// in a workflow, and the orchestrator's report of its end state.
const (
	// CodeWorkflowIDInvalid refuses an empty, oversized or malformed workflow id.
	CodeWorkflowIDInvalid Code = "workflow_id_invalid"
	// CodeWorkflowForeign refuses a call or report in a workflow another
	// principal opened.
	CodeWorkflowForeign Code = "workflow_foreign"
	// CodeWorkflowClosed refuses a call or report in a workflow already reported.
	CodeWorkflowClosed Code = "workflow_closed"
	// CodeWorkflowLimit refuses a call that would open a workflow past the
	// agent's caps (per principal or overall).
	CodeWorkflowLimit Code = "workflow_limit"
	// CodeWorkflowUnknown refuses a report of a workflow the agent has no
	// call of.
	CodeWorkflowUnknown Code = "workflow_unknown"
	// CodeWorkflowReportInvalid refuses a malformed report.
	CodeWorkflowReportInvalid Code = "workflow_report_invalid"
	// CodeWorkflowReportNotPermitted refuses a report from a principal not
	// allowed to report workflows.
	CodeWorkflowReportNotPermitted Code = "workflow_report_not_permitted"
)

// Codes of the per-call access checks (step 2, agent/access): the token
// about to be presented against the Policy, the Declaration and the
// qualified entry.
const (
	// CodeIssuerMismatch: the token's issuer is not the authorization
	// server the protected resource names and the Declaration declares.
	CodeIssuerMismatch Code = "issuer_mismatch"
	// CodeAudienceMismatch: the token is not for the upstream resource.
	CodeAudienceMismatch Code = "audience_mismatch"
	// CodePermissionDrift: the token grants more authority than the entry
	// was qualified with (PERMISSION_DRIFT).
	CodePermissionDrift Code = "permission_drift"
	// CodeTokenExpired: the token expired and could not be refreshed.
	CodeTokenExpired Code = "token_expired"
	// CodeTenantMismatch: the token's tenant claim is not the tenant the
	// Policy or the entry requires (or the token carries none).
	CodeTenantMismatch Code = "tenant_mismatch"
	// CodeIdempotencyKeyReused refuses a key bound to another payload, or
	// to another tenant class, principal class, principal or tool, before
	// any upstream sees it.
	CodeIdempotencyKeyReused Code = "idempotency_key_reused"
	// CodeIdempotencyKeyInvalid refuses an empty, oversized or non-printable key.
	CodeIdempotencyKeyInvalid Code = "idempotency_key_invalid"
	// CodeIdempotencyRouteUnavailable refuses a repeat whose key's route
	// (the one holding the prior result) is no longer admitted.
	CodeIdempotencyRouteUnavailable Code = "idempotency_route_unavailable"
	// CodeIdempotencyStore refuses a keyed call whose binding could not be
	// made durable.
	CodeIdempotencyStore Code = "idempotency_store_unavailable"
	// CodeSemanticInvalid: a semantic validator rejected the result (or
	// could not evaluate it) and the policy withholds such results.
	CodeSemanticInvalid Code = "semantic_invalid"
)

// ActionKind is what the executor did (Receipt.actions).
type ActionKind = mcpreadyv1.ActionKind

// Executor actions.
const (
	ActionRetry                     ActionKind = mcpreadyv1.ActionKind_ACTION_KIND_RETRY
	ActionHedge                     ActionKind = mcpreadyv1.ActionKind_ACTION_KIND_HEDGE
	ActionFallback                  ActionKind = mcpreadyv1.ActionKind_ACTION_KIND_FALLBACK
	ActionCircuitOpen               ActionKind = mcpreadyv1.ActionKind_ACTION_KIND_CIRCUIT_OPEN
	ActionRetryBudgetExhausted      ActionKind = mcpreadyv1.ActionKind_ACTION_KIND_RETRY_BUDGET_EXHAUSTED
	ActionRetryAfterExceedsDeadline ActionKind = mcpreadyv1.ActionKind_ACTION_KIND_RETRY_AFTER_EXCEEDS_DEADLINE
	ActionAmbiguousNoRetry          ActionKind = mcpreadyv1.ActionKind_ACTION_KIND_AMBIGUOUS_NO_RETRY
	ActionRetryConditionNotAllowed  ActionKind = mcpreadyv1.ActionKind_ACTION_KIND_RETRY_CONDITION_NOT_ALLOWED
	ActionInputRequired             ActionKind = mcpreadyv1.ActionKind_ACTION_KIND_INPUT_REQUIRED
	ActionSlowStart                 ActionKind = mcpreadyv1.ActionKind_ACTION_KIND_SLOW_START
	ActionSameDomain                ActionKind = mcpreadyv1.ActionKind_ACTION_KIND_SAME_DOMAIN
	ActionRateLimitHint             ActionKind = mcpreadyv1.ActionKind_ACTION_KIND_RATE_LIMIT_HINT
)

// NewAction is an action of kind concerning entry ("" for the whole call).
func NewAction(kind ActionKind, entry string) *mcpreadyv1.Action {
	return &mcpreadyv1.Action{Kind: kind, Entry: entry}
}

// ActionString renders an action as the AI agent sees it in a structured
// tool error: "<name>:<entry>" for the actions that move between routes or
// attempts (retry, hedge, fallback, circuit-open), else "<name>" or
// "<name>:<detail>", where name is the action's Terms name (e.g.
// "fallback:docs-b", "circuit-open:docs-a", "retry-budget-exhausted").
func ActionString(a *mcpreadyv1.Action) string {
	name := actionName(a.GetKind())
	switch a.GetKind() {
	case ActionRetry, ActionHedge, ActionFallback, ActionCircuitOpen, ActionSlowStart, ActionRateLimitHint:
		if a.GetEntry() != "" {
			return name + ":" + a.GetEntry()
		}
	}
	if a.GetDetail() != "" {
		return name + ":" + a.GetDetail()
	}
	return name
}

// ActionStrings renders every action with ActionString (nil for none).
func ActionStrings(as []*mcpreadyv1.Action) []string {
	if len(as) == 0 {
		return nil
	}
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = ActionString(a)
	}
	return out
}

func actionName(k ActionKind) string {
	if t := find(actionTerms, int32(k)); t.Name != "" {
		return t.Name
	}
	return strings.ToLower(strings.TrimPrefix(k.String(), "ACTION_KIND_"))
}

// Outcome is an outcome class (Receipt.outcome, Attempt.outcome).
type Outcome = mcpreadyv1.OutcomeClass

// Kind is the vocabulary a Term belongs to.
type Kind string

// Vocabularies of Terms.
const (
	KindStep    Kind = "step"
	KindCode    Kind = "code"
	KindAction  Kind = "action"
	KindOutcome Kind = "outcome"
)

// Term is one named value of the vocabulary.
type Term struct {
	Kind Kind
	// Name as written in receipts and tool errors: the code, the action's
	// rendered name, the enum value name without its prefix for steps and
	// outcomes.
	Name string
	// Value is the enum number of a step, action or outcome (0 for codes).
	Value int32
	// Step is where a code is recorded (StepNone when not by the decision).
	Step        Step
	Description string
}

var stepTerms = []Term{
	{KindStep, "RESOLVE", int32(StepResolve), StepResolve, "resolve the requested name to a consumer-approved equivalence class or an inventoried exact tool"},
	{KindStep, "ELIGIBILITY", int32(StepEligibility), StepEligibility, "eligibility: inventory, approved endpoint, lifecycle QUALIFIED, expiry, drift, workflow allowlist, protocol version"},
	{KindStep, "TRUST", int32(StepTrust), StepTrust, "trust and authority: owner, issuers, auth scheme, scopes, principal rules, tenant"},
	{KindStep, "RESIDENCY", int32(StepResidency), StepResidency, "security and residency: allowed and denied regions, same-region rule, data classes"},
	{KindStep, "SEMANTIC", int32(StepSemantic), StepSemantic, "semantic suitability: an approved member of the equivalence class, not a look-alike by name"},
	{KindStep, "SIDE_EFFECT", int32(StepSideEffect), StepSideEffect, "side-effect safety: approval obtainable, idempotency key present when required"},
	{KindStep, "HEALTH", int32(StepHealth), StepHealth, "current health: circuit breaker state, fresh and fit evidence (else UNKNOWN handled by policy)"},
	{KindStep, "BUDGET", int32(StepBudget), StepBudget, "deadline and cost: observed latency within the per-attempt budget, declared price within the ceiling"},
	{KindStep, "LATENCY", int32(StepLatency), StepLatency, "latency ranking of the admitted routes, last and with hysteresis; rejects nothing"},
}

var codeTerms = []Term{
	{KindCode, string(CodeUnknownTool), 0, StepResolve, "no equivalence class or inventoried tool has the requested name, or it has no candidates"},
	{KindCode, string(CodeNotInInventory), 0, StepEligibility, "the entry is not in the policy's approved inventory"},
	{KindCode, string(CodeEndpointNotApproved), 0, StepEligibility, "the entry's endpoint is not an approved endpoint"},
	{KindCode, string(CodeLifecycle), 0, StepEligibility, "the entry's lifecycle state is not QUALIFIED"},
	{KindCode, string(CodeEntryExpired), 0, StepEligibility, "the registry entry's provenance expired"},
	{KindCode, string(CodeEndOfLife), 0, StepEligibility, "the provider's declared end of life has passed"},
	{KindCode, string(CodeDriftBlocked), 0, StepEligibility, "the live tool definition drifted from the pinned one on this host"},
	{KindCode, string(CodeWorkflow), 0, StepEligibility, "BLOCKED: the workflow is not on the entry's allowlist, or the principal may not act in it"},
	{KindCode, string(CodeProtocolVersion), 0, StepEligibility, "the entry's or the client's protocol version is not permitted by policy"},
	{KindCode, string(CodeOwnerNotApproved), 0, StepTrust, "the server's owner is not an approved owner"},
	{KindCode, string(CodeIssuerNotPermitted), 0, StepTrust, "a declared authorization server is not a permitted issuer"},
	{KindCode, string(CodeAuthScheme), 0, StepTrust, "no required auth scheme is declared"},
	{KindCode, string(CodeScopeNotPermitted), 0, StepTrust, "a scope of the entry exceeds the permitted scopes"},
	{KindCode, string(CodePrincipalDenied), 0, StepTrust, "no principal rule allows the caller this tool, or one denies it"},
	{KindCode, string(CodeTenant), 0, StepTrust, "the tenant class is outside the entry's tenant boundary or the principal's rules"},
	{KindCode, string(CodeResidency), 0, StepResidency, "the server's region is not allowed, denied, or not the caller's under same-region only"},
	{KindCode, string(CodeDataClass), 0, StepResidency, "the entry's data access class is not allowed"},
	{KindCode, string(CodeDataHandling), 0, StepResidency, "the provider's declared data retention is longer than the policy's cap or not stated, or it names a denied sub-processor"},
	{KindCode, string(CodeNotEquivalent), 0, StepSemantic, "same tool name only: not an approved member of the equivalence class"},
	{KindCode, string(CodeArgumentsMissing), 0, StepSemantic, "the call lacks an argument the registry entry's argument contract requires (requiredArguments, compared by exact name); a class falls back to a member whose contract the call meets"},
	{KindCode, string(CodeApprovalUnavailable), 0, StepSideEffect, "human approval is required and the client cannot be asked"},
	{KindCode, string(CodeIdempotencyRequired), 0, StepSideEffect, "policy requires an idempotency key for calls that may change state"},
	{KindCode, string(CodeCircuitOpen), 0, StepHealth, "the circuit breaker of the endpoint and tool is open"},
	{KindCode, string(CodeEvidenceUnknown), 0, StepHealth, "no accepted evidence covers the tool for the principal and tenant (on_unknown DENY)"},
	{KindCode, string(CodeEvidenceExpired), 0, StepHealth, "the freshest applicable evidence expired (on_unknown DENY)"},
	{KindCode, string(CodeEvidenceNotIndependent), 0, StepHealth, "the evidence is below the required independence (on_unknown DENY)"},
	{KindCode, string(CodeEvidenceLowConfidence), 0, StepHealth, "the evidence is below the minimum confidence (on_unknown DENY)"},
	{KindCode, string(CodeEvidenceDrift), 0, StepHealth, "the evidence observed its subject's definition drift during its window, so it describes more than this definition (on_unknown DENY)"},
	{KindCode, string(CodeDeadlineBudget), 0, StepBudget, "the observed p50 latency exceeds the per-attempt budget"},
	{KindCode, string(CodeCost), 0, StepBudget, "the declared price exceeds the policy's ceiling or is in another currency"},
	{KindCode, string(CodeQuotaExhausted), 0, StepBudget, "the local quota budget of the principal for the tool (Policy.cost.maxQuotaUnits per quotaWindow), or the provider's declared quota for the server on this host (Declaration.quota.limit per quota.window), is spent on every route"},
	{KindCode, string(CodeCostCeiling), 0, StepBudget, "the call's declared price would take its workflow past Policy.cost.maxCostPerWorkflow"},
	{KindCode, string(CodeCostUnknown), 0, StepBudget, "the policy sets a cost ceiling and the tool declares no usable price (costUnknown DENY)"},
	{KindCode, string(CodeUnauthenticated), 0, StepTrust, "the caller presented no valid credential"},
	{KindCode, string(CodeNoPolicy), 0, StepEligibility, "no verified policy is installed on this host"},
	{KindCode, string(CodeClassSchemaMismatch), 0, StepEligibility, "the members of the capability do not share one input schema"},
	{KindCode, string(CodeInputRoute), 0, StepEligibility, "the entry that asked for input is no longer admitted for the resumed call"},
	{KindCode, string(CodeApprovalDenied), 0, StepNone, "a human declined the call, or approval could not be obtained"},
	{KindCode, string(CodeInputUnavailable), 0, StepNone, "the upstream asked for input the client cannot provide"},
	{KindCode, string(CodeInputFailed), 0, StepNone, "the client did not provide the input the upstream asked for"},
	{KindCode, string(CodeClientRequestNotPermitted), 0, StepNone, "the upstream asked the client for sampling, elicitation or roots, which the policy's clientRequests do not grant it"},
	{KindCode, string(CodeMethodNotPermitted), 0, StepTrust, "no method rule (Policy.principals[].methods) grants the principal this method on the server; initialize and logging/setLevel need a tool of the server or a method rule for it"},
	{KindCode, string(CodeResourceNotPermitted), 0, StepTrust, "the resource URI is outside the resources of the method rules that grant the method"},
	{KindCode, string(CodePromptNotPermitted), 0, StepTrust, "the prompt is not on the prompts of the method rules that grant the method"},
	{KindCode, string(CodeEndpointOutOfScope), 0, StepEligibility, "the entry's endpoint host is outside the entry's networkScope: no request is sent to it"},
	{KindCode, string(CodeReceiptsUnavailable), 0, StepNone, "the receipt spool cannot accept receipts (full or broken): state-changing calls, and read-only ones unless configured to continue, are refused before they start"},
	{KindCode, string(CodeReceiptNotDurable), 0, StepNone, "the receipt of a state-changing call could not be made durable, so its answer is withheld; the call may have taken effect"},
	{KindCode, string(CodeAmbiguousTool), 0, StepResolve, "the requested name is spelled by more than one server and tool pair (tool names may contain '/'; the aggregate view's names replace characters): it is refused rather than guessed, not listed, and the agent warns when the configuration is installed"},
	{KindCode, string(CodeArgumentsAmbiguous), 0, StepNone, "an object in the call's arguments has one key twice (after unescaping, ignoring case), or a top-level argument is a name the agent reads exactly (the redaction allow-list shown to approvers, an approval value path) but for its case: parsers differ on which value it holds, so the call is refused before the decision and nothing is sent upstream"},
	{KindCode, string(CodeAgentCapacity), 0, StepNone, "the agent's own bounds cannot take the call: calls in progress, a dedicated or owner upstream session, or an upstream call held open for input, is past its cap overall or for the principal; nothing was sent upstream, and the refusal is counted in the agent's metrics"},
	{KindCode, string(CodeIssuerMismatch), 0, StepTrust, "the token's issuer is not the authorization server the protected resource names and the Declaration declares"},
	{KindCode, string(CodeAudienceMismatch), 0, StepTrust, "the token's audience is not the upstream resource"},
	{KindCode, string(CodePermissionDrift), 0, StepTrust, "PERMISSION_DRIFT: the token grants scopes beyond the entry's qualified permission set"},
	{KindCode, string(CodeTokenExpired), 0, StepTrust, "the token for the upstream expired and was not refreshed"},
	{KindCode, string(CodeTenantMismatch), 0, StepTrust, "the token's tenant claim (oauth.tenantClaim) is missing or not the tenant the Policy (auth.requiredTenant) or the entry (authority.tenant) requires"},
	{KindCode, string(CodeIdempotencyKeyReused), 0, StepSideEffect, "the idempotency key is bound to another payload, tenant class, principal class, principal or tool"},
	{KindCode, string(CodeIdempotencyKeyInvalid), 0, StepSideEffect, "the idempotency key is not a string, is empty, is longer than 255 bytes or is not printable ASCII"},
	{KindCode, string(CodeIdempotencyRouteUnavailable), 0, StepSideEffect, "a repeat's key is bound to a route that is no longer admitted"},
	{KindCode, string(CodeIdempotencyStore), 0, StepSideEffect, "the idempotency binding could not be made durable, or a new key would pass the agent's live-key limits (limits.idempotencyKeys, limits.idempotencyKeysPerCaller)"},
	{KindCode, string(CodeSemanticInvalid), 0, StepNone, "a semantic validator (Policy.semanticValidation) rejected the result, or could not evaluate it"},
	{KindCode, string(CodeWorkflowIDInvalid), 0, StepEligibility, "the workflow id is empty, longer than 128 bytes, or not letters, digits and . _ - : / @"},
	{KindCode, string(CodeWorkflowForeign), 0, StepEligibility, "the workflow was opened by another principal: its calls and report are that principal's"},
	{KindCode, string(CodeWorkflowClosed), 0, StepEligibility, "the workflow was already reported (or idled out): it takes no more calls or reports"},
	{KindCode, string(CodeWorkflowLimit), 0, StepEligibility, "the agent tracks as many open workflows as it may (per principal or overall): report or finish one first"},
	{KindCode, string(CodeWorkflowUnknown), 0, StepNone, "a report names a workflow of which this agent recorded no call"},
	{KindCode, string(CodeWorkflowReportInvalid), 0, StepNone, "the workflow report is malformed: unknown field, bad end state, or a contributing receipt that is not a call of the workflow"},
	{KindCode, string(CodeWorkflowReportNotPermitted), 0, StepTrust, "the principal may not report workflows (agent config reportWorkflows, or identityProvider.workflowReporters for its class)"},
}

var actionTerms = []Term{
	{KindAction, "retry", int32(ActionRetry), StepNone, "another attempt on the same route after a retryable failure"},
	{KindAction, "hedge", int32(ActionHedge), StepNone, "a second, concurrent attempt on a read-only route"},
	{KindAction, "fallback", int32(ActionFallback), StepNone, "the next admitted route of the class was tried"},
	{KindAction, "circuit-open", int32(ActionCircuitOpen), StepNone, "a route was skipped because its circuit breaker is open"},
	{KindAction, "retry-budget-exhausted", int32(ActionRetryBudgetExhausted), StepNone, "no retry or hedge: the agent-wide retry budget is spent, or (detail \"call\") the call's attempts over all its routes are at their bound"},
	{KindAction, "retry-after-exceeds-deadline", int32(ActionRetryAfterExceedsDeadline), StepNone, "no retry: the wait would pass the call's deadline"},
	{KindAction, "ambiguous-no-retry", int32(ActionAmbiguousNoRetry), StepNone, "a state-changing call ended ambiguous and was not retried"},
	{KindAction, "retry-condition-not-allowed", int32(ActionRetryConditionNotAllowed), StepNone, "no retry: the route's retry conditions exclude the failure (detail names it)"},
	{KindAction, "input_required", int32(ActionInputRequired), StepNone, "the round ended in an input request to the client"},
	{KindAction, "slow-start", int32(ActionSlowStart), StepNone, "a route was skipped: its breaker is re-admitting traffic gradually and the call was outside its share"},
	{KindAction, "same-domain", int32(ActionSameDomain), StepNone, "a fallback route was skipped: it shares a failure domain (the detail) with a route that failed in this call"},
	{KindAction, "rate-limit-hint", int32(ActionRateLimitHint), StepNone, "a route was ranked after the others: its upstream's RateLimit field said its quota is spent until a reset"},
}

var outcomeTerms = []Term{
	{KindOutcome, "SUCCESS", int32(mcpreadyv1.OutcomeClass_OUTCOME_CLASS_SUCCESS), StepNone, "the upstream answered and the result passed validation"},
	{KindOutcome, "REFUSED", int32(mcpreadyv1.OutcomeClass_OUTCOME_CLASS_REFUSED), StepNone, "the decision admitted no route; nothing was sent"},
	{KindOutcome, "TRANSPORT_FAILURE", int32(mcpreadyv1.OutcomeClass_OUTCOME_CLASS_TRANSPORT_FAILURE), StepNone, "the upstream could not be reached or answered with a server error"},
	{KindOutcome, "ACCESS_NOT_READY", int32(mcpreadyv1.OutcomeClass_OUTCOME_CLASS_ACCESS_NOT_READY), StepNone, "the upstream refused the credential (401/403)"},
	{KindOutcome, "BILLING", int32(mcpreadyv1.OutcomeClass_OUTCOME_CLASS_BILLING), StepNone, "the upstream asked for payment (402)"},
	{KindOutcome, "RATE_LIMITED", int32(mcpreadyv1.OutcomeClass_OUTCOME_CLASS_RATE_LIMITED), StepNone, "the upstream rate-limited the call (429)"},
	{KindOutcome, "PROTOCOL_ERROR", int32(mcpreadyv1.OutcomeClass_OUTCOME_CLASS_PROTOCOL_ERROR), StepNone, "a JSON-RPC error or a malformed answer"},
	{KindOutcome, "TOOL_ERROR", int32(mcpreadyv1.OutcomeClass_OUTCOME_CLASS_TOOL_ERROR), StepNone, "the tool reported isError inside a protocol success"},
	{KindOutcome, "INVALID_RESULT", int32(mcpreadyv1.OutcomeClass_OUTCOME_CLASS_INVALID_RESULT), StepNone, "the result failed validation (size, output schema, injection tripwire)"},
	{KindOutcome, "AMBIGUOUS", int32(mcpreadyv1.OutcomeClass_OUTCOME_CLASS_AMBIGUOUS), StepNone, "a timeout after the request was sent: the call may have taken effect"},
	{KindOutcome, "TIMEOUT", int32(mcpreadyv1.OutcomeClass_OUTCOME_CLASS_TIMEOUT), StepNone, "the deadline passed before the request was sent"},
	{KindOutcome, "CIRCUIT_OPEN", int32(mcpreadyv1.OutcomeClass_OUTCOME_CLASS_CIRCUIT_OPEN), StepNone, "every admitted route's circuit breaker was open"},
	{KindOutcome, "APPROVAL_DENIED", int32(mcpreadyv1.OutcomeClass_OUTCOME_CLASS_APPROVAL_DENIED), StepNone, "a human declined the call or could not be asked"},
	{KindOutcome, "DRIFT_BLOCKED", int32(mcpreadyv1.OutcomeClass_OUTCOME_CLASS_DRIFT_BLOCKED), StepNone, "the tool definition drifted from its pin; the call was blocked"},
}

// Terms lists the whole vocabulary: steps in decision order, then codes,
// actions and outcomes. The slice is new on every call.
func Terms() []Term {
	out := make([]Term, 0, len(stepTerms)+len(codeTerms)+len(actionTerms)+len(outcomeTerms))
	for _, l := range [][]Term{stepTerms, codeTerms, actionTerms, outcomeTerms} {
		out = append(out, l...)
	}
	return out
}

// StepName is the short name of a step ("" for StepNone or an unknown value).
func StepName(s Step) string { return find(stepTerms, int32(s)).Name }

// StepDescription is the one-line description of a step ("" when unknown).
func StepDescription(s Step) string { return find(stepTerms, int32(s)).Description }

// find is the term of terms with value v (zero when none).
func find(terms []Term, v int32) Term {
	for _, t := range terms {
		if t.Value == v {
			return t
		}
	}
	return Term{}
}

// OutcomeName is an outcome's Terms name: its enum name without the
// OUTCOME_CLASS_ prefix (e.g. "SUCCESS").
func OutcomeName(o Outcome) string {
	return strings.TrimPrefix(o.String(), "OUTCOME_CLASS_")
}

// Auth classes: how a call authenticated to its upstream
// (Receipt.auth_class), and the class an Evidence's observation was made
// under (Evidence.auth_class). Evidence that states an auth class counts
// only for calls the agent makes the same way: success seen without a
// credential says nothing of a call that presents one, and the reverse.
const (
	// AuthKeyless: an HTTP upstream called with no credential.
	AuthKeyless = "keyless"
	// AuthBearer: a static bearer token the configuration supplies.
	AuthBearer = "bearer-token"
	// AuthStdio: a local process; no credential crosses the wire.
	AuthStdio = "stdio"
)

// OAuth grants the agent obtains upstream tokens with (agent/config's
// OAuth.Grant), as auth classes name them.
const (
	GrantClientCredentials = "client_credentials"
	GrantTokenExchange     = "token_exchange"
	GrantAuthorizationCode = "authorization_code"
	GrantJWTBearer         = "jwt_bearer"
	GrantIDJAG             = "id_jag"
)

// AuthOAuth is the auth class of a token obtained with an OAuth grant
// ("oauth:client_credentials", ...).
func AuthOAuth(grant string) string { return authOAuthPrefix + grant }

const authOAuthPrefix = "oauth:"

// Grants lists the OAuth grants, in the order errors name them.
var Grants = []string{GrantClientCredentials, GrantTokenExchange, GrantAuthorizationCode, GrantJWTBearer, GrantIDJAG}

// IsAuthClass reports whether s is an auth class an agent calls with: one
// of the Auth constants, or AuthOAuth of one of the Grants.
func IsAuthClass(s string) bool {
	switch s {
	case AuthKeyless, AuthBearer, AuthStdio:
		return true
	}
	g, ok := strings.CutPrefix(s, authOAuthPrefix)
	return ok && slices.Contains(Grants, g)
}

// DriftName is a drift label's name without the DRIFT_LABEL_ prefix
// (e.g. "INPUT_SCHEMA_DRIFT").
func DriftName(l mcpreadyv1.DriftLabel) string {
	return strings.TrimPrefix(l.String(), "DRIFT_LABEL_")
}

// Requests an upstream may send towards the client during a call: what
// Policy.clientRequests grants, and what the receipt of such a request
// names (Receipt.requested).
const (
	ClientSampling    = "sampling/createMessage"
	ClientElicitation = "elicitation/create"
	ClientRoots       = "roots/list"
)
