package prober_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/mcpready/mcpready/prober"
)

func TestParseCanaries(t *testing.T) {
	cs, err := prober.ParseCanaries([]byte(`
- server: com.example/docs
  tool: search
  inputClass: long-query
  arguments: {query: "a long secret query", limit: 3}
- {"server": "com.example/docs", "tool": "search", "inputClass": "bulk", "arguments": {}}
`))
	if err != nil || len(cs) != 2 || cs[0].Arguments["query"] != "a long secret query" || cs[0].Arguments["limit"] != float64(3) || cs[1].InputClass != "bulk" {
		t.Fatalf("%+v %v", cs, err)
	}
	if cs, err := prober.ParseCanaries([]byte(" \n")); err != nil || cs != nil {
		t.Fatalf("an empty file: %v %v", cs, err)
	}
	const secret = "s3cret-argument"
	for name, file := range map[string]string{
		"not a list":         `{server: a}`,
		"second document":    "- {server: a, tool: t, inputClass: c, arguments: {}}\n---\n- {server: b, tool: t, inputClass: c, arguments: {}}\n",
		"unknown field":      `[{server: a, tool: t, inputClass: c, arguments: {}, extra: 1}]`,
		"repeated key":       `[{server: a, server: b, tool: t, inputClass: c, arguments: {}}]`,
		"no server":          `[{tool: t, inputClass: c, arguments: {q: ` + secret + `}}]`,
		"no tool":            `[{server: a, inputClass: c, arguments: {}}]`,
		"no class":           `[{server: a, tool: t, arguments: {q: ` + secret + `}}]`,
		"bad class":          `[{server: a, tool: t, inputClass: "Long Query", arguments: {q: ` + secret + `}}]`,
		"no arguments":       `[{server: a, tool: t, inputClass: c}]`,
		"arguments a list":   `[{server: a, tool: t, inputClass: c, arguments: [1]}]`,
		"arguments a number": `[{server: a, tool: t, inputClass: c, arguments: 1234567}]`,
		"server a number":    `[{server: 1234567, tool: t, inputClass: c, arguments: {}}]`,
		"same class twice":   `[{server: a, tool: t, inputClass: c, arguments: {}}, {server: a, tool: u, inputClass: c, arguments: {q: ` + secret + `}}]`,
		"not YAML":           "- server: [",
	} {
		_, err := prober.ParseCanaries([]byte(file))
		if !errors.Is(err, prober.ErrCanary) {
			t.Errorf("%s: %v, want ErrCanary", name, err)
		} else if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), "1234567") {
			t.Errorf("%s: the error quotes the arguments: %v", name, err)
		}
	}
}

func FuzzParseCanaries(f *testing.F) {
	f.Add([]byte(`[{server: a, tool: t, inputClass: c, arguments: {q: 1}}]`))
	f.Add([]byte(`- {server: a, tool: t, inputClass: c, arguments: {}}`))
	f.Add([]byte(`[{"server":"a","tool":"t","inputClass":"c","arguments":{"q":[1,{"x":null}]}}]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		cs, err := prober.ParseCanaries(data)
		if err != nil {
			if !errors.Is(err, prober.ErrCanary) || cs != nil {
				t.Fatalf("%v with %v", err, cs)
			}
			return
		}
		for _, c := range cs {
			if c.Server == "" || c.Tool == "" || c.InputClass == "" || c.Arguments == nil {
				t.Fatalf("accepted %+v", c)
			}
		}
	})
}
