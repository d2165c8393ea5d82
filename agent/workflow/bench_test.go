package workflow

import (
	"strconv"
	"testing"

	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
)

// BenchmarkAdmitNote is what workflow tracking adds to one call that
// names a workflow: Admit before the decision, Note after the answer
// (the open workflow already exists; each iteration is one call; past
// the first 512 calls of a workflow Note only counts).
func BenchmarkAdmitNote(b *testing.B) {
	tr := New(Options{})
	rec := call("R1", "docs-b", mcpreadyv1.OutcomeClass_OUTCOME_CLASS_SUCCESS, 2, true)
	ids := make([]string, 64)
	for i := range ids {
		ids[i] = "wf-" + strconv.Itoa(i)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		id := ids[i%len(ids)]
		if err := tr.Admit(alice, id); err != nil {
			b.Fatal(err)
		}
		tr.Note(alice, id, rec)
	}
}

// BenchmarkReport is one accepted report of a workflow of 8 calls,
// parsing included (no Ledger: the spool's fsync is measured elsewhere).
func BenchmarkReport(b *testing.B) {
	tr := New(Options{})
	rec := call("R1", "docs-b", mcpreadyv1.OutcomeClass_OUTCOME_CLASS_SUCCESS, 2, true)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		id := "wf-" + strconv.Itoa(i)
		_ = tr.Admit(alice, id)
		for range 8 {
			tr.Note(alice, id, rec)
		}
		if _, _, err := tr.Report(alice, []byte(`{"workflow":"`+id+`","state":"completed"}`)); err != nil {
			b.Fatal(err)
		}
	}
}
