package artifact

import (
	"slices"
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"
)

// Status says what mcpready does with one artifact field.
type Status int

const (
	// Enforced: the field changes what the agent or the control plane
	// does (admission, routing, verification, lifecycle), and a test shows it.
	Enforced Status = iota + 1
	// NotEnforced: the field reads like a rule but nothing acts on it yet.
	// Setting it makes apply and the agent warn.
	NotEnforced
	// Record: the field is recorded, shown or hashed and is not meant to
	// change a decision (contacts, receipt contents, measurements kept
	// for audit). It is not enforced and setting it is not warned about.
	Record
)

func (s Status) String() string {
	switch s {
	case Enforced:
		return "enforced"
	case NotEnforced:
		return "not enforced"
	case Record:
		return "record only"
	}
	return "unclassified"
}

// Rule classifies one field: its status, the package that acts on it
// (for Enforced) and a note for the reference.
type Rule struct {
	Status Status
	// Where is the package that enforces the field, e.g. "agent/decide".
	Where string
	Note  string
}

// FieldRule is one row of the enforcement table.
type FieldRule struct {
	// Path is the field's protobuf JSON path inside spec, with repeated
	// and map fields written like singular ones ("retry.maxAttempts",
	// "keys.kinds").
	Path string
	Rule
}

// Enforcement returns the rule of every field of kind k's spec, in proto
// declaration order, depth first. A field the table does not classify is
// returned with Status 0 (the tests fail on it).
func Enforcement(k Kind) []FieldRule {
	spec := k.NewSpec()
	if spec == nil {
		return nil
	}
	var out []FieldRule
	walkFields(spec.ProtoReflect().Descriptor(), "", func(path string) {
		out = append(out, FieldRule{Path: path, Rule: enforcement[k][path]})
	})
	return out
}

// RuleFor returns the rule of one field path of kind k.
func RuleFor(k Kind, path string) (Rule, bool) {
	r, ok := enforcement[k][path]
	return r, ok
}

// Unenforced returns the paths of the fields o's spec sets that are
// NotEnforced, sorted and without repeats. An object whose spec is nil
// sets nothing.
func Unenforced(o *Object) []string {
	if o == nil || o.Spec == nil {
		return nil
	}
	var out []string
	visitSet(o.Spec.ProtoReflect(), "", func(path string) {
		if enforcement[o.Kind][path].Status == NotEnforced {
			out = append(out, path)
		}
	})
	slices.Sort(out)
	return slices.Compact(out)
}

// isOwnMessage reports whether fd (or a map's value) is one of mcpready's
// messages, whose fields are classified one by one; other messages
// (timestamps, durations) are leaves.
func isOwnMessage(fd protoreflect.FieldDescriptor) (protoreflect.MessageDescriptor, bool) {
	if fd.IsMap() {
		fd = fd.MapValue()
	}
	if fd.Kind() != protoreflect.MessageKind && fd.Kind() != protoreflect.GroupKind {
		return nil, false
	}
	md := fd.Message()
	return md, strings.HasPrefix(string(md.FullName()), "mcpready.")
}

// walkFields calls leaf with the path of every leaf field under md.
func walkFields(md protoreflect.MessageDescriptor, prefix string, leaf func(path string)) {
	fields := md.Fields()
	for i := 0; i < fields.Len(); i++ {
		fd := fields.Get(i)
		path := prefix + fd.JSONName()
		if sub, ok := isOwnMessage(fd); ok {
			walkFields(sub, path+".", leaf)
			continue
		}
		leaf(path)
	}
}

// visitSet calls leaf with the path of every leaf field set in m.
func visitSet(m protoreflect.Message, prefix string, leaf func(path string)) {
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		path := prefix + fd.JSONName()
		if _, ok := isOwnMessage(fd); !ok {
			leaf(path)
			return true
		}
		switch {
		case fd.IsList():
			for i := 0; i < v.List().Len(); i++ {
				visitSet(v.List().Get(i).Message(), path+".", leaf)
			}
		case fd.IsMap():
			v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
				visitSet(mv.Message(), path+".", leaf)
				return true
			})
		default:
			visitSet(v.Message(), path+".", leaf)
		}
		return true
	})
}

// Unclassified lists "Kind spec.path" for every field of every kind that
// the table does not classify, and every table row that names no field.
func Unclassified() []string {
	var out []string
	for _, k := range Kinds() {
		known := map[string]bool{}
		for _, f := range Enforcement(k) {
			known[f.Path] = true
			if f.Status == 0 {
				out = append(out, string(k)+" "+f.Path+": not classified")
			}
		}
		for p := range enforcement[k] {
			if !known[p] {
				out = append(out, string(k)+" "+p+": no such field")
			}
		}
	}
	slices.Sort(out)
	return out
}
