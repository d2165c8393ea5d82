package receipt_test

import (
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/mcpready/mcpready/agent/receipt"
	"github.com/mcpready/mcpready/agent/receipt/receipttest"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
)

// summaryOf is the reference: proto.Unmarshal, then every field not in
// SummaryFields cleared.
func summaryOf(t testing.TB, e []byte) (*mcpreadyv1.Receipt, error) {
	r := &mcpreadyv1.Receipt{}
	if err := proto.Unmarshal(e, r); err != nil {
		return nil, err
	}
	keep := map[protoreflect.Name]bool{}
	for _, n := range receipt.SummaryFields {
		keep[n] = true
	}
	m := r.ProtoReflect()
	m.Range(func(fd protoreflect.FieldDescriptor, _ protoreflect.Value) bool {
		if !keep[fd.Name()] {
			m.Clear(fd)
		}
		return true
	})
	m.SetUnknown(nil)
	return r, nil
}

func checkSummary(t testing.TB, e []byte) {
	want, werr := summaryOf(t, e)
	var scratch []byte
	got, gerr := receipt.DecodeSummary(e, &scratch)
	if (werr == nil) != (gerr == nil) {
		t.Fatalf("proto.Unmarshal error %v, DecodeSummary error %v (input %x)", werr, gerr, e)
	}
	if werr != nil {
		return
	}
	got.ProtoReflect().SetUnknown(nil)
	if !proto.Equal(got, want) {
		t.Fatalf("summary differs:\n got %v\nwant %v", got, want)
	}
}

func TestDecodeSummary(t *testing.T) {
	real, err := receipt.Encode(receipttest.Realistic(7, time.Unix(1700000000, 0)))
	if err != nil {
		t.Fatal(err)
	}
	badUTF8 := func(num protowire.Number) []byte {
		return protowire.AppendBytes(protowire.AppendTag(append([]byte{}, real...), num, protowire.BytesType), []byte{0xff, 0xfe})
	}
	for name, in := range map[string][]byte{
		"realistic":             real,
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
	} {
		t.Run(name, func(t *testing.T) { checkSummary(t, in) })
	}
}

func FuzzDecodeSummary(f *testing.F) {
	real, err := receipt.Encode(receipttest.Realistic(7, time.Unix(1700000000, 0)))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(real)
	f.Add(real[:40])
	f.Add([]byte{0x7a, 0x03, 0x0a, 0x01, 0xff})
	f.Fuzz(func(t *testing.T, e []byte) { checkSummary(t, e) })
}
