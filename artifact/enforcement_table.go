package artifact

// The enforcement table: every field of every kind's spec, enforced (and
// where), not enforced, or record only. It is the one source for the
// "enforced" column of docs/reference.md, for the warnings of
// `mcpready apply` and for the agent's install-time warnings. A field is
// Enforced only when code outside display and receipts acts on it; when a
// later change enforces a field, change its row here (the tests fail when
// a proto field has no row).

const (
	inDecide    = "agent/decide"
	inAccess    = "agent/access"
	inInvoke    = "agent/invoke"
	inCircuit   = "agent/circuit"
	inValidate  = "agent/validate"
	inPin       = "agent/pin"
	inKeys      = "agent/pipeline, agent/idempotency"
	inMethods   = "agent/decide, agent/pipeline"
	inClientReq = "agent/decide, agent/front"
	inQuota     = "agent/pipeline, agent/quota"
	inRetrieval = "internal/retrieve, cmd/mcpready"
	inSign      = "sign"
	inLifecycle = "controlplane/lifecycle"
	inAdmin     = "controlplane/admin"
	inChain     = "receipt chain check (control-plane ingest, receipts verify)"
	// inFreshness: artifact.CheckNewer and artifact.CheckExpiry, run by
	// the control plane's write path and by the agent at install.
	inFreshness = "controlplane/writer, agent/subscribe"
)

func yes(where, note string) Rule { return Rule{Status: Enforced, Where: where, Note: note} }
func no(note string) Rule         { return Rule{Status: NotEnforced, Note: note} }
func rec(note string) Rule        { return Rule{Status: Record, Note: note} }

// under prefixes every path of rules with prefix + ".".
func under(prefix string, rules map[string]Rule) map[string]Rule {
	out := make(map[string]Rule, len(rules))
	for p, r := range rules {
		out[prefix+"."+p] = r
	}
	return out
}

// merge joins tables; a later one overrides an earlier one.
func merge(tables ...map[string]Rule) map[string]Rule {
	out := map[string]Rule{}
	for _, t := range tables {
		for p, r := range t {
			out[p] = r
		}
	}
	return out
}

// provenance is the shared Provenance block; kinds override what they use.
func provenance(overrides map[string]Rule) map[string]Rule {
	return under("provenance", merge(map[string]Rule{
		"issuer":             rec("recorded; not compared with the signing key"),
		"verificationMethod": rec(""),
		"version":            yes(inFreshness, "must be strictly greater than the highest version stored or installed for the same kind and name (rollback protection); dot-separated integers, unset is 0"),
		"issuedAt":           rec(""),
		"expiresAt":          yes(inFreshness, "an expired artifact is neither stored nor installed"),
		"sourceUri":          yes(inRetrieval, "where the artifact was fetched from: set by `mcpready sign --source`, fetched again by `mcpready verify --source`"),
		"retrievalDigest":    yes(inRetrieval, "the SHA-256 of the bytes fetched from sourceUri (sign --source); verify --source fails (exit 3) when the source now serves other bytes; not sha256:<64 hex>: refused"),
		"owner":              rec(""),
		"approvalRef":        rec(""),
	}, overrides))
}

var enforcement = map[Kind]map[string]Rule{
	KindTrustPolicy: merge(provenance(map[string]Rule{
		"expiresAt": yes(inSign, "an expired trust policy verifies nothing; not stored or installed; when an installed one expires the agent stops using everything (agent/subscribe)"),
		"version":   yes(inFreshness, "one chain per organisation whatever the name: the active TrustPolicy is the highest signed version that verifies against the root (sign.PickTrust), and a new one must be newer than it"),
	}), under("supersedes", map[string]Rule{
		"name":    yes(inFreshness, "the control plane requires the active TrustPolicy's name, version and digest exactly; an agent requires them when they name the version it holds (sign.CheckSuccessor)"),
		"version": yes(inFreshness, "must be older than the policy's own version"),
		"digest":  yes(inFreshness, "sha256 of the superseded bundle; a mismatch is a fork (trust-chain)"),
	}), under("keys", map[string]Rule{
		"keyId":            yes(inSign, "must match the public key"),
		"publicKey":        yes(inSign, ""),
		"name":             rec(""),
		"kinds":            yes(inSign, "kinds the key may sign"),
		"scopes":           yes(inSign, "name patterns the key may sign"),
		"notBefore":        yes(inSign, ""),
		"notAfter":         yes(inSign, ""),
		"revoked":          yes(inSign, ""),
		"revokedAt":        yes(inSign, ""),
		"revocationReason": rec(""),
		"evidenceIssuer":   yes(inSign, "an Evidence signed by the key must state this provenance.issuer (claim-not-granted otherwise); required on every unrevoked grant of Evidence or \"*\" (the TrustPolicy is refused: evidence-grant-unbound)"),
		"independence":     yes(inSign, "an Evidence signed by the key must state this observer.independence (claim-not-granted otherwise); required on every unrevoked grant of Evidence or \"*\" (the TrustPolicy is refused: evidence-grant-unbound)"),
	})),

	KindDeclaration: merge(provenance(map[string]Rule{
		"issuer":    yes(inDecide, "identifies the provider when evidence must be independent"),
		"expiresAt": yes(inFreshness, "an expired artifact is neither stored nor installed; when an installed one expires the agent stops using it and its server's registry entries"),
	}), map[string]Rule{
		"serverName":                    yes(inDecide, "joins the declaration to registry entries"),
		"serverVersion":                 rec("the registry entry's identity is what is pinned"),
		"endpoint":                      yes(inPin, "routing uses the registry entries' endpoints; a declared endpoint other than the entry's is NETWORK_DRIFT and blocks the tool"),
		"owner":                         yes(inDecide, "Policy.approvedOwners; provider identity for evidence independence"),
		"operator":                      yes(inDecide, "provider identity for evidence independence"),
		"protocolVersions":              yes(inDecide, "an entry whose protocolVersion the list does not include is rejected at step 1 (protocol_version)"),
		"auth.methods":                  yes(inDecide, "Policy.auth.requiredSchemes"),
		"auth.authorizationServers":     yes(inDecide, "Policy.auth.permittedIssuers"),
		"auth.requiredScopes":           yes(inPin, "a set other than the entry's scopes and permissionSet together is PERMISSION_DRIFT and blocks the tool (when the entry lists any)"),
		"auth.tenantModel":              rec(""),
		"tools.name":                    yes(inDecide, "joins a declared tool to its entry"),
		"tools.sideEffect":              yes(inDecide, "the provider's class, compared with the consumer's"),
		"tools.idempotency":             yes(inKeys, "KEYED: the agent allocates a key for a state-changing call without one, and the call may be retried with it"),
		"tools.idempotencyKeyHeader":    yes(inKeys, "the key is sent in this HTTP header as well as in _meta (the connection's own headers are never replaced)"),
		"tools.idempotencyKeyRetention": yes(inKeys, "how long the agent keeps the key's binding; zero: 24 hours"),
		"tools.idempotencyKeyArgument":  yes(inKeys, "the key is set as this tool argument as well as in _meta"),
		"tools.humanConfirmation":       yes(inDecide, "required: every call needs a human's approval; required-above-value: the policy's approval rule with aboveValue for the tool decides, and without one every call needs approval; none or unset: no effect; any other value is taken as required (the agent warns)"),
		"regions":                       yes(inDecide, "the entry's region must be one of them (step 3, residency); residency rules are applied to the entry's region"),
		"dataResidency":                 yes(inDecide, "held to the Policy's residency rules like the entry's region: a region not in allowedRegions, or in deniedRegions, rejects the server's entries at step 3 (residency)"),
		"timeouts.recommendedTotal":     yes(inDecide, "without a per-attempt timeout from the Policy or the Declaration, the route's attempts share it when it is shorter than the deadline"),
		"timeouts.perAttempt":           yes(inDecide, "the route's per-attempt timeout when the Policy sets no retry.perAttemptTimeout; never past the deadline"),
		"retryableConditions":           yes(inDecide, "narrows the policy's retryable conditions"),
		"quota.unit":                    rec("names the unit in receipts' quota; every call counts one unit"),
		"quota.partitionKeys":           yes(inQuota, "\"tenant\" keeps local budgets per tenant too; any other key is not read, and apply warns (artifact.Advise)"),
		"quota.limit":                   yes(inQuota, "with quota.window: units of the server's quota (all its tools, every principal, per tenant with partitionKeys tenant) each agent keeps its host's calls within, per window; spent: the server's routes are dropped, none left: quota_exhausted at step 7; without a window, or not positive, apply warns (artifact.Advise)"),
		"quota.window":                  yes(inQuota, "the period of quota.limit; zero: the limit is not counted"),
		"pricing.source":                rec(""),
		"pricing.unit":                  yes(inDecide, "none, call, request or invocation (per- prefix allowed, any case) is per call; any other unit makes the cost UNKNOWN, handled as the Policy's cost.onUnknownPrice says"),
		"pricing.currency":              yes(inDecide, "compared with Policy.cost.currency"),
		"pricing.amount":                yes(inDecide, "Policy.cost.maxCostPerCall; none or not a number is an unknown price (Policy.cost.onUnknownPrice); recorded in receipts' cost"),
		"pricing.effectiveFrom":         yes(inDecide, "the declared price holds only from effectiveFrom until effectiveUntil; outside them the cost is UNKNOWN, handled as the Policy's cost.onUnknownPrice says (cost_unknown at step 7, or cost \"unknown\" and no price for the budgets)"),
		"pricing.effectiveUntil":        yes(inDecide, "the declared price holds only from effectiveFrom until effectiveUntil; outside them the cost is UNKNOWN, handled as the Policy's cost.onUnknownPrice says (cost_unknown at step 7, or cost \"unknown\" and no price for the budgets)"),
		"dataHandling.retention":        yes(inDecide, "Policy.residency.maxRetention: longer, unstated or unreadable is refused (data_handling); ISO 8601 (months 31 days, years 366), Go durations or none"),
		"dataHandling.subProcessors":    yes(inDecide, "Policy.residency.deniedSubProcessors, compared ignoring case (data_handling)"),
		"dataHandling.classification":   yes(inPin, "when it names a data access class (public, tenant-private, sensitive) more sensitive than the entry's dataAccess, DATA_ACCESS_DRIFT blocks the tool; any other value is not read"),
		"deprecatedAt":                  yes(inDecide, "ranks the server lower"),
		"endOfLifeAt":                   yes(inDecide, "rejected at step 1"),
		"contacts.support":              rec(""),
		"contacts.incident":             rec(""),
		"contacts.statusPageUri":        rec(""),
		"failureDomains":                yes(inDecide+", "+inInvoke, "fallback prefers another domain; a failure makes same-domain routes suspect (ranked lower) and skips same-domain fallbacks in that call"),
	}),

	KindRegistryEntry: merge(provenance(map[string]Rule{
		"expiresAt": yes(inDecide, "not stored or installed once expired (controlplane/writer, agent/subscribe); an installed entry that expires is rejected at step 1"),
		"owner":     yes(inDecide, "Policy.approvedOwners when the declaration has none; provider identity for evidence independence"),
	}), under("identity", map[string]Rule{
		"serverName":         yes(inDecide, ""),
		"serverVersion":      yes(inPin, "pinned; drift blocks the tool"),
		"toolName":           yes(inDecide, ""),
		"toolVersion":        yes(inPin, ""),
		"endpoint":           yes(inDecide, "Policy.approvedEndpoints; the circuit breaker key"),
		"protocolVersion":    yes(inDecide, "Policy.protocolVersions"),
		"inputSchemaDigest":  yes(inPin, "pinned; drift blocks the tool"),
		"outputSchemaDigest": yes(inPin, "pinned; drift blocks the tool"),
		"definitionDigest":   yes(inPin, "pinned; drift blocks the tool"),
	}), map[string]Rule{
		"argumentContract.requiredArguments":  yes(inDecide, "a call that lacks one (by exact name, at the top level of the arguments) is not routed to the entry: step 4, arguments_missing; a class falls back to a member whose contract the call meets"),
		"argumentContract.notes":              rec(""),
		"authority.scopes":                    yes(inDecide+", "+inAccess, "Policy.auth.permittedScopes; per call, a token granting scopes beyond scopes and permissionSet is PERMISSION_DRIFT (refused, reported)"),
		"authority.permissionSet":             yes(inDecide+", "+inAccess, "per call, with scopes: the token's scopes must be within them (permission_drift)"),
		"authority.credentialMode":            yes(inDecide, "Policy.auth.requiredSchemes"),
		"authority.tenantBoundary":            no(""),
		"authority.tenant":                    yes(inDecide+", "+inAccess, "per call, the token's tenant claim (oauth.tenantClaim) must equal it (tenant_mismatch)"),
		"sideEffect":                          yes(inDecide, "the provider side-effect class when the declaration has none"),
		"dataAccess":                          yes(inDecide, "Policy.residency.allowedDataClasses"),
		"networkScope":                        yes("agent/decide, agent/pin", "the endpoint's host must be in it, or the entry is ineligible for listing and calling alike (endpoint_out_of_scope, step 1); destinations the tool declares outside it are NETWORK_DRIFT"),
		"idempotency":                         yes(inDecide, "keyed or naturally idempotent tools may be retried"),
		"approvalRequired":                    yes(inDecide, "human approval before the call"),
		"rollbackSupported":                   yes(inDecide, "exempts the entry from approval rules with reversible: true; the approver is told whether the effect can be undone"),
		"dryRunSupported":                     yes("agent/pipeline", "the approval question says whether the tool offers a dry run"),
		"qualification.suite":                 rec(""),
		"qualification.evidenceRef":           yes(inLifecycle, "the evidence that keeps the entry QUALIFIED"),
		"qualification.qualifiedAt":           rec(""),
		"qualification.fixturesPassed":        rec(""),
		"qualification.fixturesTotal":         rec(""),
		"qualification.negativeFixturePassed": rec(""),
		"workflowAllowlist":                   yes(inDecide, "BLOCKED for other workflows"),
		"state":                               yes(inDecide, "only QUALIFIED is eligible"),
		"drift":                               rec("history; drift is detected, not read from here"),
		"supersedes":                          rec("history"),
		"discoverySource":                     rec(""),
		"region":                              yes(inDecide, "Policy.residency"),
		"tenantClasses":                       yes(inDecide, ""),
		"failureDomains":                      yes(inDecide+", "+inInvoke, "added to the Declaration's failure domains"),
	}),

	KindPolicy: merge(provenance(map[string]Rule{
		"version":   yes(inFreshness, "rollback protection, as for every kind; also recorded in every receipt as the policy version"),
		"expiresAt": yes(inFreshness, "an expired artifact is neither stored nor installed; when an installed one expires the agent stops using it (calls are refused no_policy; the agent log names the expiry), never another Policy"),
	}), map[string]Rule{
		"policyOwner":                                 rec(""),
		"inventory":                                   yes(inDecide, ""),
		"approvedOwners":                              yes(inDecide, ""),
		"approvedEndpoints":                           yes(inDecide, ""),
		"evidence.acceptedIssuers":                    yes(inDecide, ""),
		"evidence.requiredIndependence":               yes(inDecide, ""),
		"evidence.maxAge":                             yes(inDecide, ""),
		"evidence.minSampleSize":                      yes(inDecide, ""),
		"evidence.minConfidence":                      yes(inDecide, ""),
		"evidence.onUnknown":                          yes(inDecide, ""),
		"evidence.acceptedMethods":                    yes(inDecide, "evidence of another method (Evidence.method), or stating none, is not accepted"),
		"protocolVersions":                            yes(inDecide, ""),
		"auth.requiredSchemes":                        yes(inDecide, "against the entry's credential mode and the declared methods"),
		"auth.permittedIssuers":                       yes(inDecide+", "+inAccess, "against the declared authorisation servers and, per call, the issuer of the token presented"),
		"auth.permittedScopes":                        yes(inDecide+", "+inAccess, "against the entry's scopes and, per call, the token's"),
		"auth.requiredTenant":                         yes(inDecide+", "+inAccess, "per call, the token's tenant claim (oauth.tenantClaim) must equal it (tenant_mismatch)"),
		"sideEffects.match":                           yes(inDecide, ""),
		"sideEffects.assigned":                        yes(inDecide, ""),
		"sideEffects.assignmentEvidence":              rec(""),
		"approvals.match":                             yes(inDecide, ""),
		"approvals.required":                          yes(inDecide, ""),
		"approvals.reversible":                        yes(inDecide, "the rule exempts entries that declare rollbackSupported; the approver is told whether the effect can be undone"),
		"approvals.aboveValue":                        yes(inDecide, "with valuePath: approval only when the argument's number exceeds it (missing or non-numeric: approval); without valuePath every matching call, and the agent warns"),
		"approvals.valuePath":                         yes(inDecide, "dotted path into the call's arguments read for aboveValue"),
		"cost.maxCostPerCall":                         yes(inDecide, ""),
		"cost.currency":                               yes(inDecide, ""),
		"cost.maxQuotaUnits":                          yes(inQuota, "units (one per call) per principal and tool in each quotaWindow; spent: the route is dropped, none left: quota_exhausted at step 7"),
		"cost.quotaWindow":                            yes(inQuota, "zero: one minute"),
		"cost.maxCostPerWorkflow":                     yes(inQuota, "declared prices summed per workflow id and day; a call that would pass it: cost_ceiling at step 7; calls without a workflow id are not counted"),
		"cost.onUnknownPrice":                         yes(inDecide, "a tool without a usable declared price under maxCostPerCall: DENY (default) refuses it (cost_unknown), ALLOW admits it with cost \"unknown\" in receipts"),
		"deadline":                                    yes(inInvoke, ""),
		"residency.allowedRegions":                    yes(inDecide, ""),
		"residency.deniedRegions":                     yes(inDecide, ""),
		"residency.sameRegionOnly":                    yes(inDecide, ""),
		"residency.allowedDataClasses":                yes(inDecide, ""),
		"residency.maxRetention":                      yes(inDecide, "the Declaration's dataHandling.retention must be stated, readable and no longer (data_handling at step 3)"),
		"residency.deniedSubProcessors":               yes(inDecide, "a Declaration naming one in dataHandling.subProcessors is refused (data_handling at step 3)"),
		"retry.maxAttempts":                           yes(inInvoke, "per route, and for the whole call with one more attempt per fallback route (retries and hedges of all routes together)"),
		"retry.perAttemptTimeout":                     yes(inInvoke, ""),
		"retry.baseBackoff":                           yes(inInvoke, "full jitter: each wait is uniform in [0, the capped exponential backoff]; after a Retry-After, in [RA, 2 x RA]"),
		"retry.maxBackoff":                            yes(inInvoke, ""),
		"retry.budgetRatio":                           yes(inInvoke, "one agent-wide budget for retries and hedges on every route"),
		"retry.hedgeAfter":                            yes(inInvoke, "read-only calls only"),
		"retry.requireIdempotencyKeyForWrites":        yes(inDecide, ""),
		"retry.retryableConditions":                   yes(inDecide, ""),
		"equivalenceClasses.name":                     yes(inDecide, ""),
		"equivalenceClasses.description":              rec("shown to AI agents"),
		"equivalenceClasses.members":                  yes(inDecide, ""),
		"equivalenceClasses.fallbackAllowed":          yes(inInvoke, ""),
		"equivalenceClasses.fallbackRequiresApproval": yes(inInvoke, ""),
		"circuit.consecutiveFailures":                 yes(inCircuit, ""),
		"circuit.baseEjection":                        yes(inCircuit, ""),
		"circuit.maxEjection":                         yes(inCircuit, ""),
		"circuit.readmitRatio":                        yes(inCircuit, "the share while half-open, and where the slow-start ramp begins"),
		"circuit.slowStartWindow":                     yes(inCircuit, "the re-admitted route's share ramps linearly over the window; a failure during it re-ejects for longer"),
		"incidentOwners.match":                        yes(inDecide, "the first rule whose match covers \"<server>/<tool>\" names the route's incident owner"),
		"incidentOwners.owner":                        yes("agent/decide, agent/pipeline", "recorded in the receipt's selected.incidentOwner and named in a failed call's tool error (owner)"),
		"principals.principalClass":                   yes(inDecide, ""),
		"principals.allow":                            yes(inDecide, ""),
		"principals.deny":                             yes(inDecide, ""),
		"principals.tenantClasses":                    yes(inDecide, ""),
		"principals.methods.server":                   yes(inMethods, "glob over the transparent view's server name"),
		"principals.methods.allow":                    yes(inMethods, "the methods granted (resources/subscribe also grants unsubscribe); a principal class with no rule may use none: method_not_permitted"),
		"principals.methods.resources":                yes(inMethods, "resources/read and subscribe name a matching URI without . or .. segments (else resource_not_permitted); resources/list shows only matching resources, templates/list only templates every expansion of which matches"),
		"principals.methods.prompts":                  yes(inMethods, "prompts/get and a completion's ref/prompt name a matching prompt (else prompt_not_permitted); prompts/list shows only matching prompts"),
		"inputClasses.name":                           yes(inDecide, "the class a call is in: recorded in its receipt (inputClass), the key of passive evidence, matched to evidence's subject.inputClass; 1-63 of a-z 0-9 . _ - or refused at apply"),
		"inputClasses.tools":                          yes(inDecide, "glob over the route's \"<server>/<tool>\"; empty matches every tool"),
		"inputClasses.when":                           yes(inDecide, "CEL over args and tool, yielding bool (refused at apply otherwise); the first rule in list order whose tools match and whose expression yields true names the class; an evaluation error matches nothing"),
		"clientRequests.server":                       yes(inClientReq, "glob over server names; when clientRequests is set, an upstream's sampling, elicitation or roots request no rule grants is refused before the client sees it (client_request_not_permitted, or a JSON-RPC error to the upstream)"),
		"clientRequests.principalClasses":             yes(inClientReq, "globs over the caller's principal class (the session opener's for a dedicated session); empty covers every class"),
		"clientRequests.allow":                        yes(inClientReq, "sampling/createMessage, elicitation/create, roots/list or *; anything else is refused at apply"),
		"results.maxResultBytes":                      yes(inValidate, ""),
		"results.injectionTripwire":                   yes(inValidate, "gates the scan of results and non-tool method contents; tool definitions and upstream instructions are scanned at list time whatever it says"),
		"results.requireOutputSchema":                 yes(inValidate, ""),
		"results.onSemanticFailure":                   yes(inValidate, "withhold (semantic_invalid) or annotate (_meta mcpready.dev/semantic) a rejected result"),
		"semanticValidation":                          yes(inValidate, "CEL over args, result, now and tool, compiled once per policy (refused at apply if it does not compile), cost-bounded; a key applies by glob to the route's equivalence class, the call's input class (inputClasses) or \"<server>/<tool>\"; receipts record the verdict and validator version"),
	}),

	KindEvidence: merge(provenance(map[string]Rule{
		"issuer":    yes(inDecide, "Policy.evidence.acceptedIssuers; independence from the provider"),
		"expiresAt": yes(inLifecycle, "not stored or installed once expired (controlplane/writer, agent/subscribe); expired qualification evidence makes the entry STALE"),
	}), under("subject", map[string]Rule{
		"subjectId":             rec(""),
		"serverName":            yes(inDecide, "matched to the entry"),
		"registryRecordVersion": yes(inDecide, "when set, counts only for the entry whose provenance.version it names"),
		"endpoint":              yes(inDecide, "matched to the entry when set"),
		"serverVersion":         yes(inDecide, "matched to the entry"),
		"toolName":              yes(inDecide, "matched to the entry"),
		"inputSchemaDigest":     yes(inDecide, "matched to the entry"),
		"outputSchemaDigest":    yes(inDecide, "matched to the entry"),
		"protocolVersions":      yes(inDecide, "when set, counts only for an entry whose protocol version it lists"),
		"principalClass":        yes(inDecide, "matched to the request's principal class when set; evidence whose top-level principalClass differs counts for none"),
		"tenantClass":           yes(inDecide, "matched to the request's tenant class when set; evidence whose top-level tenantClass differs counts for none"),
		"region":                yes(inDecide, "matched to the host's region (the agent's region label) when set; evidence whose top-level region differs counts for none"),
		"inputClass":            yes(inDecide, "counts only for calls in that input class (Policy.inputClasses, for the route's tool), and evidence without one only for calls in none: once a policy divides a tool's inputs, evidence speaks only for the class it was observed in; a name Policy.inputClasses would refuse is refused at apply"),
		"assertedAt":            rec(""),
	}), map[string]Rule{
		"observer.id":             rec(""),
		"observer.software":       rec(""),
		"observer.independence":   yes(inDecide, "Policy.evidence.requiredIndependence"),
		"method":                  yes(inDecide, "Policy.evidence.acceptedMethods: evidence of another method, or stating none, is not accepted; an empty list accepts every method"),
		"authClass":               yes(inDecide, "counts only for routes the agent calls the same way (keyless, bearer-token, stdio, oauth:<grant>: the upstream's configuration); another value is refused at apply"),
		"tenantClass":             yes(inDecide, "matched to the request's tenant class when set"),
		"principalClass":          yes(inDecide, "matched to the request's principal class when set"),
		"region":                  yes(inDecide, "matched to the host's region (the agent's region label) when set"),
		"networkClass":            rec(""),
		"protocolVersion":         yes(inDecide, "matched to the entry's protocol version when set"),
		"path":                    rec(""),
		"windowStart":             rec(""),
		"windowEnd":               yes(inDecide, "age is counted from here when observedAt is unset"),
		"observedAt":              yes(inDecide, "age against Policy.evidence.maxAge"),
		"expiresAt":               yes(inDecide, "expired evidence is UNKNOWN"),
		"supersedes":              rec(""),
		"sample.attempted":        rec(""),
		"sample.eligible":         yes(inDecide, "Policy.evidence.minSampleSize"),
		"sample.excluded":         rec(""),
		"sample.exclusionReasons": rec(""),
		"rates.layer":             yes(inDecide, ""),
		"rates.successes":         yes(inDecide, "confidence (Wilson lower bound)"),
		"rates.denominator":       yes(inDecide, "confidence (Wilson lower bound)"),
		"rates.excluded":          rec(""),
		"rates.successDefinition": rec(""),
		"rates.rate":              rec("recomputed from successes and denominator"),
		"latency.p50Ms":           yes(inDecide, "latency ranking"),
		"latency.p90Ms":           rec(""),
		"latency.p95Ms":           rec(""),
		"latency.p99Ms":           yes(inDecide, "latency ranking"),
		"latency.count":           rec(""),
		"errors.layer":            rec(""),
		"errors.outcome":          rec(""),
		"errors.code":             rec(""),
		"errors.count":            rec(""),
		"ambiguousOutcomes":       rec(""),
		"quotaObservations":       rec(""),
		"driftObserved":           yes(inDecide, "evidence that observed drift in its window counts for no call (evidence_drift_observed; the probe reports what its later listings show changed); it does not change the entry's lifecycle state, which agents' drift reports do"),
		"coverage":                rec(""),
		"blindSpots":              rec(""),
		"confidenceMethod":        rec("confidence is always the Wilson lower bound"),
		"receiptsDigest":          rec(""),
		"receiptCount":            rec(""),
	}, under("workflow", workflowRateFields()), under("coldLatency", latencyRecord()), under("warmLatency", latencyRecord()),
		under("semanticValid", map[string]Rule{
			"layer": rec("always SEMANTIC"), "successes": rec("reported; routing confidence scores layers reachability to result validity only"),
			"denominator": rec("results that met at least one semantic validator"), "excluded": rec("results no validator applied to"),
			"successDefinition": rec(""), "rate": rec(""),
		}), under("accessRates", map[string]Rule{
			"denominator": rec("calls that reached the access layer"), "unauthorized": rec(""), "paymentRequired": rec(""),
			"forbidden": rec(""), "rateLimited": rec(""), "tokenFailures": rec(""),
		})),

	KindReceiptBatch: merge(map[string]Rule{
		"agentId":         yes(inChain, "one hash chain per agent"),
		"sequence":        yes(inChain, "no gap, replay or reordering"),
		"batchId":         rec(""),
		"prevBatchDigest": yes(inChain, "links the batch to the previous one"),
		"receiptDigests":  yes(inChain, "every receipt against its digest"),
		"createdAt":       rec(""),
	}, under("receipts", receiptFields())),

	KindDriftReport: merge(provenance(map[string]Rule{
		"version":  rec("reports are not stored; replay is bounded by issuedAt and entryDigest"),
		"issuedAt": yes(inLifecycle, "must lie within the control plane's report window (10 minutes by default), so an old report cannot be replayed"),
	}), map[string]Rule{
		"nodeId":      yes(inLifecycle, "must be the caller's node id (bound to its certificate) and prefix metadata.name, which the signing key's grant must cover"),
		"entryName":   yes(inLifecycle, "the entry suspended"),
		"entryDigest": yes(inLifecycle, "must be the digest of the entry's current bundle; a report about another revision changes nothing"),
		"labels":      yes(inLifecycle, "recorded as the suspension's drift labels"),
		"detail":      rec("recorded in the suspension event, at most 512 bytes"),
	}, under("observed", map[string]Rule{
		"serverName":         rec("becomes the CANDIDATE's identity; never routable until the organisation qualifies it"),
		"serverVersion":      rec("as serverName"),
		"toolName":           rec("as serverName"),
		"toolVersion":        rec("as serverName"),
		"endpoint":           rec("as serverName: the reporter's endpoint is never dialled from a CANDIDATE"),
		"definitionDigest":   rec("as serverName"),
		"inputSchemaDigest":  rec("as serverName"),
		"outputSchemaDigest": rec("as serverName"),
		"protocolVersion":    rec("as serverName"),
	})),

	KindTombstone: merge(provenance(map[string]Rule{
		"version":   no("a tombstone's own version is not compared; the target's highest version outlives the deletion, so a deleted version cannot be applied again"),
		"expiresAt": yes("controlplane/writer", "an expired tombstone deletes nothing"),
	}), map[string]Rule{
		"targetKind":    yes(inAdmin, "the key must be granted the target kind"),
		"targetName":    yes(inAdmin, "the key's scopes must cover the target name"),
		"reason":        rec("kept in history"),
		"targetVersion": yes(inFreshness, "must be the target's current signed version (artifact.CheckTombstone), so a tombstone deletes exactly one version and cannot be replayed; an agent removes a Policy only on such a tombstone"),
		"targetDigest":  yes(inFreshness, "must be the digest of the target's current bundle"),
	}),
}

// latencyRecord classifies a Latency block that routing does not read.
func latencyRecord() map[string]Rule {
	return map[string]Rule{"p50Ms": rec(""), "p90Ms": rec(""), "p95Ms": rec(""), "p99Ms": rec(""), "count": rec("")}
}

// receiptFields classifies a receipt: everything in it is what happened,
// recorded, signed and digested; nothing in it is a rule.
func receiptFields() map[string]Rule {
	out := map[string]Rule{}
	for _, p := range []string{
		"receiptId", "emitterId", "emitterVersion", "redactionPolicyVersion", "emittedAt", "requestId", "workflowId", "traceId",
		"requested", "principalClass", "tenantClass", "region", "argumentsDigest", "keptArguments",
		"candidates.entry", "candidates.serverName", "candidates.toolName", "candidates.endpoint", "candidates.selected",
		"candidates.rejectedAtStep", "candidates.rejectionCode", "candidates.rejectionReason", "evidenceIds", "policyVersion",
		"selected.entry", "selected.endpoint", "selected.serverName", "selected.serverVersion", "selected.toolName",
		"selected.inputSchemaDigest", "selected.outputSchemaDigest", "selected.protocolVersion", "selected.incidentOwner",
		"selected.access.issuer", "selected.access.audience", "selected.access.grantedScopes", "selected.access.lifetimeClass", "selected.access.grant", "selected.access.verification",
		"providerSideEffect", "consumerSideEffect", "approval", "deadline", "perAttemptTimeout", "attemptCount",
		"attempts.number", "attempts.entry", "attempts.startedAt", "attempts.latency", "attempts.outcome",
		"attempts.transportStatus", "attempts.jsonrpcCode", "attempts.isError", "attempts.hedged",
		"idempotencyKeyRef", "startedAt", "endedAt", "latency", "outcome", "failedLayer", "transportStatus", "jsonrpcCode",
		"isError", "schemaValidation", "semanticValidation", "semanticValidatorVersion", "actions.kind", "actions.entry", "actions.detail", "cost",
		"resultDigest", "errorMessage",
		"failureDomains", "quota", "idempotency.keyRef", "idempotency.scope", "idempotency.retention", "idempotency.allocated", "idempotency.repeat", "idempotency.carried",
		"warmth", "authClass", "inputClass",
	} {
		out[p] = rec("")
	}
	out["workflowOutcome"] = rec("set on workflow receipts (agent/workflow): the end state reported")
	out["workflowContribution"] = rec("never set on a request receipt: a call's contribution is known only when its workflow ends, in the workflow receipt's workflow.calls.contributed")
	for _, p := range []string{
		"endState", "expired", "callsDropped", "refusalCode", "openedAt",
		"calls.receiptId", "calls.requested", "calls.outcome", "calls.attempts", "calls.fallback", "calls.contributed",
		"calls.selected.entry", "calls.selected.endpoint", "calls.selected.serverName", "calls.selected.serverVersion", "calls.selected.toolName",
		"calls.selected.inputSchemaDigest", "calls.selected.outputSchemaDigest", "calls.selected.protocolVersion", "calls.selected.incidentOwner",
		"calls.selected.access.issuer", "calls.selected.access.audience", "calls.selected.access.grantedScopes", "calls.selected.access.lifetimeClass", "calls.selected.access.grant", "calls.selected.access.verification",
	} {
		out["workflow."+p] = rec("")
	}
	return out
}

// workflowRateFields classifies Evidence.workflow: workflow figures for
// reviewers (controlplane/aggregate), never routing inputs (workflow
// evidence names no server or tool subject, which the decision drops).
func workflowRateFields() map[string]Rule {
	out := map[string]Rule{}
	for _, p := range []string{
		"workflows", "completed", "completionRate", "attemptsInCompleted", "attemptsPerSuccess", "completedViaFallback", "fallbackDivergence",
		"tools.serverName", "tools.toolName", "tools.calls", "tools.contributing", "tools.contributionRate", "tools.succeededInUnsuccessful",
	} {
		out[p] = rec("workflow evidence is not a routing input")
	}
	return out
}
