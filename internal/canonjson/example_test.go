package canonjson_test

import (
	"fmt"

	"github.com/mcpready/mcpready/internal/canonjson"
)

// Two encodings of one statement, with members in another order,
// whitespace and escapes, have one canonical form (RFC 8785): what is
// hashed and signed.
func ExampleTransform() {
	a := []byte(`{"name":"com.example/docs","version":"1.4.2","labels":{"tier":"gold","region":"eu"}}`)
	b := []byte(`{
		"labels": {"region": "eu", "tier": "gold"},
		"version": "1.4.2",
		"name": "com.example\/docs"
	}`)
	ca, err := canonjson.Transform(a)
	if err != nil {
		panic(err)
	}
	cb, err := canonjson.Transform(b)
	if err != nil {
		panic(err)
	}
	fmt.Println(string(ca))
	fmt.Println(string(ca) == string(cb))

	// Numbers take their shortest form; keys sort by UTF-16 code units.
	c, _ := canonjson.Transform([]byte(`{"z":1.50,"é":1e3,"a":-0.0,"B":10000000000000000000000}`))
	fmt.Println(string(c))

	_, err = canonjson.Transform([]byte(`{"name":}`))
	fmt.Println(err)
	// Output:
	// {"labels":{"region":"eu","tier":"gold"},"name":"com.example/docs","version":"1.4.2"}
	// true
	// {"B":1e+22,"a":0,"z":1.5,"é":1000}
	// invalid JSON: missing value (at byte 8)
}

// Append reuses one buffer across values, as the agent's receipt builder
// does.
func ExampleAppend() {
	var buf []byte
	for _, v := range []string{`{"b":2,"a":1}`, `[3, {"y":true,"x":null}]`} {
		var err error
		buf, err = canonjson.Append(buf[:0], []byte(v))
		if err != nil {
			panic(err)
		}
		fmt.Println(string(buf))
	}
	// Output:
	// {"a":1,"b":2}
	// [3,{"x":null,"y":true}]
}
