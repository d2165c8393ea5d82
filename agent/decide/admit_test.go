package decide

import (
	"slices"
	"testing"

	"github.com/mcpready/mcpready/readiness"
)

// TestListAndCallAgree: for every rejection step (each case of
// rejectionCases), a candidate is listed by Visible exactly when a call
// admits it, for every class and exact tool, so a client is never shown a
// tool it cannot call or the reverse. The two per-call facts Visible takes
// at their most permissive (an idempotency key, no caller deadline of its
// own) are given to the call in the same way.
func TestListAndCallAgree(t *testing.T) {
	for _, tc := range rejectionCases() {
		t.Run(tc.name, func(t *testing.T) {
			in := fixture()
			req := baseReq()
			tc.mutate(&in, &req)
			s := snap(t, in)
			listed := map[string][]string{}
			for _, v := range s.Visible(req, tc.h) {
				listed[v.Name] = v.Entries
			}
			req.IdempotencyKey, req.Deadline = true, 0
			rejected := false
			for _, name := range slices.Concat(s.classNames, s.exactNames) {
				req.Tool = name
				d := s.Decide(req, tc.h)
				for _, c := range d.Candidates {
					admitted := c.GetRejectedAtStep() == readiness.StepNone
					if shown := slices.Contains(listed[name], c.GetEntry()); shown != admitted {
						t.Errorf("%s: entry %s listed %v, admitted by a call %v (%s)", name, c.GetEntry(), shown, admitted, c.GetRejectionCode())
					}
					rejected = rejected || (c.GetEntry() == tc.entry && readiness.Code(c.GetRejectionCode()) == tc.code)
				}
				if (d.Refusal == nil) != (len(listed[name]) > 0) {
					t.Errorf("%s: listed %v, refusal %v", name, listed[name], d.Refusal)
				}
			}
			if !rejected && tc.code != readiness.CodeIdempotencyRequired && tc.name != "deadline budget" {
				t.Errorf("the case did not reject %s with %s", tc.entry, tc.code)
			}
		})
	}
}
