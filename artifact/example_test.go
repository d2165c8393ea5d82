package artifact_test

import (
	"fmt"

	"github.com/mcpready/mcpready/artifact"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
)

// Parse reads an authored artifact (YAML or JSON) strictly: unknown fields
// and unknown kinds are errors.
func ExampleParse() {
	obj, err := artifact.Parse([]byte(`
apiVersion: mcpready.dev/v1
kind: Policy
metadata: {name: example.org/default}
spec: {inventory: ["com.example/*"]}
`))
	if err != nil {
		panic(err)
	}
	p := obj.Spec.(*mcpreadyv1.Policy)
	fmt.Println(obj.Kind, obj.Metadata.Name, p.GetInventory())

	_, err = artifact.Parse([]byte(`{"apiVersion":"mcpready.dev/v1","kind":"Policy","metadata":{"name":"x"},"spec":{"inventroy":[]}}`))
	fmt.Println(err != nil)
	// Output:
	// Policy example.org/default [com.example/*]
	// true
}

// CanonicalJSON is the RFC 8785 form that is signed and digested: the same
// object always gives the same bytes, whatever order it was authored in.
func ExampleObject_CanonicalJSON() {
	a := artifact.New(artifact.KindPolicy, "example.org/p", &mcpreadyv1.Policy{Inventory: []string{"a/*"}, PolicyOwner: "platform"})
	b, _ := artifact.Parse([]byte(`{"spec":{"policyOwner":"platform","inventory":["a/*"]},"metadata":{"name":"example.org/p"},"kind":"Policy","apiVersion":"mcpready.dev/v1"}`))
	ca, _ := a.CanonicalJSON()
	cb, _ := b.CanonicalJSON()
	fmt.Println(string(ca) == string(cb))
	fmt.Println(artifact.Digest(ca) == artifact.Digest(cb))
	// Output:
	// true
	// true
}
