package aggregate

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/protobuf/types/known/timestamppb"

	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/readiness"
	"github.com/mcpready/mcpready/sign"
)

// identity is the registered identity rc's receipts name.
func identity() *mcpreadyv1.ToolIdentity {
	return &mcpreadyv1.ToolIdentity{ServerName: "com.example/docs-a", ServerVersion: "1.4.2", ToolName: "lookup", Endpoint: "https://a/mcp"}
}

// newAgg is an aggregator over a registry holding ids (identity() when
// none are given), its sink, and a settable clock.
func newAgg(t *testing.T, mod func(*Options), ids ...*mcpreadyv1.ToolIdentity) (*Aggregator, *sink, *time.Time) {
	t.Helper()
	key, _ := sign.GenerateKey(sign.AlgorithmEd25519)
	reg := NewRegistrySubjects()
	if len(ids) == 0 {
		ids = append(ids, identity())
	}
	for i, id := range ids {
		reg.Set(fmt.Sprintf("entry-%d", i), &mcpreadyv1.RegistryEntry{Identity: id})
	}
	sk := &sink{}
	now := t0.Add(2 * time.Minute)
	o := Options{Signer: key, Sink: SinkFunc(sk.ApplyEvidence), Subjects: reg, Now: func() time.Time { return now }}
	if mod != nil {
		mod(&o)
	}
	a, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return a, sk, &now
}

// flushAll emits every window and returns the evidence.
func flushAll(t *testing.T, a *Aggregator, sk *sink) []*mcpreadyv1.Evidence {
	t.Helper()
	if _, err := a.Flush(context.Background(), true); err != nil {
		t.Fatal(err)
	}
	var out []*mcpreadyv1.Evidence
	for _, b := range sk.bundles {
		obj, err := sign.Peek(b)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, obj.Spec.(*mcpreadyv1.Evidence))
	}
	return out
}

func digestsFor(rs []*mcpreadyv1.Receipt) []string {
	d := make([]string, len(rs))
	for i := range rs {
		d[i] = fmt.Sprintf("sha256:%064d", i)
	}
	return d
}

// Attack: an agent names a server, a version, a tool or an endpoint the
// registry does not hold, in as many receipts as it likes; no Evidence is
// minted for it (only the registered subject gets some), and the refusals
// are counted. Before, every subject named in a receipt got Evidence.
func TestUnregisteredSubjectsMintNoEvidence(t *testing.T) {
	reg := prometheus.NewRegistry()
	a, sk, _ := newAgg(t, func(o *Options) { o.Registry = reg })
	O := mcpreadyv1.OutcomeClass_OUTCOME_CLASS_SUCCESS
	var rs []*mcpreadyv1.Receipt
	for i := range 1000 {
		rs = append(rs,
			rc(O, 1, 10, func(r *mcpreadyv1.Receipt) { r.Selected.ServerName = fmt.Sprintf("evil/%d", i) }),
			rc(O, 1, 10, func(r *mcpreadyv1.Receipt) { r.Selected.ServerVersion = "9.9.9" }),
			rc(O, 1, 10, func(r *mcpreadyv1.Receipt) { r.Selected.ToolName = "transfer" }),
			rc(O, 1, 10, func(r *mcpreadyv1.Receipt) { r.Selected.Endpoint = "https://evil/mcp" }))
	}
	rs = append(rs, rc(O, 1, 10))
	a.Observe("agent-1", rs, digestsFor(rs))
	evs := flushAll(t, a, sk)
	if len(evs) != 1 || evs[0].GetSubject().GetServerVersion() != "1.4.2" || evs[0].GetSubject().GetEndpoint() != "https://a/mcp" || evs[0].GetSample().GetAttempted() != 1 {
		t.Fatalf("%d evidence, want the registered subject's only: %v", len(evs), evs)
	}
	if n := testutil.ToFloat64(a.refused.WithLabelValues(reasonUnregistered)); n != 4000 {
		t.Fatalf("refused unregistered %v, want 4000", n)
	}
	// An entry removed from the registry gets no more evidence.
	a.opts.Subjects.(*RegistrySubjects).Remove("entry-0")
	sk.bundles = nil
	a.Observe("agent-1", rs[len(rs)-1:], []string{"sha256:1"})
	if evs := flushAll(t, a, sk); len(evs) != 0 {
		t.Fatalf("evidence for a removed entry: %v", evs)
	}
}

// Attack: one agent key floods a window with receipts over many
// registered subjects; it contributes to at most MaxSubjectsPerAgent
// subjects and MaxReceiptsPerAgent receipts per window, while another
// agent is unaffected. Before, one agent could contribute without bound.
func TestAgentContributionBounded(t *testing.T) {
	var ids []*mcpreadyv1.ToolIdentity
	for i := range 20 {
		id := identity()
		id.ToolName = fmt.Sprintf("tool-%d", i)
		ids = append(ids, id)
	}
	a, sk, now := newAgg(t, func(o *Options) { o.MaxSubjectsPerAgent, o.MaxReceiptsPerAgent = 5, 50 }, ids...)
	O := mcpreadyv1.OutcomeClass_OUTCOME_CLASS_SUCCESS
	var flood []*mcpreadyv1.Receipt
	for i := range 1000 {
		flood = append(flood, rc(O, 1, 10, func(r *mcpreadyv1.Receipt) { r.Selected.ToolName = fmt.Sprintf("tool-%d", i%20) }))
	}
	a.Observe("agent-evil", flood, digestsFor(flood))
	honest := []*mcpreadyv1.Receipt{rc(O, 1, 10, func(r *mcpreadyv1.Receipt) { r.Selected.ToolName = "tool-19" })}
	a.Observe("agent-honest", honest, digestsFor(honest))
	evs := flushAll(t, a, sk)
	var total int64
	tools := map[string]int64{}
	for _, ev := range evs {
		total += ev.GetSample().GetAttempted()
		tools[ev.GetSubject().GetToolName()] += ev.GetSample().GetAttempted()
	}
	if total != 51 || len(tools) != 6 || tools["tool-19"] != 1 {
		t.Fatalf("folded %d receipts over %v; want 50 from the flooding agent over 5 subjects and the honest one's", total, tools)
	}
	if n := testutil.ToFloat64(a.refused.WithLabelValues(reasonAgentBound)); n != 950 {
		t.Fatalf("refused over the agent bound %v, want 950", n)
	}
	// The next window starts a fresh budget.
	later := rc(O, 1, 10, func(r *mcpreadyv1.Receipt) { r.Selected.ToolName, r.EndedAt.Seconds = "tool-0", r.EndedAt.Seconds+600 })
	sk.bundles = nil
	*now = now.Add(10 * time.Minute) // the next window has begun
	a.Observe("agent-evil", []*mcpreadyv1.Receipt{later}, []string{"sha256:2"})
	if evs := flushAll(t, a, sk); len(evs) != 1 {
		t.Fatalf("next window: %d evidence", len(evs))
	}
}

// New refuses an aggregator without a registry view: without one it could
// only mint evidence for whatever receipts name.
func TestSubjectsRequired(t *testing.T) {
	key, _ := sign.GenerateKey(sign.AlgorithmEd25519)
	if _, err := New(Options{Signer: key, Sink: SinkFunc((&sink{}).ApplyEvidence)}); !errors.Is(err, ErrOptions) {
		t.Fatalf("New without Subjects: %v", err)
	}
}

// Attack: an agent reports drift with an identity of its choosing, which
// the control plane records as a CANDIDATE, then ships receipts naming
// that identity; no Evidence is minted for it. Once the organisation
// qualifies an entry with that identity, it is a subject like any other.
func TestDriftCandidateMintsNoEvidence(t *testing.T) {
	a, sk, now := newAgg(t, nil)
	forged := identity()
	forged.ServerVersion = "6.6.6"
	cand := &mcpreadyv1.RegistryEntry{Identity: forged, State: mcpreadyv1.LifecycleState_LIFECYCLE_STATE_CANDIDATE, DiscoverySource: "drift-report:host-evil"}
	reg := a.opts.Subjects.(*RegistrySubjects)
	reg.Set("docs+forged", cand)
	rs := []*mcpreadyv1.Receipt{rc(success, 1, 5, func(r *mcpreadyv1.Receipt) { r.Selected.ServerVersion = "6.6.6" })}
	a.Observe("host-evil", rs, digestsFor(rs))
	if evs := flushAll(t, a, sk); len(evs) != 0 {
		t.Fatalf("evidence minted for a drift-report candidate: %v", evs)
	}
	qualified := &mcpreadyv1.RegistryEntry{Identity: forged, State: mcpreadyv1.LifecycleState_LIFECYCLE_STATE_QUALIFIED, DiscoverySource: "drift-report:host-evil"}
	reg.Set("docs+forged", qualified)
	later := []*mcpreadyv1.Receipt{rc(success, 1, 5, func(r *mcpreadyv1.Receipt) {
		r.Selected.ServerVersion, r.EndedAt.Seconds = "6.6.6", r.EndedAt.Seconds+600
	})}
	*now = now.Add(10 * time.Minute) // the next window has begun
	a.Observe("host-1", later, digestsFor(later))
	if evs := flushAll(t, a, sk); len(evs) != 1 {
		t.Fatalf("%d evidence for the qualified entry, want 1", len(evs))
	}
}

// Receipts of requests that are not tool calls (a resource or prompt
// request, a request an upstream sent towards a client) name a server but
// no tool: they are no subject's evidence, and are not counted as
// unregistered subjects or late receipts, which those metrics are for.
// Failed before: each was counted as an unregistered subject.
func TestNonToolReceiptsNotCounted(t *testing.T) {
	reg := prometheus.NewRegistry()
	a, sk, _ := newAgg(t, func(o *Options) { o.Registry = reg })
	O := mcpreadyv1.OutcomeClass_OUTCOME_CLASS_SUCCESS
	rs := []*mcpreadyv1.Receipt{
		rc(O, 1, 10, func(r *mcpreadyv1.Receipt) {
			r.Requested, r.Selected = "sampling/createMessage", &mcpreadyv1.Selection{ServerName: "com.example/docs-a"}
		}),
		rc(O, 1, 10, func(r *mcpreadyv1.Receipt) {
			r.Requested, r.Selected = "resources/read", &mcpreadyv1.Selection{ServerName: "com.example/docs-a"}
		}),
		rc(O, 1, 10),
	}
	a.Observe("agent-1", rs, digestsFor(rs))
	evs := flushAll(t, a, sk)
	if len(evs) != 1 || evs[0].GetSubject().GetToolName() != "lookup" || evs[0].GetSample().GetAttempted() != 1 {
		t.Fatalf("want the tool call's evidence alone: %v", evs)
	}
	if n := testutil.ToFloat64(a.refused.WithLabelValues(reasonUnregistered)); n != 0 {
		t.Fatalf("non-tool receipts counted as unregistered subjects: %v", n)
	}
}

// A receipt whose auth class is outside the vocabulary (an older agent
// recorded an entry's credential mode, or "unclassified") is not folded:
// evidence labelled with it would be refused at apply and count for no
// call, and evidence without it would count for every auth class.
func TestUnknownAuthClassNotFolded(t *testing.T) {
	reg := prometheus.NewRegistry()
	a, sk, _ := newAgg(t, func(o *Options) { o.Registry = reg })
	O := mcpreadyv1.OutcomeClass_OUTCOME_CLASS_SUCCESS
	auth := func(c string) func(*mcpreadyv1.Receipt) { return func(r *mcpreadyv1.Receipt) { r.AuthClass = c } }
	rs := []*mcpreadyv1.Receipt{
		rc(O, 1, 10, auth("unclassified")),
		rc(O, 1, 10, auth("none")),
		rc(O, 1, 10, auth(readiness.AuthKeyless)),
	}
	a.Observe("agent-1", rs, digestsFor(rs))
	evs := flushAll(t, a, sk)
	if len(evs) != 1 || evs[0].GetAuthClass() != readiness.AuthKeyless || evs[0].GetSample().GetAttempted() != 1 {
		t.Fatalf("want the keyless receipt's evidence alone: %v", evs)
	}
	if n := testutil.ToFloat64(a.refused.WithLabelValues(reasonAuthClass)); n != 2 {
		t.Fatalf("refused for their auth class: %v, want 2", n)
	}
}

// Passive evidence of a window that ended after its subject's drift was
// recorded in the registry lists that drift in driftObserved (and so
// counts for no call); a window that ended before it does not, nor does
// another subject's, nor a registry the aggregator was not given as its
// Drift.
func TestPassiveEvidenceRecordsDrift(t *testing.T) {
	var reg *RegistrySubjects
	other := identity()
	other.ToolName = "other"
	a, sk, now := newAgg(t, func(o *Options) { reg = o.Subjects.(*RegistrySubjects); o.Drift = reg }, identity(), other)
	*now = t0.Add(12 * time.Minute) // after every receipt below
	O := mcpreadyv1.OutcomeClass_OUTCOME_CLASS_SUCCESS
	at := func(d time.Duration) func(*mcpreadyv1.Receipt) {
		return func(r *mcpreadyv1.Receipt) { r.EndedAt = timestamppb.New(t0.Add(d)) }
	}
	a.Observe("agent-1", []*mcpreadyv1.Receipt{
		rc(O, 1, 10, at(time.Minute)),   // window [0, 5m): before the drift
		rc(O, 1, 10, at(6*time.Minute)), // window [5m, 10m): the drift at 7m falls in it
		rc(mcpreadyv1.OutcomeClass_OUTCOME_CLASS_DRIFT_BLOCKED, 0, 0, at(11*time.Minute)), // after it
		rc(O, 1, 10, at(6*time.Minute), func(r *mcpreadyv1.Receipt) { r.Selected.ToolName = "other" }),
	}, nil)
	// The lifecycle publishes the drifted entry suspended, with its labels,
	// issued when the drift was reported.
	reg.Set("entry-0", &mcpreadyv1.RegistryEntry{Identity: identity(), State: mcpreadyv1.LifecycleState_LIFECYCLE_STATE_SUSPENDED,
		Drift:      []mcpreadyv1.DriftLabel{mcpreadyv1.DriftLabel_DRIFT_LABEL_SIDE_EFFECT_DRIFT, mcpreadyv1.DriftLabel_DRIFT_LABEL_DEFINITION_DRIFT},
		Provenance: &mcpreadyv1.Provenance{IssuedAt: timestamppb.New(t0.Add(7 * time.Minute))}})
	got := map[string]string{}
	for _, ev := range flushAll(t, a, sk) {
		got[fmt.Sprintf("%s@%s", ev.Subject.ToolName, ev.WindowStart.AsTime().Sub(t0))] = fmt.Sprint(ev.DriftObserved)
	}
	want := map[string]string{
		"lookup@0s":    "[]",
		"lookup@5m0s":  "[DRIFT_LABEL_SIDE_EFFECT_DRIFT DRIFT_LABEL_DEFINITION_DRIFT]",
		"lookup@10m0s": "[DRIFT_LABEL_SIDE_EFFECT_DRIFT DRIFT_LABEL_DEFINITION_DRIFT]",
		"other@5m0s":   "[]",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("driftObserved by window:\n got %v\nwant %v", got, want)
	}
	// A revision without drift labels, or the entry's removal, forgets it.
	sel := &mcpreadyv1.Selection{ServerName: identity().ServerName, ServerVersion: identity().ServerVersion, ToolName: "lookup", Endpoint: identity().Endpoint}
	reg.Set("entry-0", &mcpreadyv1.RegistryEntry{Identity: identity()})
	if d := reg.Drifted(sel, t0.Add(time.Hour)); d != nil {
		t.Fatalf("drift %v after a revision without labels", d)
	}
	reg.Set("entry-0", &mcpreadyv1.RegistryEntry{Identity: identity(), Drift: []mcpreadyv1.DriftLabel{mcpreadyv1.DriftLabel_DRIFT_LABEL_NETWORK_DRIFT}})
	if d := reg.Drifted(sel, t0); fmt.Sprint(d) != "[DRIFT_LABEL_NETWORK_DRIFT]" {
		t.Fatalf("drift with no issue time: %v, want it before every window's end", d)
	}
	reg.Remove("entry-0")
	if d := reg.Drifted(sel, t0.Add(time.Hour)); d != nil {
		t.Fatalf("drift %v after the entry's removal", d)
	}
}

// A drifted entry republished with its drift labels (the organisation
// re-signs it, say) keeps each label's first time: windows that ended
// after the drift still count it, and a label the new revision adds counts
// from that revision's time only. Before, the republished revision's
// issue time replaced the drift time, and windows between the two lost
// the drift.
func TestDriftTimeKeptAcrossRevisions(t *testing.T) {
	reg := NewRegistrySubjects()
	sel := &mcpreadyv1.Selection{ServerName: identity().ServerName, ServerVersion: identity().ServerVersion, ToolName: "lookup", Endpoint: identity().Endpoint}
	se, nw := mcpreadyv1.DriftLabel_DRIFT_LABEL_SIDE_EFFECT_DRIFT, mcpreadyv1.DriftLabel_DRIFT_LABEL_NETWORK_DRIFT
	issued := func(d time.Duration, labels ...mcpreadyv1.DriftLabel) *mcpreadyv1.RegistryEntry {
		return &mcpreadyv1.RegistryEntry{Identity: identity(), State: mcpreadyv1.LifecycleState_LIFECYCLE_STATE_SUSPENDED, Drift: labels,
			Provenance: &mcpreadyv1.Provenance{IssuedAt: timestamppb.New(t0.Add(d))}}
	}
	reg.Set("entry-0", issued(7*time.Minute, se))
	reg.Set("entry-0", issued(30*time.Minute, se, nw))
	for before, want := range map[time.Duration]string{
		5 * time.Minute:  "[]",
		10 * time.Minute: "[DRIFT_LABEL_SIDE_EFFECT_DRIFT]",
		31 * time.Minute: "[DRIFT_LABEL_SIDE_EFFECT_DRIFT DRIFT_LABEL_NETWORK_DRIFT]",
	} {
		if got := fmt.Sprint(reg.Drifted(sel, t0.Add(before))); got != want {
			t.Errorf("drift before %v: %s, want %s", before, got, want)
		}
	}
	// A label dropped and later reported again counts from its new time.
	reg.Set("entry-0", issued(40*time.Minute, nw))
	reg.Set("entry-0", issued(50*time.Minute, se, nw))
	if got := fmt.Sprint(reg.Drifted(sel, t0.Add(45*time.Minute))); got != "[DRIFT_LABEL_NETWORK_DRIFT]" {
		t.Errorf("after the side-effect label came back: %s before 45m, want network drift only", got)
	}
}

// Passive evidence is kept per input class: receipts of two classes and
// of none make three subjects, each evidence naming its class (so that
// agents count it only for calls in that class); a receipt whose input
// class no Policy could define is not folded.
func TestPassiveEvidencePerInputClass(t *testing.T) {
	reg := prometheus.NewRegistry()
	a, sk, _ := newAgg(t, func(o *Options) { o.Registry = reg })
	O := mcpreadyv1.OutcomeClass_OUTCOME_CLASS_SUCCESS
	class := func(c string) func(*mcpreadyv1.Receipt) { return func(r *mcpreadyv1.Receipt) { r.InputClass = c } }
	rs := []*mcpreadyv1.Receipt{
		rc(O, 1, 10, class("bulk")), rc(O, 1, 10, class("bulk")),
		rc(O, 1, 10, class("single")),
		rc(O, 1, 10),
		rc(O, 1, 10, class("Not A Class")),
	}
	a.Observe("agent-1", rs, digestsFor(rs))
	got := map[string]int64{}
	names := map[string]bool{}
	for _, ev := range flushAll(t, a, sk) {
		got[ev.GetSubject().GetInputClass()] += ev.GetSample().GetAttempted()
		names[ev.GetSubject().GetSubjectId()] = true
	}
	if fmt.Sprint(got) != "map[:1 bulk:2 single:1]" || len(names) != 3 {
		t.Fatalf("attempts by input class %v over %d subjects, want map[:1 bulk:2 single:1] over 3", got, len(names))
	}
	if n := testutil.ToFloat64(a.refused.WithLabelValues(reasonInputClass)); n != 1 {
		t.Fatalf("refused for their input class: %v, want 1", n)
	}
}

// Attack: an agent stamps receipts far in the future. Before, each opened
// a window of its own (memory without bound, one window per receipt), and
// a flush of every window (at shutdown) signed Evidence observed in the
// future, fresh long after, whose version, above every honest window's,
// made the write path refuse the subject's later evidence as a rollback.
// Now a receipt more than MaxClockSkew ahead of the aggregator's clock is
// not folded (counted as refused); one within it is.
func TestFutureReceiptsNotFolded(t *testing.T) {
	reg := prometheus.NewRegistry()
	a, sk, now := newAgg(t, func(o *Options) { o.Registry = reg })
	O := mcpreadyv1.OutcomeClass_OUTCOME_CLASS_SUCCESS
	at := func(d time.Duration) func(*mcpreadyv1.Receipt) {
		return func(r *mcpreadyv1.Receipt) { r.EndedAt = timestamppb.New(now.Add(d)) }
	}
	var rs []*mcpreadyv1.Receipt
	for i := range 100 {
		rs = append(rs, rc(O, 1, 10, at(time.Duration(i+1)*24*time.Hour)))
	}
	wf := rc(O, 1, 10, at(48*time.Hour), func(r *mcpreadyv1.Receipt) {
		r.Workflow = &mcpreadyv1.WorkflowRecord{EndState: mcpreadyv1.WorkflowEndState_WORKFLOW_END_STATE_COMPLETED}
	})
	rs = append(rs, wf, rc(O, 1, 10, at(30*time.Second)))
	a.Observe("agent-1", rs, digestsFor(rs))
	a.mu.Lock()
	windows, workflows := len(a.windows), len(a.workflows)
	a.mu.Unlock()
	if windows != 1 || workflows != 0 {
		t.Fatalf("%d windows and %d workflow populations held, want the one window of the receipt within the skew", windows, workflows)
	}
	evs := flushAll(t, a, sk)
	if len(evs) != 1 || evs[0].GetObservedAt().AsTime().After(now.Add(time.Minute)) {
		t.Fatalf("evidence %v, want one, observed within the skew", evs)
	}
	if n := testutil.ToFloat64(a.refused.WithLabelValues(reasonFuture)); n != 101 {
		t.Fatalf("refused as future: %v, want 101", n)
	}
}
