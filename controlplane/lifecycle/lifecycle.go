// Package lifecycle keeps the registry lifecycle of exact tool identities:
// CANDIDATE → QUALIFIED → STALE | SUSPENDED | REVOKED (BLOCKED is decided
// per request by agents and never stored here).
//
// Design. Registry entries are signed by the organisation, and the control
// plane cannot re-sign them with the organisation's key. So the effective
// state of an entry is control-plane state: an append-only log of
// LifecycleEvents in etcd (reason, drift labels, related entry, reporter).
// An entry's state is the last event's "to", else the state in its signed
// spec (CANDIDATE when unset). Whenever the control plane itself changes
// the state, it also distributes the change as a signed resource: it signs,
// with its own observer key (which the TrustPolicy must grant the
// RegistryEntry kind), a copy of the entry carrying the new state and drift
// labels, and writes it through the same verified write path as every
// other artifact (a *writer.Writer). Agents verify that copy like anything
// else, see SUSPENDED or STALE, and stop routing. History is never
// rewritten: the organisation's revision stays in the store beneath the
// copy. The copy's signed provenance.version is the next one above the
// highest stored for that name, so the write path accepts it and the
// organisation's earlier bundles, replayed, cannot reverse it; to
// re-qualify, the organisation applies a revision above the copy's.
//
// Rules:
//   - An organisation revision of an entry records an event to the state in
//     its spec (this is how an entry is (re)qualified, e.g. after STALE or
//     SUSPENDED once the qualification slice has been rerun). The Manager
//     learns of revisions from the store watch (Watch, run by Run), whoever
//     wrote them, and handles each organisation revision once: the last
//     revision handled per entry is kept in etcd, so a replica taking over
//     continues where the previous one stopped, and replicas handling the
//     same revision at once record it once. A drift report or a sweep first
//     handles the revision it is about to act on.
//   - A drift report suspends that exact identity fleet-wide and creates a
//     fresh CANDIDATE named "<old>+<12 hex of the observed identity's
//     digest>" with supersedes set to the old entry; the candidate never
//     inherits qualification. Repeated reports are idempotent. Only callers
//     holding the agent role may report drift, for their own node id
//     (controlplane/authz), and only in a DriftReport signed by a key the
//     TrustPolicy grants for that node (report.go), rate-limited, with a
//     bound on the candidates per entry. A refused report is logged and
//     counted by reason (mcpready_controlplane_drift_reports_refused_total).
//   - Sweep marks QUALIFIED entries STALE (drift EVIDENCE_STALE) when their
//     qualification evidence (the Evidence their qualification's
//     evidence_ref names) has expired. Other evidence about the same
//     subject, passive traffic evidence included, never keeps a
//     qualification fresh. An entry whose evidence_ref names no stored
//     evidence is left alone: missing evidence is for agents' policy to
//     treat as UNKNOWN.
//
// The package must not decide trust or write to the store directly: bundles
// it reads were verified on write, and bundles it writes go through the
// Writer. It must not be told of writes by other packages; it watches.
package lifecycle

import (
	"context"
	"crypto"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/mcpready/mcpready/artifact"
	"github.com/mcpready/mcpready/controlplane/store"
	"github.com/mcpready/mcpready/controlplane/writer"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/sign"
)

// eventStream is the store event stream of registry lifecycle events;
// handledStream records, per entry, the organisation revisions handled.
const (
	eventStream   = "registry"
	handledStream = "registry-handled"
)

// ErrConfig: New was given incomplete Options or an unusable key.
var ErrConfig = errors.New("invalid lifecycle options")

// Options configures a Manager.
type Options struct {
	// Writer is the verified write path; required. The Manager reads and
	// watches its Store.
	Writer *writer.Writer
	// Signer is the control plane's observer key. Nil means state changes
	// are recorded as events but not distributed to agents.
	Signer crypto.Signer
	// Now; nil means time.Now.
	Now func() time.Time
	// Logger; nil discards.
	Logger *slog.Logger
	// ReportWindow bounds how far a drift report's signed issuedAt may
	// lie from now; zero means DefaultReportWindow.
	ReportWindow time.Duration
	// ReportsPerMinute is each node's drift report rate (bursts of a
	// third of it); zero means DefaultReportsPerMinute.
	ReportsPerMinute int
	// MaxCandidatesPerEntry bounds the candidates drift reports create
	// for one entry; zero means DefaultMaxCandidatesPerEntry.
	MaxCandidatesPerEntry int
	// Registerer receives mcpready_controlplane_drift_reports_refused_total;
	// nil records nothing.
	Registerer prometheus.Registerer
}

// Manager records and serves the registry lifecycle. It is safe for
// concurrent use.
type Manager struct {
	o        Options
	st       *store.Store
	signerID string
	mu       sync.Mutex // serialises handling of organisation revisions
	reports  limiters
	refused  *prometheus.CounterVec // drift reports refused, by reason
}

// New returns a Manager, or an error wrapping ErrConfig.
func New(o Options) (*Manager, error) {
	if o.Writer == nil {
		return nil, fmt.Errorf("%w: Writer is required", ErrConfig)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	m := &Manager{o: o, st: o.Writer.Store(), reports: limiters{perMin: o.ReportsPerMinute},
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "mcpready_controlplane_drift_reports_refused_total",
			Help: "Drift reports refused, by reason (unsigned, signer, stale, revision, rate, candidates)."}, []string{"reason"})}
	if m.reports.perMin <= 0 {
		m.reports.perMin = DefaultReportsPerMinute
	}
	if o.Registerer != nil {
		if err := o.Registerer.Register(m.refused); err != nil {
			return nil, fmt.Errorf("%w: metrics: %w", ErrConfig, err)
		}
	}
	if o.Signer != nil {
		id, err := sign.KeyID(o.Signer.Public())
		if err != nil {
			return nil, fmt.Errorf("%w: observer key: %w", ErrConfig, err)
		}
		m.signerID = id
	}
	return m, nil
}

// entry is one stored registry entry with its effective state.
type entry struct {
	rec    store.Record
	obj    *artifact.Object
	spec   *mcpreadyv1.RegistryEntry
	events []*mcpreadyv1.LifecycleEvent
	state  mcpreadyv1.LifecycleState
}

// DriftReportSource prefixes the discovery_source (and issuer) of a
// CANDIDATE created from a drift report, followed by the reporter: its
// identity is what the reporter says it observed.
const DriftReportSource = "drift-report:"

func (m *Manager) load(ctx context.Context, rec store.Record) (*entry, error) {
	obj, err := sign.Peek(rec.Bundle)
	if err != nil {
		return nil, err
	}
	spec, ok := obj.Spec.(*mcpreadyv1.RegistryEntry)
	if !ok {
		return nil, fmt.Errorf("%w: %s %q is not a RegistryEntry", sign.ErrPeek, rec.Kind, rec.Name)
	}
	e := &entry{rec: rec, obj: obj, spec: spec, state: spec.GetState()}
	raw, err := m.st.Events(ctx, eventStream, rec.Name)
	if err != nil {
		return nil, err
	}
	for _, b := range raw {
		ev := &mcpreadyv1.LifecycleEvent{}
		if err := protojson.Unmarshal(b, ev); err != nil {
			return nil, fmt.Errorf("lifecycle event of %q: %w", rec.Name, err)
		}
		e.events = append(e.events, ev)
	}
	if n := len(e.events); n > 0 {
		e.state = e.events[n-1].GetTo()
	}
	if e.state == mcpreadyv1.LifecycleState_LIFECYCLE_STATE_UNSPECIFIED {
		e.state = mcpreadyv1.LifecycleState_LIFECYCLE_STATE_CANDIDATE
	}
	return e, nil
}

func (m *Manager) record(ctx context.Context, ev *mcpreadyv1.LifecycleEvent) error {
	ev.At = timestamppb.New(m.o.Now())
	b, err := protojson.Marshal(ev)
	if err != nil {
		return err
	}
	m.o.Logger.Info("registry lifecycle", "entry", ev.GetEntryName(), "from", ev.GetFrom(), "to", ev.GetTo(), "reason", ev.GetReason(), "drift", ev.GetDrift())
	return m.st.AppendEvent(ctx, eventStream, ev.GetEntryName(), b)
}

// Status returns the status of one entry, or of every entry when name is "".
func (m *Manager) Status(ctx context.Context, name string) ([]*mcpreadyv1.RegistryStatus, error) {
	var recs []store.Record
	if name != "" {
		r, err := m.st.Get(ctx, artifact.KindRegistryEntry, name)
		if err != nil {
			return nil, err
		}
		recs = []store.Record{r}
	} else {
		var err error
		if recs, _, err = m.st.List(ctx, artifact.KindRegistryEntry); err != nil {
			return nil, err
		}
	}
	evidence, err := m.evidence(ctx)
	if err != nil {
		return nil, err
	}
	var out []*mcpreadyv1.RegistryStatus
	for _, r := range recs {
		if r.Deleted {
			continue
		}
		e, err := m.load(ctx, r)
		if err != nil {
			return nil, err
		}
		st := &mcpreadyv1.RegistryStatus{Name: r.Name, Identity: e.spec.GetIdentity(), State: e.state, Events: e.events}
		if last, _, _ := matchEvidence(e, evidence, m.o.Now(), false); !last.IsZero() {
			st.LastEvidenceAt = timestamppb.New(last)
		}
		for _, ev := range e.events {
			if ev.GetTo() == mcpreadyv1.LifecycleState_LIFECYCLE_STATE_SUSPENDED && ev.GetRelatedEntry() != "" {
				st.SupersededBy = ev.GetRelatedEntry()
			}
		}
		out = append(out, st)
	}
	return out, nil
}

type evidenceItem struct {
	name string
	spec *mcpreadyv1.Evidence
}

func (m *Manager) evidence(ctx context.Context) ([]evidenceItem, error) {
	recs, _, err := m.st.List(ctx, artifact.KindEvidence)
	if err != nil {
		return nil, err
	}
	var out []evidenceItem
	for _, r := range recs {
		if r.Deleted {
			continue
		}
		obj, err := sign.Peek(r.Bundle)
		if err != nil {
			continue
		}
		if ev, ok := obj.Spec.(*mcpreadyv1.Evidence); ok {
			out = append(out, evidenceItem{name: r.Name, spec: ev})
		}
	}
	return out, nil
}

// matchEvidence reports whether any evidence is about e (named by its
// qualification's evidence_ref, or, unless qualificationOnly, whose subject
// names its server, tool and version), the latest observation time among
// it, and whether any of it is unexpired. Freshness of a qualification is
// decided with qualificationOnly: passive traffic evidence informs health
// ranking and never renews a qualification.
func matchEvidence(e *entry, evidence []evidenceItem, now time.Time, qualificationOnly bool) (last time.Time, matched, fresh bool) {
	id := e.spec.GetIdentity()
	for _, ev := range evidence {
		sub := ev.spec.GetSubject()
		byRef := ev.name == e.spec.GetQualification().GetEvidenceRef() && ev.name != ""
		bySubject := sub.GetServerName() == id.GetServerName() && sub.GetToolName() == id.GetToolName() && sub.GetServerName() != "" &&
			sub.GetServerVersion() == id.GetServerVersion() // an empty version is unknown, never "any"

		if !byRef && (qualificationOnly || !bySubject) {
			continue
		}
		matched = true
		at := ev.spec.GetObservedAt().AsTime()
		if ev.spec.GetObservedAt() == nil {
			at = ev.spec.GetWindowEnd().AsTime()
		}
		if at.After(last) {
			last = at
		}
		exp := ev.spec.GetExpiresAt()
		if exp == nil {
			exp = ev.spec.GetProvenance().GetExpiresAt()
		}
		if exp == nil || now.Before(exp.AsTime()) {
			fresh = true
		}
	}
	return last, matched, fresh
}

// Sweep marks QUALIFIED entries whose matching evidence has all expired
// STALE. It returns the names it changed.
func (m *Manager) Sweep(ctx context.Context) ([]string, error) {
	recs, _, err := m.st.List(ctx, artifact.KindRegistryEntry)
	if err != nil {
		return nil, err
	}
	evidence, err := m.evidence(ctx)
	if err != nil {
		return nil, err
	}
	var changed []string
	var errs []error
	for _, r := range recs {
		if r.Deleted {
			continue
		}
		if err := m.handle(ctx, r); err != nil {
			errs = append(errs, err)
			continue
		}
		e, err := m.load(ctx, r)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if e.state != mcpreadyv1.LifecycleState_LIFECYCLE_STATE_QUALIFIED {
			continue
		}
		last, matched, fresh := matchEvidence(e, evidence, m.o.Now(), true)
		if !matched || fresh {
			continue // no evidence at all (agents' policy decides), or some still fresh
		}
		drift := []mcpreadyv1.DriftLabel{mcpreadyv1.DriftLabel_DRIFT_LABEL_EVIDENCE_STALE}
		if err := m.publish(ctx, e, e.rec.Name, mcpreadyv1.LifecycleState_LIFECYCLE_STATE_STALE, drift); err != nil {
			errs = append(errs, err)
			continue
		}
		err = m.record(ctx, &mcpreadyv1.LifecycleEvent{EntryName: r.Name, From: e.state, To: mcpreadyv1.LifecycleState_LIFECYCLE_STATE_STALE,
			Reason: "qualification evidence expired (last observed " + last.UTC().Format(time.RFC3339) + ")", Drift: drift, Reporter: "control-plane"})
		if err != nil {
			errs = append(errs, err)
			continue
		}
		changed = append(changed, r.Name)
	}
	return changed, errors.Join(errs...)
}

// Run watches the store (see Watch) and sweeps every interval until ctx
// ends. Run it on one replica at a time.
func (m *Manager) Run(ctx context.Context, interval time.Duration) {
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { m.Watch(ctx) })
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if _, err := m.Sweep(ctx); err != nil && ctx.Err() == nil {
			m.o.Logger.Warn("lifecycle sweep", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// publish signs a copy of e's spec named name with state and drift (and,
// for a new candidate, the given identity changes already applied to
// spec) with the observer key and writes it through Apply.
func (m *Manager) publish(ctx context.Context, e *entry, name string, state mcpreadyv1.LifecycleState, drift []mcpreadyv1.DriftLabel) error {
	return m.publishSpec(ctx, e, name, cloneWithState(e.spec, state, drift))
}

func cloneWithState(spec *mcpreadyv1.RegistryEntry, state mcpreadyv1.LifecycleState, drift []mcpreadyv1.DriftLabel) *mcpreadyv1.RegistryEntry {
	c := proto.Clone(spec).(*mcpreadyv1.RegistryEntry)
	c.State, c.Drift = state, drift
	return c
}

func (m *Manager) publishSpec(ctx context.Context, e *entry, name string, spec *mcpreadyv1.RegistryEntry) error {
	if m.o.Signer == nil {
		m.o.Logger.Warn("lifecycle: no observer key; state change recorded but not distributed", "entry", name, "state", spec.GetState())
		return nil
	}
	// The observer's copy takes the next version above anything stored
	// under name, so the write path's rollback check accepts it and the
	// organisation's earlier bundles cannot reverse it.
	held := spec.GetProvenance().GetVersion()
	if r, err := m.st.Get(ctx, artifact.KindRegistryEntry, name); err == nil {
		held = artifact.MaxVersion(held, r.HighWater)
	} else if !errors.Is(err, store.ErrNotFound) {
		return err
	}
	if spec.Provenance == nil {
		spec.Provenance = &mcpreadyv1.Provenance{}
	}
	spec.Provenance.Version = artifact.NextVersion(held)
	spec.Provenance.IssuedAt = timestamppb.New(m.o.Now())
	obj := artifact.New(artifact.KindRegistryEntry, name, spec)
	obj.Metadata.Labels = e.obj.Metadata.Labels
	b, _, err := sign.Sign(obj, m.o.Signer)
	if err != nil {
		return err
	}
	_, _, err = m.o.Writer.Apply(ctx, b)
	return err
}

// CandidateName is the name of the fresh candidate created when an entry
// named old drifts to observed.
func CandidateName(old string, observed *mcpreadyv1.ToolIdentity) string {
	b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(observed)
	sum := sha256.Sum256(b)
	return old + "+" + hex.EncodeToString(sum[:6])
}

// ReportDrift suspends the reported entry and creates a fresh candidate for
// the observed identity, from a signed report only (see report.go).
// Reporting the same drift again changes nothing.
// A refused report is logged ("drift report refused": node, reason,
// error) and counted by reason.
func (m *Manager) ReportDrift(ctx context.Context, sreq *mcpreadyv1.ReportDriftRequest) (*mcpreadyv1.ReportDriftResponse, error) {
	resp, err := m.reportDrift(ctx, sreq)
	if reason := refusalReason(err); reason != "" {
		m.refused.WithLabelValues(reason).Inc()
		m.o.Logger.Warn("drift report refused", "node", sreq.GetNode().GetId(), "reason", reason, "err", err)
	}
	return resp, err
}

func (m *Manager) reportDrift(ctx context.Context, sreq *mcpreadyv1.ReportDriftRequest) (*mcpreadyv1.ReportDriftResponse, error) {
	req, err := m.verifyReport(ctx, sreq)
	if err != nil {
		return nil, err
	}
	labels := slices.DeleteFunc(slices.Clone(req.GetLabels()), func(l mcpreadyv1.DriftLabel) bool { return l == mcpreadyv1.DriftLabel_DRIFT_LABEL_UNSPECIFIED })
	switch {
	case req.GetEntryName() == "":
		return nil, status.Error(codes.InvalidArgument, "entry_name is required")
	case len(labels) == 0:
		return nil, status.Error(codes.InvalidArgument, "at least one drift label is required")
	case req.GetObserved() == nil:
		return nil, status.Error(codes.InvalidArgument, "the observed identity is required")
	}
	rec, err := m.st.Get(ctx, artifact.KindRegistryEntry, req.GetEntryName())
	if err != nil {
		return nil, err
	}
	if rec.Deleted {
		return nil, status.Errorf(codes.NotFound, "registry entry %q is deleted", req.GetEntryName())
	}
	if err := m.handle(ctx, rec); err != nil {
		return nil, err
	}
	e, err := m.load(ctx, rec)
	if err != nil {
		return nil, err
	}
	candName := CandidateName(rec.Name, req.GetObserved())
	if err := artifact.ValidateName(candName); err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "candidate name: %v", err)
	}
	reporter := req.GetNodeId()
	detail := strings.TrimSpace(req.GetDetail())
	if len(detail) > 512 {
		detail = detail[:512]
	}
	suspended := mcpreadyv1.LifecycleState_LIFECYCLE_STATE_SUSPENDED
	if e.state == suspended || e.state == mcpreadyv1.LifecycleState_LIFECYCLE_STATE_REVOKED {
		if _, err := m.st.Get(ctx, artifact.KindRegistryEntry, candName); err == nil {
			return &mcpreadyv1.ReportDriftResponse{NewState: e.state, CandidateName: candName}, nil
		}
	}
	if req.GetEntryDigest() != rec.Digest {
		return nil, refuse(codes.FailedPrecondition, ErrReportRevision, "the report names %s of %q, the current revision is %s", req.GetEntryDigest(), rec.Name, rec.Digest)
	}
	if err := m.checkCandidateBound(ctx, rec.Name, candName); err != nil {
		return nil, err
	}
	if e.state != suspended && e.state != mcpreadyv1.LifecycleState_LIFECYCLE_STATE_REVOKED {
		// Suspend first: stopping eligibility matters more than the candidate.
		if err := m.publish(ctx, e, rec.Name, suspended, labels); err != nil {
			return nil, err
		}
		err = m.record(ctx, &mcpreadyv1.LifecycleEvent{EntryName: rec.Name, From: e.state, To: suspended, Drift: labels, RelatedEntry: candName, Reporter: reporter,
			Reason: "drift reported by " + reporter + ": " + detail})
		if err != nil {
			return nil, err
		}
	}
	cand := cloneWithState(e.spec, mcpreadyv1.LifecycleState_LIFECYCLE_STATE_CANDIDATE, labels)
	cand.Identity = proto.Clone(req.GetObserved()).(*mcpreadyv1.ToolIdentity)
	cand.Supersedes = rec.Name
	cand.Qualification = nil // never inherited
	cand.DiscoverySource = DriftReportSource + reporter
	if cand.Provenance != nil { // the observer signs it, but qualified nothing
		cand.Provenance.Issuer, cand.Provenance.ApprovalRef = DriftReportSource+reporter, ""
	}
	if err := m.publishSpec(ctx, e, candName, cand); err != nil {
		return nil, err
	}
	// The candidate's events start here: mark it so that the organisation's
	// first revision of it is handled (see handle).
	if _, err := m.markHandled(ctx, candName, 0); err != nil {
		return nil, err
	}
	err = m.record(ctx, &mcpreadyv1.LifecycleEvent{EntryName: candName, To: mcpreadyv1.LifecycleState_LIFECYCLE_STATE_CANDIDATE, Drift: labels, RelatedEntry: rec.Name, Reporter: reporter,
		Reason: "created after drift of " + rec.Name})
	if err != nil {
		return nil, err
	}
	state := suspended
	if e.state == mcpreadyv1.LifecycleState_LIFECYCLE_STATE_REVOKED {
		state = e.state
	}
	return &mcpreadyv1.ReportDriftResponse{NewState: state, CandidateName: candName}, nil
}
