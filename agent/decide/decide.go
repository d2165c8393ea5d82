// Package decide is the host agent's routing decision: given verified
// artifacts (Policy, RegistryEntries, Declarations, Evidence) and one tool
// call request, it resolves the requested capability to a consumer-approved
// equivalence class, runs every candidate through the hard filters in the
// order in docs/architecture.md, records the step and a stable code for every
// rejection, and ranks the admitted routes (latency last, with hysteresis).
//
// Files by concern: types.go (inputs and outputs), compile.go (policy and
// artifacts compiled into tables by NewSnapshot), filter.go (steps 1-7:
// admit, the one admission function of calls and of tools/list
// visibility), rank.go (step 8, hysteresis, Routes), intern.go (shared
// records and caches), methods.go (the one admission function of the
// non-tool methods of transparent views, from Policy.principals[].methods,
// for requests and listings alike), evidence.go, retry.go, glob.go.
//
// It must not do I/O: no networking, no signature checks (the caller
// verifies every artifact before building a Snapshot), no clocks (the
// request carries Now; a zero Now falls back to time.Now), no execution
// (package invoke runs a Decision).
// A Snapshot is immutable after NewSnapshot and safe for concurrent use; its
// only mutable state is atomics: the per-class preferred route (hysteresis),
// the previous result lists (shared by equal decisions) and a cache of
// breaker pointers. Decisions are read-only for the same reason.
//
// Safe defaults, by design: an empty Policy.inventory admits nothing; a
// principal class with no PrincipalRule (and no "*" rule) may call nothing,
// and one with no method rule may use no resource, prompt or completion;
// a tool with no Policy.side_effects rule is UNKNOWN, which is treated as
// state-changing (called, never retried, never hedged); evidence.on_unknown
// UNSPECIFIED behaves as ALLOW (admitted, ranked below fresh evidence), and
// DENY rejects; evidence below the required independence or minimum
// confidence does not count (it is treated as missing, and DENY rejects
// with the specific code); a server past its declared end of life is not
// eligible, and a deprecated one ranks below the others of its evidence
// and health tier; an exact "<server>/<tool>" request needs a rule that names
// the tool, a rule naming its class is not enough.
package decide

import (
	"fmt"
	"slices"
	"strings"
	"time"

	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/readiness"
)

// Decide runs req through the filters. It never blocks; it allocates only
// the returned Decision.
func (s *Snapshot) Decide(req Request, h Health) Decision {
	if req.Now.IsZero() {
		req.Now = time.Now()
	}
	d := Decision{Requested: req.Tool, PolicyVersion: s.policyVersion, Backoff: s.backoff, MaxAttempts: s.maxAttempts,
		QuotaLimit: s.quotaLimit, QuotaWindow: s.quotaWindow, WorkflowCostCeiling: s.wfCeiling,
		AllowUnknownPrice: s.policy.GetCost().GetOnUnknownPrice() == mcpreadyv1.UnknownEvidenceAction_UNKNOWN_EVIDENCE_ACTION_ALLOW}
	d.Deadline = s.deadline
	if req.Deadline > 0 && req.Deadline < d.Deadline {
		d.Deadline = req.Deadline
	}
	g := s.groups[req.Tool]
	if g == nil {
		d.Refusal = &RefusalError{Step: readiness.StepResolve, Code: readiness.CodeUnknownTool,
			Reason: fmt.Sprintf("%q is neither an approved capability nor an inventoried tool", req.Tool)}
		return d
	}
	if g.ambiguous {
		d.Refusal = &RefusalError{Step: readiness.StepResolve, Code: readiness.CodeAmbiguousTool,
			Reason: fmt.Sprintf("%q names more than one tool (%s); the policy's author must rename one", req.Tool, g.pairs())}
		return d
	}
	if g.class {
		d.Class = g.name
	}
	var rbuf [16]int
	x := call{req: &req, gr: s.grantFor(req.Principal, req.Tenant, rbuf[:]), now: req.Now.UnixNano(), deadline: d.Deadline}
	if src, ok := h.(BreakerSource); ok {
		x.brk = s.breakersFor(src)
	}

	n := len(g.cands)
	var shared []*mcpreadyv1.Candidate // the previous list, while it still matches
	if p := g.last.Load(); p != nil && len(*p) == n {
		shared = *p
	}
	var own []*mcpreadyv1.Candidate // allocated at the first difference
	var buf [64]admitted
	adm := buf[:0]
	var args classArgs // not in x: what escapes from it would take x's request along
	bestStep, bestIdx := readiness.Step(-1), 0
	var bestRej rejection
	for i := range g.cands {
		c := &g.cands[i]
		e := c.e
		a := admitted{ci: int32(i), input: s.inputClassOf(e, &args, req.Arguments)}
		step, rej := s.admit(c, &x, h, &a)
		pb := e.record(step, rej)
		switch {
		case own != nil:
			own[i] = pb
		case shared == nil || shared[i] != pb:
			own = make([]*mcpreadyv1.Candidate, n)
			copy(own, shared[:min(i, len(shared))])
			own[i] = pb
		}
		if step > 0 {
			if step > bestStep {
				bestStep, bestIdx, bestRej = step, i, rej
			}
			continue
		}
		adm = append(adm, a)
	}
	if own != nil {
		d.Candidates = own
		last := own
		g.last.Store(&last)
	} else {
		d.Candidates = shared
	}
	if len(adm) == 0 {
		if bestStep < 0 {
			d.Refusal = &RefusalError{Step: readiness.StepResolve, Code: readiness.CodeUnknownTool, Reason: fmt.Sprintf("%q has no candidates", req.Tool)}
		} else {
			d.Refusal = &RefusalError{Step: bestStep, Code: bestRej.code, Reason: g.cands[bestIdx].e.name + ": " + bestRej.reason}
		}
		return d
	}
	k := s.maxRoutes
	if !g.fallback || (g.fallbackApproval && !req.ApprovalAvailable) {
		k = 1
	}
	s.rank(g, adm, k)
	adm = adm[:min(k, len(adm))]
	// Build on the stack; share the previous decision's routes when equal.
	var rb [8]Route
	var eb [8]string
	routes, ev := rb[:0], eb[:0]
	for i := range adm {
		var r Route
		s.fill(&r, g, &adm[i])
		if i > 0 && g.fallbackApproval {
			r.ApprovalRequired = true
		}
		routes = append(routes, r)
		if r.EvidenceID != "" {
			ev = append(ev, r.EvidenceID)
		}
	}
	last := g.lastRoutes.Load()
	if last == nil || !slices.Equal(last.routes, routes) || !slices.Equal(last.evidence, ev) {
		last = &routeSet{routes: slices.Clone(routes)}
		if len(ev) > 0 {
			last.evidence = slices.Clone(ev)
		}
		g.lastRoutes.Store(last)
	}
	d.Routes, d.EvidenceIDs = last.routes, last.evidence
	return d
}

// Visible lists what the caller of req may see in tools/list: each
// equivalence class and each exact tool with at least one candidate that
// admit admits for req (req.Tool is ignored), so a client is never shown a
// tool it cannot call, or the reverse. Two facts belong to one call, not to
// the caller, and are taken at their most permissive: the idempotency key
// (a caller can supply one), the caller's own deadline (the policy
// deadline applies) and the arguments (approval by value does not apply). Sorted: classes, then tools.
func (s *Snapshot) Visible(req Request, h Health) []Visible {
	x := s.listing(&req)
	var out []Visible
	for _, list := range [][]string{s.classNames, s.exactNames} {
		for _, name := range list {
			if v, ok := s.visible(s.groups[name], &x, h); ok {
				out = append(out, v)
			}
		}
	}
	return out
}

// VisibleNamed is the Visible of the class or exact tool called name alone
// (false when it is not visible or does not exist).
func (s *Snapshot) VisibleNamed(req Request, h Health, name string) (Visible, bool) {
	g := s.groups[name]
	if g == nil {
		return Visible{}, false
	}
	x := s.listing(&req)
	return s.visible(g, &x, h)
}

// listing is the per-request context of a listing (see Visible).
func (s *Snapshot) listing(req *Request) call {
	if req.Now.IsZero() {
		req.Now = time.Now()
	}
	req.IdempotencyKey, req.Deadline = true, 0
	return call{req: req, gr: s.grantFor(req.Principal, req.Tenant, nil), now: req.Now.UnixNano(), deadline: s.deadline, listing: true}
}

// visible lists the candidates of g that admit admits for x.
func (s *Snapshot) visible(g *group, x *call, h Health) (Visible, bool) {
	if g.ambiguous {
		return Visible{}, false
	}
	var entries []string
	for i := range g.cands {
		var a admitted
		if len(g.cands[i].e.inputRules) > 0 {
			a.input = anyInputClass // a listing has no arguments: a call in any class may follow
		}
		if step, _ := s.admit(&g.cands[i], x, h, &a); step == readiness.StepNone {
			entries = append(entries, g.cands[i].e.name)
		}
	}
	if len(entries) == 0 {
		return Visible{}, false
	}
	v := Visible{Name: g.name, Class: g.class, Description: g.description, Entries: entries}
	if !g.class {
		e := g.cands[0].e
		v.Server, v.Tool = e.server, e.tool
	}
	return v, true
}

// Entry returns the verified RegistryEntry by name (nil if absent).
func (s *Snapshot) Entry(name string) *mcpreadyv1.RegistryEntry {
	if i := s.indexOf(name); int(i) < len(s.entries) && s.entries[i].name == name {
		return s.entries[i].spec
	}
	return nil
}

// PolicyVersion is the version of the policy the snapshot was built from.
func (s *Snapshot) PolicyVersion() string { return s.policyVersion }

func (s *Snapshot) indexOf(name string) int32 {
	i, _ := slices.BinarySearchFunc(s.entries, name, func(e *entry, n string) int { return strings.Compare(e.name, n) })
	return int32(i)
}
