package ledger_test

import (
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/ledger"
	"github.com/mcpready/mcpready/ledger/ledgertest"
)

// summaryOf is the reference: proto.Unmarshal, then every field not in
// SummaryFields cleared.
func summaryOf(t testing.TB, e []byte) (*mcpreadyv1.Receipt, error) {
	r := &mcpreadyv1.Receipt{}
	if err := proto.Unmarshal(e, r); err != nil {
		return nil, err
	}
	keep := map[protoreflect.Name]bool{}
	for _, n := range ledger.SummaryFields {
		keep[n] = true
	}
	m := r.ProtoReflect()
	m.Range(func(fd protoreflect.FieldDescriptor, _ protoreflect.Value) bool {
		if !keep[fd.Name()] {
			m.Clear(fd)
		}
		return true
	})
	dropUnknown(m)
	return r, nil
}

// dropUnknown clears unknown fields in m and every message below it: the
// summary does not keep them.
func dropUnknown(m protoreflect.Message) {
	m.SetUnknown(nil)
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsMap():
		case fd.IsList() && fd.Message() != nil:
			for i := 0; i < v.List().Len(); i++ {
				dropUnknown(v.List().Get(i).Message())
			}
		case fd.Message() != nil:
			dropUnknown(v.Message())
		}
		return true
	})
}

func checkSummary(t testing.TB, e []byte) {
	want, werr := summaryOf(t, e)
	got, gerr := ledger.DecodeSummary(e)
	if (werr == nil) != (gerr == nil) {
		t.Fatalf("proto.Unmarshal error %v, DecodeSummary error %v (input %x)", werr, gerr, e)
	}
	if werr != nil {
		return
	}
	dropUnknown(got.ProtoReflect())
	if !proto.Equal(got, want) {
		t.Fatalf("summary differs:\n got %v\nwant %v", got, want)
	}
}

// full is a realistic receipt with every summary field set, also the
// rarer ones, and a second attempt.
func full(t testing.TB) []byte {
	r := ledgertest.Realistic(7, time.Unix(1700000000, 5))
	r.FailedLayer, r.Outcome, r.JsonrpcCode, r.AttemptCount = mcpreadyv1.ReadinessLayer(3), mcpreadyv1.OutcomeClass(4), -32603, 2
	r.ConsumerSideEffect = mcpreadyv1.SideEffectClass(2)
	r.AuthClass, r.InputClass, r.Warmth = "oauth:client_credentials", "bulk", mcpreadyv1.CallWarmth_CALL_WARMTH_WARM
	r.Attempts = append(r.Attempts, &mcpreadyv1.Attempt{Number: 2, Entry: "e", Outcome: 3, TransportStatus: "503", JsonrpcCode: -1, IsError: true, Hedged: true})
	e, err := ledger.Encode(r)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// workflowReceipt is a workflow receipt (Receipt.workflow) with two calls.
func workflowReceipt(t testing.TB) []byte {
	r := ledgertest.Realistic(8, time.Unix(1700000000, 5))
	r.Workflow = &mcpreadyv1.WorkflowRecord{EndState: mcpreadyv1.WorkflowEndState_WORKFLOW_END_STATE_COMPLETED, CallsDropped: 1,
		Calls: []*mcpreadyv1.WorkflowCall{{ReceiptId: "R1", Outcome: 1, Attempts: 2, Fallback: true, Contributed: true,
			Selected: &mcpreadyv1.Selection{Entry: "e", ServerName: "s", ToolName: "t"}}, {ReceiptId: "R2", Requested: "x"}}}
	e, err := ledger.Encode(r)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestDecodeSummary(t *testing.T) {
	real := full(t)
	wf := workflowReceipt(t)
	sel := protowire.AppendBytes(protowire.AppendTag(nil, 18, protowire.BytesType), protowire.AppendString(protowire.AppendTag(nil, 3, protowire.BytesType), "srv"))
	badUTF8 := func(num protowire.Number) []byte {
		return protowire.AppendBytes(protowire.AppendTag(append([]byte{}, real...), num, protowire.BytesType), []byte{0xff, 0xfe})
	}
	for name, in := range map[string][]byte{
		"realistic":             real,
		"workflow receipt":      wf,
		"workflow twice":        append(append([]byte{}, wf...), wf...),
		"bad utf8 in workflow":  protowire.AppendBytes(protowire.AppendTag(nil, 190, protowire.BytesType), protowire.AppendBytes(protowire.AppendTag(nil, 5, protowire.BytesType), []byte{0xff})),
		"empty":                 nil,
		"truncated":             real[:len(real)-3],
		"bad utf8 kept field":   badUTF8(1),
		"bad utf8 skipped":      badUTF8(6),
		"bad utf8 in candidate": protowire.AppendBytes(protowire.AppendTag(nil, 15, protowire.BytesType), protowire.AppendBytes(protowire.AppendTag(nil, 8, protowire.BytesType), []byte{0xc0})),
		"bad nested candidate":  protowire.AppendBytes(protowire.AppendTag(nil, 15, protowire.BytesType), []byte{0x0a, 0x05, 'a'}),
		"bad map entry":         protowire.AppendBytes(protowire.AppendTag(nil, 14, protowire.BytesType), []byte{0x0a, 0x01, 0xff}),
		"unknown field":         protowire.AppendVarint(protowire.AppendTag(append([]byte{}, real...), 999, protowire.VarintType), 5),
		"wrong wire type":       protowire.AppendVarint(protowire.AppendTag(nil, 15, protowire.VarintType), 5),
		"field zero":            {0x00, 0x01},
		"packed actions ok":     protowire.AppendBytes(protowire.AppendTag(nil, 38, protowire.BytesType), []byte("a")),
		"selected merged":       append(append(append([]byte{}, real...), sel...), sel...),
		"receipt twice":         append(append([]byte{}, real...), real...),
		"timestamp bytes field": protowire.AppendBytes(protowire.AppendTag(nil, 5, protowire.BytesType), protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), []byte{0xff})),
	} {
		t.Run(name, func(t *testing.T) { checkSummary(t, in) })
	}
}

func FuzzDecodeSummary(f *testing.F) {
	real := full(f)
	f.Add(real)
	f.Add(real[:40])
	f.Add(workflowReceipt(f))
	f.Add([]byte{0x7a, 0x03, 0x0a, 0x01, 0xff})
	f.Fuzz(func(t *testing.T, e []byte) { checkSummary(t, e) })
}
