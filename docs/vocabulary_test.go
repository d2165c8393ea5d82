package docs

import (
	"fmt"
	"strings"
	"testing"

	"github.com/mcpready/mcpready/readiness"
)

const (
	beginVocabulary = "<!-- BEGIN GENERATED: vocabulary (go test ./docs -update) -->"
	endVocabulary   = "<!-- END GENERATED: vocabulary -->"
)

// generateVocabulary renders readiness.Terms: the decision steps, rejection
// codes, executor actions and outcomes receipts and tool errors record.
func generateVocabulary() string {
	var b strings.Builder
	b.WriteString(beginVocabulary + "\n")
	for _, k := range []struct {
		kind  readiness.Kind
		title string
	}{
		{readiness.KindStep, "Decision steps (`candidates.rejectedAtStep`)"},
		{readiness.KindCode, "Rejection codes (`candidates.rejectionCode`, and the code of a refused call's tool error)"},
		{readiness.KindAction, "Executor actions (`actions.kind`)"},
		{readiness.KindOutcome, "Outcomes (`outcome`, `attempts.outcome`)"},
	} {
		fmt.Fprintf(&b, "\n#### %s\n\n", k.title)
		if k.kind == readiness.KindCode {
			b.WriteString("| code | recorded at step | meaning |\n|---|---|---|\n")
		} else {
			b.WriteString("| name | value | meaning |\n|---|---|---|\n")
		}
		for _, t := range readiness.Terms() {
			if t.Kind != k.kind {
				continue
			}
			if k.kind == readiness.KindCode {
				step := "-"
				if t.Step != readiness.StepNone {
					step = readiness.StepName(t.Step)
				}
				fmt.Fprintf(&b, "| `%s` | %s | %s |\n", t.Name, step, t.Description)
			} else {
				fmt.Fprintf(&b, "| `%s` | %d | %s |\n", t.Name, t.Value, t.Description)
			}
		}
	}
	b.WriteString("\n" + endVocabulary)
	return b.String()
}

func TestReferenceVocabularyUpToDate(t *testing.T) {
	checkSection(t, beginVocabulary, endVocabulary, generateVocabulary(), "the vocabulary tables")
}
