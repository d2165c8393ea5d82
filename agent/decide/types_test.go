package decide

import (
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/readiness"
)

// selected copies every field of a Candidate (set here through protobuf
// reflection, so a field added later is covered too) and marks it selected.
func TestSelectedCopiesEveryField(t *testing.T) {
	c := &mcpreadyv1.Candidate{}
	m := c.ProtoReflect()
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		f := fields.Get(i)
		switch f.Kind() {
		case protoreflect.StringKind:
			m.Set(f, protoreflect.ValueOfString("v-"+string(f.Name())))
		case protoreflect.BoolKind:
			m.Set(f, protoreflect.ValueOfBool(f.Name() != "selected"))
		case protoreflect.EnumKind:
			m.Set(f, protoreflect.ValueOfEnum(1))
		default:
			t.Fatalf("field %s of kind %s: teach this test and selected() about it", f.Name(), f.Kind())
		}
	}
	c.Selected = false
	want := proto.CloneOf(c)
	want.Selected = true
	if got := selected(c); !proto.Equal(got, want) || c.Selected {
		t.Fatalf("selected(%v) = %v, want %v", c, got, want)
	}
}

// selectedSink keeps WithSelected's list on the heap, as a receipt does.
var selectedSink []*mcpreadyv1.Candidate

// The route that ran is marked selected in a receipt's candidates by its
// entry's shared record, equal to a copy of its admission marked selected
// (the admission itself untouched): WithSelected allocates the list only.
// A candidate no route admits is still copied.
func TestWithSelectedSharesRouteRecord(t *testing.T) {
	s := snap(t, fixture())
	d := s.Decide(baseReq(), nil)
	if d.Refusal != nil || len(d.Routes) == 0 {
		t.Fatalf("decision %+v", d)
	}
	entry := d.Routes[0].Entry
	var admission *mcpreadyv1.Candidate
	for _, c := range d.Candidates {
		if c.GetEntry() == entry {
			admission = c
		}
	}
	want := proto.CloneOf(admission)
	want.Selected = true
	sel := d.WithSelected(entry)
	for i, c := range sel {
		if c.GetEntry() != entry {
			if c != d.Candidates[i] {
				t.Errorf("candidate %s not shared", c.GetEntry())
			}
			continue
		}
		if !proto.Equal(c, want) || admission.GetSelected() {
			t.Errorf("selected %v, want %v (admission %v)", c, want, admission)
		}
		if d2 := s.Decide(baseReq(), nil); d2.WithSelected(entry)[i] != c {
			t.Error("the route's selected record is not shared")
		}
	}
	if n := testing.AllocsPerRun(100, func() { selectedSink = d.WithSelected(entry) }); n != 1 {
		t.Errorf("%v allocations, want 1 (the list)", n)
	}
	other := &mcpreadyv1.Candidate{Entry: "x", RejectedAtStep: readiness.StepEligibility, RejectionCode: "c"}
	d.Candidates = []*mcpreadyv1.Candidate{other}
	if got := d.WithSelected("x")[0]; got == other || !got.GetSelected() || got.GetRejectionCode() != "c" || other.GetSelected() {
		t.Errorf("unadmitted candidate: %v (shared %v)", got, other)
	}
}
