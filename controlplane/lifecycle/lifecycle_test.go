package lifecycle_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/mcpready/mcpready/artifact"
	"github.com/mcpready/mcpready/controlplane/lifecycle"
	"github.com/mcpready/mcpready/controlplane/store"
	"github.com/mcpready/mcpready/controlplane/writer"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/internal/etcdtest"
	"github.com/mcpready/mcpready/internal/testpki"
	"github.com/mcpready/mcpready/sign"
)

const (
	qualified = mcpreadyv1.LifecycleState_LIFECYCLE_STATE_QUALIFIED
	candidate = mcpreadyv1.LifecycleState_LIFECYCLE_STATE_CANDIDATE
	stale     = mcpreadyv1.LifecycleState_LIFECYCLE_STATE_STALE
	suspended = mcpreadyv1.LifecycleState_LIFECYCLE_STATE_SUSPENDED
)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

type env struct {
	w   *writer.Writer
	lc  *lifecycle.Manager
	st  *store.Store
	p   *testpki.PKI
	clk *clock
}

func setup(t *testing.T) *env { return setupWith(t, nil) }

// setupWith is setup with edit applied to the Manager's options.
func setupWith(t *testing.T, edit func(*lifecycle.Options)) *env {
	cli, _ := etcdtest.Etcd(t)
	st := store.New(cli, store.Options{})
	p := testpki.New(t)
	w, err := writer.New(writer.Options{Store: st, Root: p.Root.Public()})
	if err != nil {
		t.Fatal(err)
	}
	clk := &clock{t: time.Now()}
	lo := lifecycle.Options{Writer: w, Signer: p.Observer, Now: clk.now}
	if edit != nil {
		edit(&lo)
	}
	lc, err := lifecycle.New(lo)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { lc.Watch(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	if _, _, err := w.Apply(context.Background(), p.TrustPolicy); err != nil {
		t.Fatal(err)
	}
	return &env{w, lc, st, p, clk}
}

func entry(version, evidenceRef string) *mcpreadyv1.RegistryEntry {
	return &mcpreadyv1.RegistryEntry{
		Identity:      &mcpreadyv1.ToolIdentity{ServerName: "com.example/docs", ServerVersion: version, ToolName: "docs.lookup", InputSchemaDigest: "sha256:in17", OutputSchemaDigest: "sha256:out9"},
		SideEffect:    mcpreadyv1.SideEffectClass_SIDE_EFFECT_CLASS_READ_ONLY,
		NetworkScope:  []string{"docs.example"},
		State:         qualified,
		Qualification: &mcpreadyv1.Qualification{Suite: "docs-lab", EvidenceRef: evidenceRef, FixturesPassed: 5, FixturesTotal: 5, NegativeFixturePassed: true},
	}
}

// versioned sets spec's signed provenance version.
func versioned(spec *mcpreadyv1.RegistryEntry, v string) *mcpreadyv1.RegistryEntry {
	spec.Provenance = &mcpreadyv1.Provenance{Issuer: "test", Version: v}
	return spec
}

// applyEntry applies an organisation-signed entry that changes its state
// and waits until the lifecycle, watching the store, recorded the change.
func (e *env) applyEntry(t *testing.T, name string, spec *mcpreadyv1.RegistryEntry) []byte {
	t.Helper()
	before := 0
	if s, err := e.lc.Status(context.Background(), name); err == nil && len(s) == 1 {
		before = len(s[0].Events)
	}
	b := testpki.Sign(t, artifact.New(artifact.KindRegistryEntry, name, spec), e.p.Org)
	if _, _, err := e.w.Apply(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	waitEvents(t, e, name, before+1)
	return b
}

func (e *env) status(t *testing.T, name string) *mcpreadyv1.RegistryStatus {
	t.Helper()
	s, err := e.lc.Status(context.Background(), name)
	if err != nil || len(s) != 1 {
		t.Fatalf("status %s: %v %v", name, s, err)
	}
	return s[0]
}

// latestSpec verifies the latest stored bundle of name against the active
// trust policy, as an agent would, and returns its spec and signer.
func (e *env) latestSpec(t *testing.T, name string) (*mcpreadyv1.RegistryEntry, string) {
	t.Helper()
	r, err := e.st.Get(context.Background(), artifact.KindRegistryEntry, name)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := sign.NewTrust(e.p.TrustPolicy, e.p.Root.Public(), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	v, err := tr.Verify(r.Bundle, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return v.Object.Spec.(*mcpreadyv1.RegistryEntry), v.KeyID
}

func TestEvidenceExpiryMakesStale(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	e.applyEntry(t, "docs.lookup@2.4.1", entry("2.4.1", "lab/docs.lookup/1"))
	e.applyEntry(t, "no-evidence@1", entry("1", "lab/none"))
	if s := e.status(t, "docs.lookup@2.4.1"); s.State != qualified || len(s.Events) != 1 {
		t.Fatalf("after apply: %v", s)
	}
	ev := &mcpreadyv1.Evidence{Subject: &mcpreadyv1.Subject{ServerName: "com.example/docs", ToolName: "docs.lookup"},
		ObservedAt: timestamppb.New(e.clk.now()), ExpiresAt: timestamppb.New(e.clk.now().Add(time.Hour))}
	if _, _, err := e.w.Apply(ctx, testpki.Sign(t, artifact.New(artifact.KindEvidence, "lab/docs.lookup/1", testpki.ObserverEvidence.Claim(ev)), e.p.Observer)); err != nil {
		t.Fatal(err)
	}
	if ch, err := e.lc.Sweep(ctx); err != nil || len(ch) != 0 {
		t.Fatalf("fresh sweep: %v %v", ch, err)
	}
	e.clk.add(2 * time.Hour)
	ch, err := e.lc.Sweep(ctx)
	if err != nil || len(ch) != 1 || ch[0] != "docs.lookup@2.4.1" {
		t.Fatalf("expired sweep: %v %v", ch, err)
	}
	s := e.status(t, "docs.lookup@2.4.1")
	if s.State != stale || s.LastEvidenceAt == nil || s.Events[len(s.Events)-1].Drift[0] != mcpreadyv1.DriftLabel_DRIFT_LABEL_EVIDENCE_STALE {
		t.Fatalf("stale status: %v", s)
	}
	spec, signer := e.latestSpec(t, "docs.lookup@2.4.1")
	obsID, _ := sign.KeyID(e.p.Observer.Public())
	if spec.State != stale || signer != obsID {
		t.Fatalf("distributed copy: state %v signer %s", spec.State, signer)
	}
	// without any evidence the entry is left alone
	if s := e.status(t, "no-evidence@1"); s.State != qualified {
		t.Fatalf("no-evidence entry: %v", s.State)
	}
	// sweeping again changes nothing
	if ch, _ := e.lc.Sweep(ctx); len(ch) != 0 {
		t.Fatalf("second sweep: %v", ch)
	}
}

// TestPassiveEvidenceNeverRenewsQualification: fresh passive evidence about
// the same server, tool and version does not keep an entry QUALIFIED once
// its qualification evidence has expired (before, any matching evidence
// did).
func TestPassiveEvidenceNeverRenewsQualification(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	e.applyEntry(t, "docs.lookup@2.4.1", entry("2.4.1", "lab/docs.lookup/1"))
	qual := &mcpreadyv1.Evidence{Subject: &mcpreadyv1.Subject{ServerName: "com.example/docs", ToolName: "docs.lookup", ServerVersion: "2.4.1"},
		Method: mcpreadyv1.EvidenceMethod_EVIDENCE_METHOD_SYNTHETIC, ObservedAt: timestamppb.New(e.clk.now()), ExpiresAt: timestamppb.New(e.clk.now().Add(time.Hour))}
	if _, _, err := e.w.Apply(ctx, testpki.Sign(t, artifact.New(artifact.KindEvidence, "lab/docs.lookup/1", testpki.ObserverEvidence.Claim(qual)), e.p.Observer)); err != nil {
		t.Fatal(err)
	}
	e.clk.add(2 * time.Hour)
	passive := &mcpreadyv1.Evidence{Subject: &mcpreadyv1.Subject{ServerName: "com.example/docs", ToolName: "docs.lookup", ServerVersion: "2.4.1"},
		Method: mcpreadyv1.EvidenceMethod_EVIDENCE_METHOD_PASSIVE, ObservedAt: timestamppb.New(e.clk.now()), ExpiresAt: timestamppb.New(e.clk.now().Add(time.Hour))}
	if _, _, err := e.w.Apply(ctx, testpki.Sign(t, artifact.New(artifact.KindEvidence, "passive/docs.lookup", testpki.ObserverEvidence.Claim(passive)), e.p.Observer)); err != nil {
		t.Fatal(err)
	}
	ch, err := e.lc.Sweep(ctx)
	if err != nil || len(ch) != 1 || ch[0] != "docs.lookup@2.4.1" {
		t.Fatalf("sweep with fresh passive evidence only: %v %v", ch, err)
	}
	if s := e.status(t, "docs.lookup@2.4.1"); s.State != stale || !s.LastEvidenceAt.AsTime().Equal(e.clk.now()) {
		t.Fatalf("status %v (the passive observation still shows as the last evidence)", s)
	}
}

func TestDriftSuspendsAndCreatesCandidate(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	orig := e.applyEntry(t, "docs.lookup@2.4.1", entry("2.4.1", "lab/1"))
	observed := entry("2.5.0", "").Identity
	observed.OutputSchemaDigest = "sha256:out10"
	req := &mcpreadyv1.ReportDriftRequest{Node: &mcpreadyv1.Node{Id: "host-1"}, EntryName: "docs.lookup@2.4.1", Observed: observed,
		Labels: []mcpreadyv1.DriftLabel{mcpreadyv1.DriftLabel_DRIFT_LABEL_VERSION_DRIFT, mcpreadyv1.DriftLabel_DRIFT_LABEL_OUTPUT_SCHEMA_DRIFT}, Detail: "tools/list changed"}
	req = e.signed(t, req)
	resp, err := e.lc.ReportDrift(ctx, req)
	want := lifecycle.CandidateName("docs.lookup@2.4.1", observed)
	if err != nil || resp.NewState != suspended || resp.CandidateName != want {
		t.Fatalf("report: %v %v", resp, err)
	}
	old := e.status(t, "docs.lookup@2.4.1")
	if old.State != suspended || old.SupersededBy != want {
		t.Fatalf("old status: %v", old)
	}
	last := old.Events[len(old.Events)-1]
	if last.From != qualified || last.Reporter != "host-1" || len(last.Drift) != 2 {
		t.Fatalf("suspension event: %v", last)
	}
	if spec, _ := e.latestSpec(t, "docs.lookup@2.4.1"); spec.State != suspended || len(spec.Drift) != 2 {
		t.Fatalf("distributed suspension: %v", spec)
	}
	cand := e.status(t, want)
	if cand.State != candidate || cand.Identity.ServerVersion != "2.5.0" {
		t.Fatalf("candidate status: %v", cand)
	}
	cspec, _ := e.latestSpec(t, want)
	if cspec.Supersedes != "docs.lookup@2.4.1" || cspec.Qualification != nil || cspec.State != candidate {
		t.Fatalf("candidate inherits: %v", cspec)
	}
	// history keeps the organisation's revision
	h, _ := e.st.History(ctx, artifact.KindRegistryEntry, "docs.lookup@2.4.1")
	if len(h) != 2 || string(h[0].Bundle) != string(orig) {
		t.Fatalf("history: %d", len(h))
	}
	// a second agent reporting the same drift changes nothing
	resp2, err := e.lc.ReportDrift(ctx, req)
	if err != nil || resp2.CandidateName != want {
		t.Fatalf("repeat: %v %v", resp2, err)
	}
	if h2, _ := e.st.History(ctx, artifact.KindRegistryEntry, "docs.lookup@2.4.1"); len(h2) != 2 {
		t.Fatalf("repeat wrote revisions: %d", len(h2))
	}
	// the organisation re-qualifies by applying its entry again, at a
	// version above the observer's suspension
	e.applyEntry(t, "docs.lookup@2.4.1", versioned(entry("2.4.1", "lab/2"), "5"))
	if s := e.status(t, "docs.lookup@2.4.1"); s.State != qualified {
		t.Fatalf("requalified: %v", s.State)
	}
}

func TestDriftReportRejects(t *testing.T) {
	e := setup(t)
	e.applyEntry(t, "x@1", entry("1", ""))
	ctx := context.Background()
	for _, req := range []*mcpreadyv1.ReportDriftRequest{
		{EntryName: "x@1", Observed: &mcpreadyv1.ToolIdentity{}},
		{EntryName: "x@1", Labels: []mcpreadyv1.DriftLabel{mcpreadyv1.DriftLabel_DRIFT_LABEL_VERSION_DRIFT}},
	} {
		if _, err := e.lc.ReportDrift(ctx, e.signed(t, req)); status.Code(err) != codes.InvalidArgument {
			t.Fatalf("%v: %v", req, err)
		}
	}
	if _, err := e.lc.ReportDrift(ctx, e.signed(t, &mcpreadyv1.ReportDriftRequest{EntryName: "nope", Observed: &mcpreadyv1.ToolIdentity{}, Labels: []mcpreadyv1.DriftLabel{1}})); err == nil {
		t.Fatal("unknown entry accepted")
	}
}

// signed turns a plain drift request into the signed form an agent sends:
// a DriftReport by testpki's agent key (granted for node host-1), issued
// now, naming the entry's current digest; the node defaults to host-1.
func (e *env) signed(t *testing.T, req *mcpreadyv1.ReportDriftRequest) *mcpreadyv1.ReportDriftRequest {
	t.Helper()
	node := req.GetNode().GetId()
	if node == "" {
		node = "host-1"
	}
	digest := ""
	if r, err := e.st.Get(context.Background(), artifact.KindRegistryEntry, req.GetEntryName()); err == nil {
		digest = r.Digest
	}
	return testpki.DriftReport(t, e.p.Agent, node, req.GetEntryName(), digest, req.GetLabels(), req.GetObserved(), e.clk.now())
}

// TestLearnsRevisionsFromStoreWatch: a revision written to the store by any
// writer (here straight into the store, as another replica would) is seen
// through the store watch and recorded as a lifecycle event.
func TestLearnsRevisionsFromStoreWatch(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	b := testpki.Sign(t, artifact.New(artifact.KindRegistryEntry, "direct@1", entry("1", "")), e.p.Org)
	orgID, _ := sign.KeyID(e.p.Org.Public())
	if _, _, err := e.st.Put(ctx, store.Record{Kind: artifact.KindRegistryEntry, Name: "direct@1", Bundle: b, Signer: orgID}); err != nil {
		t.Fatal(err)
	}
	s := waitEvents(t, e, "direct@1", 1)
	if s.State != qualified || s.Events[0].To != qualified {
		t.Fatalf("after a direct store write: %v", s)
	}
}

// waitEvents waits until name's status has n lifecycle events.
func waitEvents(t *testing.T, e *env, name string, n int) *mcpreadyv1.RegistryStatus {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s := e.status(t, name)
		if len(s.Events) >= n {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d lifecycle events, want %d: %v", name, len(s.Events), n, s)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestRevisionHandledOnce: another Manager (a replica elected later) sees
// the same organisation revision again through its own watch and sweep,
// and must not record it twice nor undo a suspension made since. Without an
// observer key the suspension is not distributed, so the organisation's
// revision stays the latest one.
func TestRevisionHandledOnce(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	nokey, err := lifecycle.New(lifecycle.Options{Writer: e.w, Now: e.clk.now})
	if err != nil {
		t.Fatal(err)
	}
	e.applyEntry(t, "docs.lookup@2.4.1", entry("2.4.1", ""))
	observed := entry("2.5.0", "").Identity
	if _, err := nokey.ReportDrift(ctx, e.signed(t, &mcpreadyv1.ReportDriftRequest{Node: &mcpreadyv1.Node{Id: "host-1"}, EntryName: "docs.lookup@2.4.1", Observed: observed,
		Labels: []mcpreadyv1.DriftLabel{mcpreadyv1.DriftLabel_DRIFT_LABEL_VERSION_DRIFT}})); err != nil {
		t.Fatal(err)
	}
	later, err := lifecycle.New(lifecycle.Options{Writer: e.w, Now: e.clk.now})
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { later.Watch(wctx); close(done) }()
	if _, err := later.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	cancel()
	<-done
	s := e.status(t, "docs.lookup@2.4.1")
	if s.State != suspended || len(s.Events) != 2 {
		t.Fatalf("after another replica's watch and sweep: %v", s)
	}
}

// TestWatchStopsWithContext: Watch returns once its context ends.
func TestWatchStopsWithContext(t *testing.T) {
	e := setup(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { e.lc.Watch(ctx); close(done) }()
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Watch did not return after its context ended")
	}
}

// TestEntriesFromBeforeTheWatch: an entry whose events were recorded when
// it was applied (as control planes did before the lifecycle watched the
// store), here suspended since, is not re-qualified from its old revision
// when the lifecycle first sees it; a drift candidate the organisation then
// qualifies is recorded.
func TestEntriesFromBeforeTheWatch(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	orgID, _ := sign.KeyID(e.p.Org.Public())
	b := testpki.Sign(t, artifact.New(artifact.KindRegistryEntry, "old@1", entry("1", "")), e.p.Org)
	later, err := lifecycle.New(lifecycle.Options{Writer: e.w, Now: e.clk.now}) // its watch is not running
	if err != nil {
		t.Fatal(err)
	}
	// What an earlier control plane left: the revision and its events.
	for _, ev := range []*mcpreadyv1.LifecycleEvent{{EntryName: "old@1", To: qualified}, {EntryName: "old@1", From: qualified, To: suspended}} {
		raw, _ := protojson.Marshal(ev)
		if err := e.st.AppendEvent(ctx, "registry", "old@1", raw); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := e.st.Put(ctx, store.Record{Kind: artifact.KindRegistryEntry, Name: "old@1", Bundle: b, Signer: orgID}); err != nil {
		t.Fatal(err)
	}
	if _, err := later.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if s := e.status(t, "old@1"); s.State != suspended || len(s.Events) != 2 {
		t.Fatalf("old entry after the first sweep: %v", s)
	}
	// A drift candidate, then the organisation qualifies it.
	resp, err := e.lc.ReportDrift(ctx, e.signed(t, &mcpreadyv1.ReportDriftRequest{EntryName: "old@1", Observed: entry("2", "").Identity,
		Labels: []mcpreadyv1.DriftLabel{mcpreadyv1.DriftLabel_DRIFT_LABEL_VERSION_DRIFT}}))
	if err != nil {
		t.Fatal(err)
	}
	e.applyEntry(t, resp.CandidateName, versioned(entry("2", ""), "5"))
	if s := e.status(t, resp.CandidateName); s.State != qualified {
		t.Fatalf("qualified candidate: %v", s)
	}
}

// TestReapplyingOriginalBundleDoesNotReverseSuspension is the attack:
// after a drift suspension, the organisation's original bundle (revision
// 1, from the history) applied again must be refused as a rollback, and
// the entry stays SUSPENDED.
func TestReapplyingOriginalBundleDoesNotReverseSuspension(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	orig := e.applyEntry(t, "docs.lookup@2.4.1", versioned(entry("2.4.1", "lab/1"), "1"))
	observed := entry("2.5.0", "").Identity
	_, err := e.lc.ReportDrift(ctx, e.signed(t, &mcpreadyv1.ReportDriftRequest{Node: &mcpreadyv1.Node{Id: "host-1"}, EntryName: "docs.lookup@2.4.1", Observed: observed,
		Labels: []mcpreadyv1.DriftLabel{mcpreadyv1.DriftLabel_DRIFT_LABEL_VERSION_DRIFT}}))
	if err != nil {
		t.Fatal(err)
	}
	spec, _ := e.latestSpec(t, "docs.lookup@2.4.1")
	if spec.State != suspended || spec.GetProvenance().GetVersion() != "2" {
		t.Fatalf("suspension: state %v version %q", spec.State, spec.GetProvenance().GetVersion())
	}
	hist, err := e.st.History(ctx, artifact.KindRegistryEntry, "docs.lookup@2.4.1")
	if err != nil || len(hist) != 2 {
		t.Fatalf("history: %d %v", len(hist), err)
	}
	for label, b := range map[string][]byte{"revision 1 from history": hist[0].Bundle, "returned bytes": orig,
		"re-signed at the same version": testpki.Sign(t, artifact.New(artifact.KindRegistryEntry, "docs.lookup@2.4.1", versioned(entry("2.4.1", "lab/1"), "1")), e.p.Org)} {
		if _, _, err := e.w.Apply(ctx, b); !errors.Is(err, artifact.ErrRollback) {
			t.Fatalf("%s: err = %v, want rollback", label, err)
		}
	}
	if _, err := e.lc.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if s := e.status(t, "docs.lookup@2.4.1"); s.State != suspended {
		t.Fatalf("suspension reversed: %v", s.State)
	}
	if h, _ := e.st.History(ctx, artifact.KindRegistryEntry, "docs.lookup@2.4.1"); len(h) != 2 {
		t.Fatalf("refused replays stored %d revisions", len(h)-2)
	}
}

// An entry signed at a 0.x version is moved like any other: the observer's
// copy takes the next version ("0.1.0" → "0.1.1"). Before, NextVersion
// wrote ".1.1", which is not a version: the write path refused the copy and
// the stale entry stayed QUALIFIED for agents.
func TestZeroMajorVersionMoves(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	e.applyEntry(t, "docs.lookup@0.3.0", versioned(entry("0.3.0", "lab/docs.lookup/1"), "0.1.0"))
	ev := &mcpreadyv1.Evidence{Subject: &mcpreadyv1.Subject{ServerName: "com.example/docs", ToolName: "docs.lookup"},
		ObservedAt: timestamppb.New(e.clk.now()), ExpiresAt: timestamppb.New(e.clk.now().Add(time.Hour))}
	if _, _, err := e.w.Apply(ctx, testpki.Sign(t, artifact.New(artifact.KindEvidence, "lab/docs.lookup/1", testpki.ObserverEvidence.Claim(ev)), e.p.Observer)); err != nil {
		t.Fatal(err)
	}
	e.clk.add(2 * time.Hour)
	if ch, err := e.lc.Sweep(ctx); err != nil || len(ch) != 1 {
		t.Fatalf("expired sweep: %v %v", ch, err)
	}
	spec, _ := e.latestSpec(t, "docs.lookup@0.3.0")
	if spec.State != stale || spec.GetProvenance().GetVersion() != "0.1.1" {
		t.Fatalf("distributed copy: state %v version %q", spec.State, spec.GetProvenance().GetVersion())
	}
}
