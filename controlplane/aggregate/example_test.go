package aggregate_test

import (
	"context"
	"fmt"
	"sort"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/mcpready/mcpready/controlplane/aggregate"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/ledger"
	"github.com/mcpready/mcpready/sign"
)

// Ingest hands each stored batch's receipts to Observe; once a window has
// ended and its grace passed, Flush signs the window's passive Evidence
// per registered subject and gives it to the sink (on the control plane,
// the verified write path). A receipt for a subject the registry does not
// hold is not folded, and one arriving after its window was emitted is
// counted late.
func ExampleAggregator() {
	start := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC) // a window boundary
	now := start.Add(2 * time.Minute)
	key, err := sign.GenerateKey(sign.AlgorithmEd25519)
	if err != nil {
		panic(err)
	}
	var bundles [][]byte
	sink := aggregate.SinkFunc(func(_ context.Context, b []byte) error {
		bundles = append(bundles, b)
		return nil
	})
	lookup := &mcpreadyv1.ToolIdentity{ServerName: "com.example/docs", ServerVersion: "1.4.2", ToolName: "lookup", Endpoint: "https://docs.example.com/mcp"}
	reg := aggregate.NewRegistrySubjects()
	reg.Set("com.example/docs/lookup", &mcpreadyv1.RegistryEntry{Identity: lookup})

	a, err := aggregate.New(aggregate.Options{
		Signer: key, Sink: sink, Subjects: reg,
		Window: 5 * time.Minute, Grace: 30 * time.Second,
		Now: func() time.Time { return now },
	})
	if err != nil {
		panic(err)
	}

	// One batch from host-1: eight successes, a timeout and a refused
	// token, and a call to a tool the registry does not hold.
	receipt := func(i int, tool string, outcome mcpreadyv1.OutcomeClass, latency time.Duration) *mcpreadyv1.Receipt {
		return &mcpreadyv1.Receipt{
			ReceiptId: fmt.Sprintf("r-%02d", i), Outcome: outcome, AttemptCount: 1,
			PrincipalClass: "employee", TenantClass: "internal", Region: "eu-west-1",
			Selected: &mcpreadyv1.Selection{ServerName: lookup.ServerName, ServerVersion: lookup.ServerVersion,
				ToolName: tool, Endpoint: lookup.Endpoint, ProtocolVersion: "2025-11-25"},
			ConsumerSideEffect: mcpreadyv1.SideEffectClass_SIDE_EFFECT_CLASS_READ_ONLY,
			EndedAt:            timestamppb.New(start.Add(time.Minute + time.Duration(i)*time.Second)),
			Latency:            durationpb.New(latency),
		}
	}
	var rs []*mcpreadyv1.Receipt
	for i := range 8 {
		rs = append(rs, receipt(i, "lookup", mcpreadyv1.OutcomeClass_OUTCOME_CLASS_SUCCESS, time.Duration(40+10*i)*time.Millisecond))
	}
	rs = append(rs,
		receipt(8, "lookup", mcpreadyv1.OutcomeClass_OUTCOME_CLASS_TIMEOUT, 30*time.Second),
		receipt(9, "lookup", mcpreadyv1.OutcomeClass_OUTCOME_CLASS_ACCESS_NOT_READY, 15*time.Millisecond),
		receipt(10, "unregistered", mcpreadyv1.OutcomeClass_OUTCOME_CLASS_SUCCESS, 20*time.Millisecond))
	rs[9].TransportStatus = "401"
	digests := make([]string, len(rs))
	for i, r := range rs {
		enc, err := ledger.Encode(r)
		if err != nil {
			panic(err)
		}
		digests[i] = ledger.Digest(enc)
	}
	a.Observe("host-1", rs, digests)

	n, err := a.Flush(context.Background(), false)
	fmt.Println("while the window is open:", n, err)
	now = start.Add(5*time.Minute + 31*time.Second) // window ended, grace passed
	n, err = a.Flush(context.Background(), false)
	fmt.Println("after its grace:", n, err)

	sort.Slice(bundles, func(i, j int) bool { return string(bundles[i]) < string(bundles[j]) })
	for _, b := range bundles {
		v, err := sign.VerifyWithKey(b, key.Public())
		if err != nil {
			panic(err)
		}
		ev := v.Object.Spec.(*mcpreadyv1.Evidence)
		fmt.Println(v.Object.Kind, v.Object.Metadata.Name, ev.Method)
		fmt.Println("subject:", ev.Subject.ServerName, ev.Subject.ToolName)
		// 11 observed: the unregistered tool's receipt is not folded in.
		fmt.Println("sample: attempted", ev.Sample.Attempted, "eligible", ev.Sample.Eligible, "receipts", ev.ReceiptCount)
		for _, r := range ev.Rates {
			fmt.Printf("%s %d/%d\n", r.Layer, r.Successes, r.Denominator)
		}
		fmt.Println("latency p50", ev.Latency.P50Ms, "ms, p90", ev.Latency.P90Ms, "ms")
		fmt.Println("window", ev.WindowStart.AsTime().Format(time.TimeOnly), "to", ev.WindowEnd.AsTime().Format(time.TimeOnly),
			"observed at", ev.ObservedAt.AsTime().Format(time.TimeOnly), "expires", ev.ExpiresAt.AsTime().Format(time.TimeOnly))
	}

	// host-1's next batch repeats a receipt of the emitted window.
	a.Observe("host-1", rs[:1], digests[:1])
	fmt.Println("late:", a.Late())
	// Output:
	// while the window is open: 0 <nil>
	// after its grace: 1 <nil>
	// Evidence passive/com.example/docs/lookup/9e91949c8f1b EVIDENCE_METHOD_PASSIVE
	// subject: com.example/docs lookup
	// sample: attempted 10 eligible 10 receipts 10
	// READINESS_LAYER_REACHABILITY 9/10
	// READINESS_LAYER_PROTOCOL 9/9
	// READINESS_LAYER_ACCESS 8/9
	// READINESS_LAYER_INVOCATION 8/8
	// READINESS_LAYER_RESULT_VALIDITY 8/8
	// latency p50 70 ms, p90 110 ms
	// window 09:00:00 to 09:05:00 observed at 09:01:09 expires 09:20:00
	// late: 1
}
