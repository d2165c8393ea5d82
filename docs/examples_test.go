package docs

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// codeBlocks returns the fenced blocks of the given language in a Markdown file.
func codeBlocks(t *testing.T, path, lang string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var blocks []string
	var cur []string
	in := false
	for _, l := range strings.Split(string(data), "\n") {
		switch {
		case !in && strings.TrimSpace(l) == "```"+lang:
			in, cur = true, nil
		case in && strings.TrimSpace(l) == "```":
			in = false
			blocks = append(blocks, strings.Join(cur, "\n"))
		case in:
			cur = append(cur, l)
		}
	}
	return blocks
}

// TestExampleBlocksParse checks that every JSON example in the guides is
// valid JSON (client configurations are copied verbatim) and every YAML
// example is valid YAML.
func TestExampleBlocksParse(t *testing.T) {
	files, _ := filepath.Glob("*.md")
	files = append(files, "../README.md")
	n := 0
	for _, f := range files {
		for i, b := range codeBlocks(t, f, "json") {
			n++
			var v any
			if err := json.Unmarshal([]byte(b), &v); err != nil {
				t.Errorf("%s: json block %d: %v", f, i+1, err)
			}
		}
		for i, b := range codeBlocks(t, f, "yaml") {
			n++
			if _, err := yaml.YAMLToJSON([]byte(strings.ReplaceAll(b, "...", ""))); err != nil {
				t.Errorf("%s: yaml block %d: %v", f, i+1, err)
			}
		}
	}
	if n < 4 {
		t.Errorf("found only %d example blocks", n)
	}
}
