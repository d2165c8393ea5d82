package pipeline

import (
	"context"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/mcpready/mcpready/agent/decide"
	"github.com/mcpready/mcpready/agent/internal/mcptest"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/readiness"
)

// The receipt records how the agent authenticated to the route's upstream
// (Options.AuthClass), and evidence observed under another auth class does
// not admit the route: success seen without a credential says nothing of a
// call that presents one. Before, the receipt named the entry's qualified
// credential mode, and evidence counted for every auth class.
func TestAuthClass(t *testing.T) {
	up := mcptest.New(t, mcptest.Options{})
	for _, tc := range []struct {
		name, evidence string
		admitted       bool
	}{
		{"same auth class", readiness.AuthBearer, true},
		{"other auth class", readiness.AuthKeyless, false},
		{"none stated", "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := policy()
			p.Evidence.OnUnknown = mcpreadyv1.UnknownEvidenceAction_UNKNOWN_EVIDENCE_ACTION_DENY
			now := time.Now()
			ev := &mcpreadyv1.Evidence{AuthClass: tc.evidence, ObservedAt: timestamppb.New(now), ExpiresAt: timestamppb.New(now.Add(time.Hour)),
				Subject: &mcpreadyv1.Subject{ServerName: "a", ServerVersion: "1.0.0", ToolName: "echo"}}
			snap, err := decide.NewSnapshot(decide.Inputs{PolicyVersion: "1", Policy: p,
				Entries: map[string]*mcpreadyv1.RegistryEntry{"a": entry("a", up.URL)}, Evidence: map[string]*mcpreadyv1.Evidence{"ev": ev}})
			if err != nil {
				t.Fatal(err)
			}
			var asked []string
			out := &sink{}
			pl := New(Options{Emit: out.emit, AuthClass: func(server, endpoint string) string {
				asked = append(asked, server+" "+endpoint)
				return readiness.AuthBearer
			}})
			res := pl.Call(context.Background(), State{Decide: snap}, request("a/echo"), newFake(t))
			rec := res.Receipt
			if admitted := rec.GetOutcome() == mcpreadyv1.OutcomeClass_OUTCOME_CLASS_SUCCESS; admitted != tc.admitted {
				t.Fatalf("outcome %v (candidates %v), want admitted=%v", rec.GetOutcome(), rec.GetCandidates(), tc.admitted)
			}
			if !tc.admitted {
				if c := rec.GetCandidates(); len(c) != 1 || readiness.Code(c[0].GetRejectionCode()) != readiness.CodeEvidenceUnknown {
					t.Fatalf("candidates %v, want refused as %s", c, readiness.CodeEvidenceUnknown)
				}
				return
			}
			if rec.GetAuthClass() != readiness.AuthBearer {
				t.Fatalf("receipt auth class %q, want %q", rec.GetAuthClass(), readiness.AuthBearer)
			}
			if len(asked) == 0 || asked[len(asked)-1] != "a "+up.URL {
				t.Fatalf("auth class asked for %q, want the route's server and endpoint", asked)
			}
		})
	}
}

// A receipt records the input class of the call's arguments for the route
// that ran (Policy.inputClasses), so that passive evidence is kept per
// class; a call in no class records none.
func TestInputClassRecorded(t *testing.T) {
	up := mcptest.New(t, mcptest.Options{})
	p := policy()
	p.InputClasses = []*mcpreadyv1.InputClassRule{{Name: "long-text", Tools: "a/*", When: "size(args.text) > 5"}}
	snap, err := decide.NewSnapshot(decide.Inputs{PolicyVersion: "1", Policy: p, Entries: map[string]*mcpreadyv1.RegistryEntry{"a": entry("a", up.URL)}})
	if err != nil {
		t.Fatal(err)
	}
	pl := New(Options{Emit: (&sink{}).emit})
	for args, want := range map[string]string{`{"text":"a longer text"}`: "long-text", `{"text":"hi"}`: ""} {
		req := request("a/echo")
		req.Arguments = []byte(args)
		rec := pl.Call(context.Background(), State{Decide: snap}, req, newFake(t)).Receipt
		if rec.GetOutcome() != mcpreadyv1.OutcomeClass_OUTCOME_CLASS_SUCCESS || rec.GetInputClass() != want {
			t.Fatalf("arguments %s: outcome %v, input class %q, want %q", args, rec.GetOutcome(), rec.GetInputClass(), want)
		}
	}
}
