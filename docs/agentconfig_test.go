package docs

import (
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/mcpready/mcpready/agent/config"
)

// agentConfigKeys are the top-level keys of an agent configuration file.
var agentConfigKeys = map[string]bool{"principals": true, "defaultPrincipal": true, "upstreams": true, "receipts": true,
	"identityProvider": true, "socketPrincipals": true, "limits": true}

// agentConfig reports whether a block's top level is an agent
// configuration's: only agent configuration keys, and not a Policy's
// spec.principals alone (whose rules have no name).
func agentConfig(top map[string]any) bool {
	for k := range top {
		if !agentConfigKeys[k] {
			return false
		}
	}
	if ps, ok := top["principals"].([]any); ok && len(top) == 1 && len(ps) > 0 {
		p, _ := ps[0].(map[string]any)
		_, named := p["name"]
		return named
	}
	return true
}

// TestAgentConfigBlocksDecode: every YAML block of the guides written as
// (part of) an agent configuration file, one whose top-level keys are all
// agent configuration keys, decodes strictly as one (config.Decode): a
// setting the guides show is a setting the agent accepts, spelled as it
// accepts it. Values are not validated (the blocks name files that exist
// only on the reader's host).
func TestAgentConfigBlocksDecode(t *testing.T) {
	files, _ := filepath.Glob("*.md")
	n := 0
	for _, f := range files {
		for i, b := range codeBlocks(t, f, "yaml") {
			var top map[string]any
			if err := yaml.Unmarshal([]byte(b), &top); err != nil || len(top) == 0 {
				continue
			}
			if !agentConfig(top) {
				continue
			}
			n++
			if _, err := config.Decode([]byte(strings.ReplaceAll(b, "...", ""))); err != nil {
				t.Errorf("%s: yaml block %d is not an agent configuration: %v", f, i+1, err)
			}
		}
	}
	if n < 4 {
		t.Errorf("found only %d agent configuration blocks", n)
	}
}
