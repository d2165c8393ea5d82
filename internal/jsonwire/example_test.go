package jsonwire_test

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/mcpready/mcpready/internal/jsonwire"
)

// The agent refuses a tools/call whose arguments can be read two ways: a
// key given twice, also when spelt with an escape or in another case
// (encoding/json matches keys to fields ignoring case, so "Path" may
// fill the same field as "path").
func ExampleRepeatedKey() {
	for _, args := range []string{
		`{"path":"/srv/docs/readme.md","limit":20}`,
		`{"path":"/srv/docs/readme.md","path":"/etc/shadow"}`,
		`{"path":"/srv/docs/readme.md","Path":"/etc/shadow"}`,
		`{"path":"/srv/docs/readme.md","\u0070ath":"/etc/shadow"}`,
		`{"query":{"filter":{"tag":"a","TAG":"b"}}}`,
		`[{"id":1},{"id":2}]`, // the same key in two objects is fine
		`{"path":"/srv/docs/readme.md"`,
	} {
		err := jsonwire.RepeatedKey([]byte(args))
		fmt.Printf("%-56s ambiguous=%t %v\n", args, errors.Is(err, jsonwire.ErrRepeatedKey), err)
	}
	// Output:
	// {"path":"/srv/docs/readme.md","limit":20}                ambiguous=false <nil>
	// {"path":"/srv/docs/readme.md","path":"/etc/shadow"}      ambiguous=true json: an object has the same key twice (compared ignoring case)
	// {"path":"/srv/docs/readme.md","Path":"/etc/shadow"}      ambiguous=true json: an object has the same key twice (compared ignoring case)
	// {"path":"/srv/docs/readme.md","\u0070ath":"/etc/shadow"} ambiguous=true json: an object has the same key twice (compared ignoring case)
	// {"query":{"filter":{"tag":"a","TAG":"b"}}}               ambiguous=true json: an object has the same key twice (compared ignoring case)
	// [{"id":1},{"id":2}]                                      ambiguous=false <nil>
	// {"path":"/srv/docs/readme.md"                            ambiguous=false json: malformed value
}

// Unmarshal decodes as the go-sdk does: keys match fields exactly, and
// nothing may follow the value.
func ExampleUnmarshal() {
	type params struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	var p params
	err := jsonwire.Unmarshal([]byte(`{"name":"search","arguments":{"q":"etcd lease"}}`), &p)
	fmt.Printf("%q %s %v\n", p.Name, p.Arguments, err)

	// encoding/json would fill Name from "NAME"; jsonwire does not.
	var q, std params
	err = jsonwire.Unmarshal([]byte(`{"NAME":"delete_all"}`), &q)
	_ = json.Unmarshal([]byte(`{"NAME":"delete_all"}`), &std)
	fmt.Printf("jsonwire %q %v; encoding/json %q\n", q.Name, err, std.Name)

	err = jsonwire.Unmarshal([]byte(`{"name":"search"} {"name":"delete_all"}`), &p)
	fmt.Println(errors.Is(err, jsonwire.ErrTrailing), err)
	// Output:
	// "search" {"q":"etcd lease"} <nil>
	// jsonwire "" <nil>; encoding/json "delete_all"
	// true json: data after the value
}

// UnmarshalNumber keeps numbers exact, as a tool's output schema check
// needs: 2^53+1 does not survive a float64.
func ExampleUnmarshalNumber() {
	data := []byte(`{"id":9007199254740993,"ratio":0.25}`)
	var exact, float map[string]any
	if err := jsonwire.UnmarshalNumber(data, &exact); err != nil {
		panic(err)
	}
	if err := jsonwire.Unmarshal(data, &float); err != nil {
		panic(err)
	}
	fmt.Printf("%T %v\n", exact["id"], exact["id"])
	fmt.Printf("%T %.0f\n", float["id"], float["id"])
	// Output:
	// json.Number 9007199254740993
	// float64 9007199254740992
}
