package decide

import (
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
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
