package artifact

import (
	"errors"
	"strings"
	"testing"
)

const methodsPolicy = `apiVersion: mcpready.dev/v1
kind: Policy
metadata: {name: p}
spec:
  principals:
  - principalClass: dev
    methods:
    - server: com.example/docs-*
      allow: [resources/read, resources/list, prompts/*, completion/complete]
      resources: ["file:///public/*"]
      prompts: [greet]
`

func TestMethodRules(t *testing.T) {
	if _, err := Parse([]byte(methodsPolicy)); err != nil {
		t.Fatalf("valid rule refused: %v", err)
	}
	for name, tc := range map[string]struct{ from, to, field string }{
		"no server":          {"server: com.example/docs-*", "server: ''", "server"},
		"unknown method":     {"resources/list,", "resources/delete,", "allow"},
		"tools are not here": {"resources/list,", "tools/call,", "allow"},
		"no grant":           {"allow: [resources/read, resources/list, prompts/*, completion/complete]", "allow: []", "allow"},
		"resources missing":  {`resources: ["file:///public/*"]`, "resources: []", "resources"},
		"prompts missing":    {"prompts: [greet]", "prompts: []", "prompts"},
		"empty pattern":      {"prompts: [greet]", "prompts: ['']", "prompts"},
		"control character":  {`resources: ["file:///public/*"]`, `resources: ["file:///public/\u0000"]`, "resources"},
		"too long":           {"prompts: [greet]", "prompts: [" + strings.Repeat("g", MaxMethodPattern+1) + "]", "prompts"},
		"completion of nothing": {`allow: [resources/read, resources/list, prompts/*, completion/complete]
      resources: ["file:///public/*"]
      prompts: [greet]`, "allow: [completion/complete]", "allow"},
	} {
		t.Run(name, func(t *testing.T) {
			doc := strings.Replace(methodsPolicy, tc.from, tc.to, 1)
			if doc == methodsPolicy {
				t.Fatal("the case changed nothing")
			}
			_, err := Parse([]byte(doc))
			var me *MethodRuleError
			if !errors.As(err, &me) || !errors.Is(err, ErrMethodRule) || !errors.Is(err, ErrInvalid) || me.Field != tc.field || me.Principal != 0 || me.Rule != 0 {
				t.Fatalf("got %v (%#v), want a MethodRuleError on %s", err, me, tc.field)
			}
		})
	}
}
