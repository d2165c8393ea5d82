package aggregate

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/mcpready/mcpready/artifact"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/ledger"
	"github.com/mcpready/mcpready/sign"
)

type sink struct {
	mu      sync.Mutex
	bundles [][]byte
}

func (s *sink) ApplyEvidence(_ context.Context, b []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.bundles = append(s.bundles, b)
	return nil
}

var t0 = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)

func rc(outcome mcpreadyv1.OutcomeClass, attempts int, latMs int, mod ...func(*mcpreadyv1.Receipt)) *mcpreadyv1.Receipt {
	r := &mcpreadyv1.Receipt{ReceiptId: ledger.NewID(), Outcome: outcome, AttemptCount: int32(attempts), PrincipalClass: "employee", TenantClass: "acme", Region: "eu",
		Selected:           &mcpreadyv1.Selection{ServerName: "com.example/docs-a", ServerVersion: "1.4.2", ToolName: "lookup", Endpoint: "https://a/mcp", ProtocolVersion: "2025-11-25"},
		ConsumerSideEffect: mcpreadyv1.SideEffectClass_SIDE_EFFECT_CLASS_READ_ONLY,
		EndedAt:            timestamppb.New(t0.Add(time.Minute)), Latency: durationpb.New(time.Duration(latMs) * time.Millisecond)}
	for _, m := range mod {
		m(r)
	}
	return r
}

func TestEvidenceRatesDenominatorsAndSignature(t *testing.T) {
	key, _ := sign.GenerateKey(sign.AlgorithmEd25519)
	sk := &sink{}
	now := t0.Add(2 * time.Minute)
	other := identity()
	other.ToolName = "other"
	reg := NewRegistrySubjects()
	reg.Set("lookup", &mcpreadyv1.RegistryEntry{Identity: identity()})
	reg.Set("other", &mcpreadyv1.RegistryEntry{Identity: other})
	a, err := New(Options{Signer: key, Sink: SinkFunc(sk.ApplyEvidence), Subjects: reg, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	O := mcpreadyv1.OutcomeClass_OUTCOME_CLASS_SUCCESS
	var rs []*mcpreadyv1.Receipt
	for i := 1; i <= 10; i++ {
		rs = append(rs, rc(O, 1, i*10))
	}
	rs = append(rs,
		rc(mcpreadyv1.OutcomeClass_OUTCOME_CLASS_TRANSPORT_FAILURE, 1, 5, func(r *mcpreadyv1.Receipt) { r.TransportStatus = "connection refused" }),
		rc(mcpreadyv1.OutcomeClass_OUTCOME_CLASS_TIMEOUT, 1, 5),
		rc(mcpreadyv1.OutcomeClass_OUTCOME_CLASS_PROTOCOL_ERROR, 1, 5, func(r *mcpreadyv1.Receipt) { r.JsonrpcCode = -32603 }),
		rc(mcpreadyv1.OutcomeClass_OUTCOME_CLASS_ACCESS_NOT_READY, 1, 5, func(r *mcpreadyv1.Receipt) { r.TransportStatus = "401" }),
		rc(mcpreadyv1.OutcomeClass_OUTCOME_CLASS_TOOL_ERROR, 1, 5),
		rc(mcpreadyv1.OutcomeClass_OUTCOME_CLASS_INVALID_RESULT, 1, 5),
		rc(mcpreadyv1.OutcomeClass_OUTCOME_CLASS_AMBIGUOUS, 1, 5000),
		rc(mcpreadyv1.OutcomeClass_OUTCOME_CLASS_REFUSED, 0, 0),
		rc(mcpreadyv1.OutcomeClass_OUTCOME_CLASS_CIRCUIT_OPEN, 0, 0),
		rc(O, 1, 50, func(r *mcpreadyv1.Receipt) { r.Selected.ToolName = "other" }),
		&mcpreadyv1.Receipt{ReceiptId: "no-selection", Outcome: mcpreadyv1.OutcomeClass_OUTCOME_CLASS_REFUSED},
	)
	var digests []string
	for _, r := range rs {
		e, _ := ledger.Encode(r)
		digests = append(digests, ledger.Digest(e))
	}
	a.Observe("agent-1", rs, digests)
	if n, err := a.Flush(context.Background(), false); n != 0 || err != nil {
		t.Fatalf("flushed an open window: %d %v", n, err)
	}
	now = t0.Add(5*time.Minute + 31*time.Second)
	if n, err := a.Flush(context.Background(), false); n != 2 || err != nil {
		t.Fatalf("flushed %d: %v", n, err)
	}
	var ev *mcpreadyv1.Evidence
	var name string
	for _, b := range sk.bundles {
		v, err := sign.VerifyWithKey(b, key.Public())
		if err != nil {
			t.Fatal(err)
		}
		if e := v.Object.Spec.(*mcpreadyv1.Evidence); e.Subject.ToolName == "lookup" {
			ev, name = e, v.Object.Metadata.Name
		}
	}
	if ev == nil {
		t.Fatal("no evidence for lookup")
	}
	if !strings.HasPrefix(name, "passive/com.example/docs-a/lookup/") || artifact.ValidateName(name) != nil {
		t.Fatalf("name %q", name)
	}
	if ev.Method != mcpreadyv1.EvidenceMethod_EVIDENCE_METHOD_PASSIVE || ev.Sample.Attempted != 19 || ev.Sample.Eligible != 17 || ev.Sample.Excluded != 2 ||
		ev.Sample.ExclusionReasons["refused-before-send"] != 2 || ev.AmbiguousOutcomes != 1 {
		t.Fatalf("sample %+v ambiguous %d", ev.Sample, ev.AmbiguousOutcomes)
	}
	want := map[mcpreadyv1.ReadinessLayer][2]int64{
		mcpreadyv1.ReadinessLayer_READINESS_LAYER_REACHABILITY:    {15, 17},
		mcpreadyv1.ReadinessLayer_READINESS_LAYER_PROTOCOL:        {13, 14},
		mcpreadyv1.ReadinessLayer_READINESS_LAYER_ACCESS:          {12, 13},
		mcpreadyv1.ReadinessLayer_READINESS_LAYER_INVOCATION:      {11, 12},
		mcpreadyv1.ReadinessLayer_READINESS_LAYER_RESULT_VALIDITY: {10, 11},
	}
	for _, lr := range ev.Rates {
		w := want[lr.Layer]
		if lr.Successes != w[0] || lr.Denominator != w[1] || lr.Excluded != 17-w[1] || lr.SuccessDefinition == "" {
			t.Errorf("%s: %d/%d excluded %d, want %d/%d", lr.Layer, lr.Successes, lr.Denominator, lr.Excluded, w[0], w[1])
		}
	}
	if ev.Latency.P50Ms != 20 || ev.Latency.P90Ms != 80 || ev.Latency.P99Ms != 100 || ev.Latency.Count != 16 {
		t.Errorf("latency %+v", ev.Latency)
	}
	if len(ev.Errors) != 6 {
		t.Errorf("errors %v", ev.Errors)
	}
	if !ev.ExpiresAt.AsTime().Equal(t0.Add(5*time.Minute + 15*time.Minute)) {
		t.Errorf("expires %v", ev.ExpiresAt.AsTime())
	}
	if fmt.Sprint(ev.BlindSpots) == "" || !strings.Contains(strings.Join(ev.BlindSpots, ";"), "no write tools observed") {
		t.Errorf("blind spots %v", ev.BlindSpots)
	}
	if ev.ReceiptCount != 19 || ev.ReceiptsDigest != ledger.DigestOfDigests(digests[:19]) {
		t.Errorf("receipts digest over %d", ev.ReceiptCount)
	}
	// A receipt for the emitted window arrives late: counted, not folded.
	a.Observe("agent-1", rs[:1], digests[:1])
	if a.Late() != 1 {
		t.Fatalf("late %d", a.Late())
	}
	if n, _ := a.Flush(context.Background(), true); n != 0 {
		t.Fatalf("late receipt re-emitted a partial window")
	}
}

func TestEvidenceName(t *testing.T) {
	for _, tc := range []struct{ server, tool string }{{"com.example/docs-a", "lookup"}, {"weird server//..", "tool name with spaces"}, {"", ""}, {strings.Repeat("x", 400), "t"}} {
		n := EvidenceName("passive", tc.server, tc.tool, "sha256:0123456789abcdef")
		if err := artifact.ValidateName(n); err != nil {
			t.Errorf("%q: %v", n, err)
		}
	}
}

// TestEvidenceVersionsRise: a later fold of a window, and any fold of a
// later window, carries a higher signed version (the write path refuses
// one that does not rise).
func TestEvidenceVersionsRise(t *testing.T) {
	w1 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	w2 := w1.Add(5 * time.Minute)
	fold := w2.Add(time.Minute)
	for _, c := range [][2]string{
		{evidenceVersion(w1, fold), evidenceVersion(w1, fold.Add(time.Nanosecond))},
		{evidenceVersion(w1, fold.Add(time.Hour)), evidenceVersion(w2, fold)},
	} {
		if n, err := artifact.CompareVersions(c[1], c[0]); err != nil || n != 1 {
			t.Errorf("%q does not follow %q: %d %v", c[1], c[0], n, err)
		}
	}
}

// TestResumeFoldsEachWindowOnce: a new term drops the previous term's
// partial windows and does not emit again a window that ended before it
// resumed, even when its receipts are re-read; a window still open is
// emitted once, complete.
func TestResumeFoldsEachWindowOnce(t *testing.T) {
	key, _ := sign.GenerateKey(sign.AlgorithmEd25519)
	sk := &sink{}
	now := t0.Add(17 * time.Minute)
	reg := NewRegistrySubjects()
	reg.Set("lookup", &mcpreadyv1.RegistryEntry{Identity: identity()})
	a, err := New(Options{Signer: key, Sink: SinkFunc(sk.ApplyEvidence), Subjects: reg, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	O := mcpreadyv1.OutcomeClass_OUTCOME_CLASS_SUCCESS
	at := func(d time.Duration) func(*mcpreadyv1.Receipt) {
		return func(r *mcpreadyv1.Receipt) { r.EndedAt = timestamppb.New(t0.Add(d)) }
	}
	// A previous term folded part of the open window [15m, 20m).
	a.Observe("agent-1", []*mcpreadyv1.Receipt{rc(O, 1, 10, at(16*time.Minute))}, []string{"d0"})
	resume, from := a.TermStart(t0.Add(17 * time.Minute))
	if from != resume.Add(-5*time.Minute) {
		t.Fatalf("re-read from %v for resume %v", from, resume)
	}
	a.Resume(resume)
	// The new term re-reads: one receipt of the window [10m, 15m) that the
	// previous leader emitted, and the open window's two receipts.
	a.Observe("agent-1", []*mcpreadyv1.Receipt{rc(O, 1, 10, at(12*time.Minute)), rc(O, 1, 10, at(16*time.Minute)), rc(O, 1, 10, at(18*time.Minute))}, []string{"d1", "d2", "d3"})
	now = t0.Add(25 * time.Minute) // [15m, 20m) has ended Grace ago
	if n, err := a.Flush(context.Background(), false); err != nil || n != 1 {
		t.Fatalf("Flush emitted %d, %v; want the open window only", n, err)
	}
	obj, err := sign.Peek(sk.bundles[0])
	if err != nil {
		t.Fatal(err)
	}
	ev := obj.Spec.(*mcpreadyv1.Evidence)
	if ev.GetReceiptCount() != 2 || !ev.GetWindowStart().AsTime().Equal(t0.Add(15*time.Minute)) {
		t.Fatalf("emitted window %v with %d receipts, want [15m) with 2", ev.GetWindowStart().AsTime(), ev.GetReceiptCount())
	}
	if a.Late() != 1 {
		t.Fatalf("late %d, want the re-read receipt of the emitted window", a.Late())
	}
}
