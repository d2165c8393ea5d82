package decide

// The decision's inputs and outputs: what a caller builds (Inputs,
// Request) and reads (Decision, Route, Visible, RefusalError).

import (
	"errors"
	"fmt"
	"time"

	"github.com/mcpready/mcpready/agent/circuit"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/readiness"
)

// ErrRefused matches every *RefusalError (errors.Is).
var ErrRefused = errors.New("refused by policy")

// RefusalError says why no route was admitted: the rejection of the
// candidate that got furthest through the filters, or the resolution failure.
type RefusalError struct {
	Step   readiness.Step
	Code   readiness.Code
	Reason string
}

func (e *RefusalError) Error() string {
	return fmt.Sprintf("refused at step %d (%s): %s", e.Step, e.Code, e.Reason)
}

// Is makes errors.Is(err, ErrRefused) true.
func (e *RefusalError) Is(target error) bool { return target == ErrRefused }

// Inputs are verified artifacts: the caller has already checked every
// signature against its TrustPolicy. Maps are keyed by metadata.name.
type Inputs struct {
	PolicyName, PolicyVersion string
	Policy                    *mcpreadyv1.Policy
	Entries                   map[string]*mcpreadyv1.RegistryEntry
	// Declarations keyed by server name (Declaration.server_name, which is
	// also its metadata.name).
	Declarations map[string]*mcpreadyv1.Declaration
	Evidence     map[string]*mcpreadyv1.Evidence
	// HysteresisMargin: a challenger replaces the current preferred route
	// only when its latency score is better by more than this fraction.
	// Zero means 0.2.
	HysteresisMargin float64
	// MaxRoutes bounds the fallback chain: at most this many admitted
	// candidates become Routes (the rest stay admitted candidates), so a
	// failing class cannot fan one call out across every member. Zero
	// means 4.
	MaxRoutes int
	// Previous, when set, carries the preferred route of each class over to
	// the new snapshot so a configuration update does not reshuffle traffic.
	Previous *Snapshot
}

// Request is one tool call to decide.
type Request struct {
	// Tool is a capability (equivalence class name) or an exact tool
	// "<server>/<tool>".
	Tool                                string
	Principal, Tenant, Region, Workflow string
	// ProtocolVersion the calling client negotiated; checked against
	// Policy.protocol_versions when both are set.
	ProtocolVersion string
	// IdempotencyKey: the caller supplied an idempotency key.
	IdempotencyKey bool
	// Arguments of the call (raw JSON), read by approval rules that apply
	// above a value (Policy.approvals[].aboveValue at valuePath); nil for
	// none.
	Arguments []byte
	// AllocateKey: the caller allocates a key for a call without one when
	// the route's provider declares key support (Route.KeySupport), so such
	// a route counts as keyed.
	AllocateKey bool
	// ApprovalAvailable: a human can be asked (the client supports MCP
	// elicitation). Tools that require approval are refused without it.
	ApprovalAvailable bool
	// Deadline is the caller's own remaining budget; zero means none, so the
	// policy deadline applies. The narrower of the two wins.
	Deadline time.Duration
	// Now is the decision time (evidence and entry expiry). Zero means
	// time.Now(), so a forgotten clock never makes stale evidence fresh.
	Now time.Time
	// AuthClass names how the agent authenticates to a server's upstream
	// at an endpoint (readiness.Auth*). Evidence stating an auth class
	// counts only for routes the agent calls that way. Nil knows none, so
	// evidence stating an auth class counts for no route.
	AuthClass func(server, endpoint string) string
	// Drift reports the entries whose live tool definition no longer
	// matches the pinned one on this host; they are rejected at step 1
	// (drift_blocked). Nil blocks none.
	Drift DriftGuard
	// Access checks the token each candidate's upstream would be
	// presented, per call, at step 2. Nil checks none.
	Access AccessGuard
}

// Health reports the breaker state of a circuit key (Route.CircuitKey).
// *circuit.Set implements it. A nil Health means everything is Closed.
type Health interface {
	State(key string, now time.Time) circuit.State
}

// DriftGuard reports entries blocked because of drift (Request.Drift).
// *pin.Blocklist implements it.
type DriftGuard interface {
	Drifted(entry string) bool
}

// DomainHealth may be implemented by the Health passed to Decide (as
// *circuit.Set does): routes with a suspect failure domain rank below the
// others of their tier.
type DomainHealth interface {
	Suspect(domain string, now time.Time) bool
}

// BreakerSource may be implemented by the Health passed to Decide (as
// *circuit.Set does): the snapshot then caches each entry's *circuit.Breaker
// and reads breaker state without a map lookup per candidate.
type BreakerSource interface {
	Breaker(key string) *circuit.Breaker
}

// Backoff is the retry backoff of the policy.
type Backoff struct {
	Base, Max time.Duration
}

// Route is one admitted way to serve the call.
type Route struct {
	Entry    string // RegistryEntry name
	Spec     *mcpreadyv1.RegistryEntry
	Identity *mcpreadyv1.ToolIdentity
	// CircuitKey is circuit.Key(endpoint, tool).
	CircuitKey string
	// Class is the equivalence class name, "" for an exact-tool request.
	Class string
	// ProviderSideEffect: from the provider's Declaration, else the entry.
	// ConsumerSideEffect: assigned by Policy.side_effects, else UNKNOWN.
	ProviderSideEffect, ConsumerSideEffect mcpreadyv1.SideEffectClass
	// SideEffectConflict: the consumer says READ_ONLY but the provider
	// declares more; the route is then treated as state-changing.
	SideEffectConflict bool
	// Retryable: consumer READ_ONLY (without conflict), or an idempotency key
	// is present (or will be allocated, Request.AllocateKey) and the entry is
	// KEYED or NATURALLY_IDEMPOTENT or its provider declares key support.
	Retryable bool
	// KeySupport: the provider's Declaration says the tool is KEYED.
	// KeyHeader (HTTP header) and KeyArgument (tool argument) are where the
	// key travels besides _meta ("" for not there); KeyRetention is how
	// long the provider keeps keys (zero: not declared).
	KeySupport             bool
	KeyHeader, KeyArgument string
	KeyRetention           time.Duration
	// ReadOnly: consumer READ_ONLY without conflict (hedging allowed).
	ReadOnly bool
	// ApprovalRequired: a human must approve this call on this route (the
	// entry or a policy rule requires it, an above-value rule's value is
	// exceeded or unreadable).
	ApprovalRequired bool
	// Reversible: the entry declares rollback support (the approver is
	// told whether the effect can be undone).
	Reversible bool
	// Domains are the route's failure domains, sorted, joined with ","
	// ("" for none); see Declaration.failure_domains.
	Domains string
	// IncidentOwner answers for the route's incidents: the owner of the
	// first Policy incidentOwners rule matching "<server>/<tool>" ("" for
	// none).
	IncidentOwner string
	// InputClass is the call's input class for the route: the first
	// Policy.inputClasses rule matching "<server>/<tool>" whose expression
	// holds for the arguments ("" for none).
	InputClass string
	// QuotaUnit names the provider's quota unit (Declaration.quota.unit,
	// "call" when none); QuotaByTenant: its partition keys include
	// "tenant", so local budgets are kept per tenant too.
	QuotaUnit     string
	QuotaByTenant bool
	// ProviderQuota is the provider's declared quota for the server, all
	// its tools together (Declaration.quota.limit), in units per
	// ProviderWindow (quota.window), counted by the call pipeline on this
	// host; zero when either is unset.
	ProviderQuota  int64
	ProviderWindow time.Duration
	// Cost is the declared price of one call ("<amount> <currency>"),
	// "unknown" when the policy caps cost and admits an unpriced tool
	// (on_unknown_price ALLOW), "" when nothing is declared.
	Cost string
	// Price is the declared amount of one call; Priced says one is
	// declared (a usable amount).
	Price  float64
	Priced bool
	// ApprovalPrompt is the question put to the approver; the call
	// pipeline sets it on its own copy of the route before asking, "" in
	// decisions.
	ApprovalPrompt string
	// MaxAttempts on this route: Policy.retry.max_attempts (default 3) when
	// Retryable and RetryOn allows some retry, else 1.
	MaxAttempts int
	// RetryOn: the failure conditions a Retryable route is retried on
	// (policy conditions narrowed by the provider's declared ones; zero is
	// the default set).
	RetryOn RetryConditions
	// PerAttempt timeout: Policy.retry.per_attempt_timeout, else the
	// decision deadline / MaxAttempts.
	PerAttempt time.Duration
	// HedgeAfter: Policy.retry.hedge_after for ReadOnly routes, else 0.
	HedgeAfter time.Duration
	// OutputSchemaDigest is the pinned output schema digest ("" if none).
	OutputSchemaDigest string
	// EvidenceID is the Evidence used ("" when Unknown).
	EvidenceID string
	// Unknown: no fresh evidence; admitted by on_unknown ALLOW, ranked below
	// routes with fresh evidence.
	Unknown bool
	// HalfOpen: the breaker is re-admitting gradually; ranked below closed.
	HalfOpen bool
	// Deprecated: the provider's Declaration deprecated the server
	// (deprecated_at passed); ranked below the other routes of its evidence
	// and health tier.
	Deprecated bool
	// P50, P99 latency from evidence (0 when unknown).
	P50, P99 time.Duration
	// admitted and selected are the entry's shared receipt records of its
	// admission and of its admission as the route that ran (WithSelected).
	admitted, selected *mcpreadyv1.Candidate
}

// Decision is the outcome of Decide.
type Decision struct {
	// Requested is Request.Tool; Class the resolved equivalence class ("" for
	// an exact tool).
	Requested, Class string
	// Candidates: every candidate considered, with rejected_at_step, code and
	// reason for the rejected ones. The slice and the records are shared
	// with other decisions and must not be modified: use WithSelected for
	// the receipt.
	Candidates []*mcpreadyv1.Candidate
	// Routes: admitted, best first; the fallback order. Only the first when
	// the class does not allow fallback; at most Inputs.MaxRoutes. Shared
	// with other decisions: read-only.
	Routes        []Route
	PolicyVersion string
	// EvidenceIDs used by the routes (shared, read-only).
	EvidenceIDs []string
	// Deadline is the one end-to-end deadline of the call.
	Deadline time.Duration
	Backoff  Backoff
	// QuotaLimit is Policy.cost.max_quota_units (0: no local budget) per
	// QuotaWindow (default one minute), counted by the call pipeline.
	QuotaLimit  int64
	QuotaWindow time.Duration
	// WorkflowCostCeiling is Policy.cost.max_cost_per_workflow (0: none),
	// counted by the call pipeline over Route.Price per workflow and day.
	WorkflowCostCeiling float64
	// AllowUnknownPrice: Policy.cost.on_unknown_price is ALLOW (an
	// unpriced route counts as zero against the workflow ceiling; else it
	// is dropped when the ceiling applies).
	AllowUnknownPrice bool
	// MaxAttempts is Policy.retry.max_attempts (default 3): with one
	// attempt for each fallback route it bounds every attempt of the call,
	// retries and hedges on all its routes together.
	MaxAttempts int
	// Refusal is non-nil (a *RefusalError) when no route is admitted.
	Refusal error
}

// WithSelected returns the candidates for a receipt, with the one for entry
// marked selected (the shared candidates stay untouched): the entry's
// shared selected record when it is a route's admission, as it is for the
// route that ran, else a copy.
func (d *Decision) WithSelected(entry string) []*mcpreadyv1.Candidate {
	out := make([]*mcpreadyv1.Candidate, len(d.Candidates))
	copy(out, d.Candidates)
	for i, c := range out {
		if c.GetEntry() == entry {
			out[i] = d.selectedOf(c)
		}
	}
	return out
}

// selectedOf is c marked selected: shared when c is a route's admission.
func (d *Decision) selectedOf(c *mcpreadyv1.Candidate) *mcpreadyv1.Candidate {
	for i := range d.Routes {
		if r := &d.Routes[i]; r.admitted == c && r.selected != nil {
			return r.selected
		}
	}
	return selected(c)
}

// selected is a copy of c marked selected, field by field: a reflective
// proto clone costs more than the rest of the receipt's decision record
// (TestSelectedCopiesEveryField keeps the copy complete).
func selected(c *mcpreadyv1.Candidate) *mcpreadyv1.Candidate {
	return &mcpreadyv1.Candidate{Entry: c.Entry, ServerName: c.ServerName, ToolName: c.ToolName, Endpoint: c.Endpoint, Selected: true,
		RejectedAtStep: c.RejectedAtStep, RejectionCode: c.RejectionCode, RejectionReason: c.RejectionReason}
}

// Visible is one tool a principal may see in tools/list.
type Visible struct {
	// Name: the class name for a capability, "<server>/<tool>" for an exact
	// tool.
	Name        string
	Class       bool
	Description string // the class description ("" for exact tools)
	// Server and Tool of an exact tool ("" for a class).
	Server, Tool string
	// Entries that admit admits for the listing request.
	Entries []string
}
