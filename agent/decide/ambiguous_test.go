package decide

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/readiness"
)

// "<server>/<tool>" names one tool only when the pair is the only one that
// spells it: server "com.example/files" with tool "delete" and server
// "com.example" with tool "files/delete" (tool names may contain '/')
// both spell com.example/files/delete. Before, the two were grouped as
// one tool's routes, each the other's fallback, so a call meant for one
// server could run on the other. Now the name is refused, not listed, and
// the snapshot warns.
func TestAmbiguousExactName(t *testing.T) {
	in := fixture()
	in.Entries["files"] = newRegEntry("com.example/files", "delete", "https://files.example/mcp", "eu")
	in.Entries["root"] = newRegEntry("com.example", "files/delete", "https://root.example/mcp", "eu")
	in.Entries["files-2"] = newRegEntry("com.example/files", "list", "https://files.example/mcp", "eu")
	in.Entries["files-3"] = newRegEntry("com.example/files", "list", "https://files2.example/mcp", "eu")
	s := snap(t, in)
	req := baseReq()
	req.Tool = "com.example/files/delete"
	d := s.Decide(req, nil)
	var re *RefusalError
	if !errors.As(d.Refusal, &re) || re.Code != readiness.CodeAmbiguousTool || re.Step != readiness.StepResolve || len(d.Routes) != 0 {
		t.Fatalf("refusal %v, routes %v", d.Refusal, routeNames(d))
	}
	for _, want := range []string{`server "com.example/files" tool "delete"`, `server "com.example" tool "files/delete"`} {
		if !strings.Contains(re.Reason, want) {
			t.Errorf("reason %q lacks %s", re.Reason, want)
		}
	}
	if !slices.ContainsFunc(s.Warnings(), func(w string) bool { return strings.Contains(w, "com.example/files/delete") }) {
		t.Errorf("warnings %q", s.Warnings())
	}
	for _, v := range s.Visible(listReq("dev", "acme", "eu", "wf"), nil) {
		if v.Name == "com.example/files/delete" {
			t.Errorf("listed %+v", v)
		}
	}
	// Entries of one pair on two endpoints are still each other's fallback.
	req.Tool = "com.example/files/list"
	if d := s.Decide(req, nil); d.Refusal != nil || len(d.Routes) != 2 {
		t.Fatalf("one tool on two endpoints: refusal %v, routes %v", d.Refusal, routeNames(d))
	}
}

// A class named like an exact tool's "<server>/<tool>" takes the name: a
// call to it runs the class's members. The snapshot warns of it.
func TestClassShadowsExactName(t *testing.T) {
	in := fixture()
	in.Policy.EquivalenceClasses = append(in.Policy.EquivalenceClasses,
		&mcpreadyv1.EquivalenceClass{Name: "com.example/tickets/create", Members: []string{"com.example/docs/docs.lookup"}})
	s := snap(t, in)
	if !slices.ContainsFunc(s.Warnings(), func(w string) bool {
		return strings.Contains(w, `"com.example/tickets/create" is the name of an equivalence class`)
	}) {
		t.Errorf("warnings %q", s.Warnings())
	}
	if w := snap(t, fixture()).Warnings(); slices.ContainsFunc(w, func(w string) bool { return strings.Contains(w, "equivalence class") }) {
		t.Errorf("warnings without a shadowed name: %q", w)
	}
}

// A class whose candidates declare different input schemas is warned of
// once, with the snapshot: the front neither lists it nor lets it be
// called where more than one of them is visible (front
// TestAggregateClassSchema), and used to log that on every listing.
func TestMixedSchemaClassWarned(t *testing.T) {
	in := fixture()
	names := slices.Sorted(maps.Keys(in.Entries))
	first, other := names[0], names[1]
	for i, name := range []string{first, other} {
		e := proto.Clone(in.Entries[name]).(*mcpreadyv1.RegistryEntry)
		e.Identity.InputSchemaDigest = fmt.Sprintf("sha256:%064d", i)
		in.Entries[name] = e
	}
	key := func(name string) string {
		id := in.Entries[name].GetIdentity()
		return id.GetServerName() + "/" + id.GetToolName()
	}
	in.Policy.EquivalenceClasses = append(in.Policy.EquivalenceClasses,
		&mcpreadyv1.EquivalenceClass{Name: "mixed", Members: []string{key(first), key(other)}})
	w := snap(t, in).Warnings()
	if !slices.ContainsFunc(w, func(w string) bool {
		return strings.Contains(w, `equivalence class "mixed"`) && strings.Contains(w, first) && strings.Contains(w, other)
	}) {
		t.Errorf("warnings %q", w)
	}
	if w := snap(t, fixture()).Warnings(); slices.ContainsFunc(w, func(w string) bool { return strings.Contains(w, "schemas differ") }) {
		t.Errorf("warnings of the fixture's classes: %q", w)
	}
}
