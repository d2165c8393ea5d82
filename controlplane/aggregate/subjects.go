package aggregate

// Which receipts may become evidence: only those whose selected identity
// the registry holds (SubjectIndex), and from one agent only so many per
// window (Options.MaxSubjectsPerAgent, MaxReceiptsPerAgent), so that a
// compromised agent can neither mint Evidence for a subject it invents nor
// flood the evidence of real ones. Workflow receipts name no registry
// subject; their population is what the agent asserts, so one agent
// contributes to only so many populations and workflow receipts per
// window (MaxWorkflowKeysPerAgent, MaxWorkflowReceiptsPerAgent).

import (
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mcpready/mcpready/controlplane/lifecycle"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
)

// SubjectIndex says which subjects are in the registry.
type SubjectIndex interface {
	// Registered reports whether a registry entry has exactly sel's server
	// name and version, tool, endpoint and schema digests.
	Registered(sel *mcpreadyv1.Selection) bool
}

// SubjectFunc adapts a function to SubjectIndex.
type SubjectFunc func(sel *mcpreadyv1.Selection) bool

// Registered calls f.
func (f SubjectFunc) Registered(sel *mcpreadyv1.Selection) bool { return f(sel) }

// DriftIndex says which subjects drifted, and when.
type DriftIndex interface {
	// Drifted returns the drift labels (in enum order, each once) recorded
	// before t for the registry entries with exactly sel's server name
	// and version, tool, endpoint and schema digests; nil for none.
	Drifted(sel *mcpreadyv1.Selection, before time.Time) []mcpreadyv1.DriftLabel
}

// identityKey is the part of a tool identity a receipt's selection must
// match.
type identityKey struct {
	server, version, tool, endpoint, inSchema, outSchema string
}

// selectionKey is the identity a receipt's selection names.
func selectionKey(sel *mcpreadyv1.Selection) identityKey {
	return identityKey{sel.GetServerName(), sel.GetServerVersion(), sel.GetToolName(), sel.GetEndpoint(), sel.GetInputSchemaDigest(), sel.GetOutputSchemaDigest()}
}

// RegistrySubjects is a SubjectIndex kept from registry entries by name:
// the control plane sets each stored entry and removes deleted ones. Safe
// for concurrent use; the zero value is not usable (NewRegistrySubjects).
type RegistrySubjects struct {
	mu      sync.RWMutex
	byEntry map[string]identityKey
	count   map[identityKey]int  // entries holding each identity
	drift   map[string]driftMark // entries with drift labels, by name
}

// driftMark is an entry's recorded drift: each label, and when the first
// revision of the entry's current run of revisions carrying it was issued
// (zero when it names no time: every window counts as after it).
type driftMark struct {
	key   identityKey
	since map[mcpreadyv1.DriftLabel]time.Time
}

// NewRegistrySubjects returns an empty index.
func NewRegistrySubjects() *RegistrySubjects {
	return &RegistrySubjects{byEntry: map[string]identityKey{}, count: map[identityKey]int{}, drift: map[string]driftMark{}}
}

// Set records the identity of registry entry name (replacing what it
// had). A CANDIDATE created from a drift report is left out: its identity
// is whatever the reporting agent said it observed, and no honest receipt
// names it (it is never routable). An entry's drift labels are kept as of
// the issue time of the revision that first carried them: the lifecycle
// issues the revision that suspends a drifted entry when the drift is
// reported, and a later revision that keeps a label (the organisation
// re-signing the entry, say) keeps that label's time (Drifted).
func (s *RegistrySubjects) Set(name string, e *mcpreadyv1.RegistryEntry) {
	id := e.GetIdentity()
	k := identityKey{id.GetServerName(), id.GetServerVersion(), id.GetToolName(), id.GetEndpoint(), id.GetInputSchemaDigest(), id.GetOutputSchemaDigest()}
	s.mu.Lock()
	defer s.mu.Unlock()
	prev, had := s.drift[name]
	s.remove(name)
	if e.GetState() == mcpreadyv1.LifecycleState_LIFECYCLE_STATE_CANDIDATE && strings.HasPrefix(e.GetDiscoverySource(), lifecycle.DriftReportSource) {
		return
	}
	s.byEntry[name] = k
	s.count[k]++
	if len(e.GetDrift()) > 0 {
		var at time.Time
		if ts := e.GetProvenance().GetIssuedAt(); ts != nil {
			at = ts.AsTime()
		}
		m := driftMark{key: k, since: map[mcpreadyv1.DriftLabel]time.Time{}}
		for _, l := range e.GetDrift() {
			if first, ok := prev.since[l]; had && prev.key == k && ok {
				m.since[l] = first
			} else if _, seen := m.since[l]; !seen {
				m.since[l] = at
			}
		}
		s.drift[name] = m
	}
}

// Remove forgets registry entry name.
func (s *RegistrySubjects) Remove(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.remove(name)
}

func (s *RegistrySubjects) remove(name string) {
	k, ok := s.byEntry[name]
	if !ok {
		return
	}
	delete(s.byEntry, name)
	delete(s.drift, name)
	if s.count[k]--; s.count[k] <= 0 {
		delete(s.count, k)
	}
}

// Registered implements SubjectIndex.
func (s *RegistrySubjects) Registered(sel *mcpreadyv1.Selection) bool {
	k := selectionKey(sel)
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.count[k] > 0
}

// Drifted implements DriftIndex.
func (s *RegistrySubjects) Drifted(sel *mcpreadyv1.Selection, before time.Time) []mcpreadyv1.DriftLabel {
	k := selectionKey(sel)
	var out []mcpreadyv1.DriftLabel
	s.mu.RLock()
	for _, m := range s.drift {
		if m.key != k {
			continue
		}
		for l, at := range m.since {
			if at.Before(before) {
				out = append(out, l)
			}
		}
	}
	s.mu.RUnlock()
	slices.Sort(out)
	out = slices.Compact(out)
	out = slices.DeleteFunc(out, func(l mcpreadyv1.DriftLabel) bool { return l == mcpreadyv1.DriftLabel_DRIFT_LABEL_UNSPECIFIED })
	if len(out) == 0 {
		return nil
	}
	return out
}

// Reasons a receipt is not folded (label of refused_receipts_total).
const (
	reasonUnregistered = "unregistered-subject"
	reasonAgentBound   = "agent-bound"
	// reasonAuthClass: the receipt names an auth class outside the
	// vocabulary (an older agent's): evidence labelled with it would
	// count for no call, and without it for every auth class.
	reasonAuthClass = "unknown-auth-class"
	// reasonInputClass: the receipt names an input class no Policy could
	// define (artifact.ValidInputClass).
	reasonInputClass = "invalid-input-class"
	// reasonFuture: the receipt is stamped more than Options.MaxClockSkew
	// after the aggregator's clock.
	reasonFuture = "future"
	// reasonWorkflowAgentBound: a workflow receipt past its agent's
	// workflow bound (workflow.go).
	reasonWorkflowAgentBound = "workflow-agent-bound"
)

// agentWindow is one agent's contribution to one window.
type agentWindow struct {
	agent string
	start int64
}

type contribution struct {
	subjects map[subject]struct{}
	receipts int
	// workflows and workflowReceipts: the same for workflow receipts,
	// whose population (principal, tenant, region) the agent asserts.
	workflows        map[workflowKey]struct{}
	workflowReceipts int
}

// contribution returns agent's contribution to the window starting at
// start; a.mu is held.
func (a *Aggregator) contribution(agent string, start int64) *contribution {
	k := agentWindow{agent, start}
	c := a.contrib[k]
	if c == nil {
		c = &contribution{subjects: map[subject]struct{}{}, workflows: map[workflowKey]struct{}{}}
		a.contrib[k] = c
	}
	return c
}

// admit says whether agent may contribute one more receipt about sub to
// the window starting at start, and counts it; a.mu is held.
func (a *Aggregator) admit(agent string, sub subject, start int64) bool {
	c := a.contribution(agent, start)
	return admitOne(c.subjects, &c.receipts, sub, a.opts.MaxReceiptsPerAgent, a.opts.MaxSubjectsPerAgent)
}

// admitWorkflow says whether agent may contribute one more workflow
// receipt to population k (whose start is the window), and counts it;
// a.mu is held.
func (a *Aggregator) admitWorkflow(agent string, k workflowKey) bool {
	c := a.contribution(agent, k.start)
	return admitOne(c.workflows, &c.workflowReceipts, k, a.opts.MaxWorkflowReceiptsPerAgent, a.opts.MaxWorkflowKeysPerAgent)
}

// admitOne counts one more receipt about key against an agent's bounds in
// a window: at most maxReceipts receipts (*n) about at most maxKeys keys.
func admitOne[K comparable](keys map[K]struct{}, n *int, key K, maxReceipts, maxKeys int) bool {
	if *n >= maxReceipts {
		return false
	}
	if _, ok := keys[key]; !ok {
		if len(keys) >= maxKeys {
			return false
		}
		keys[key] = struct{}{}
	}
	*n++
	return true
}

// forgetContributions drops the contributions to windows starting before
// until (emitted); a.mu is held.
func (a *Aggregator) forgetContributions(until int64) {
	for k := range a.contrib {
		if k.start < until {
			delete(a.contrib, k)
		}
	}
}
