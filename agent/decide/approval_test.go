package decide

import (
	"errors"
	"strings"
	"testing"

	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/readiness"
)

func paySnapshot(t testing.TB, rule *mcpreadyv1.ApprovalRule, rollback bool) *Snapshot {
	t.Helper()
	s, err := NewSnapshot(payInputs(rule, rollback))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// payInputs are paySnapshot's inputs: one state-changing tool com.example/pay/pay.
func payInputs(rule *mcpreadyv1.ApprovalRule, rollback bool) Inputs {
	e := newRegEntry("com.example/pay", "pay", "https://pay.example", "eu")
	e.SideEffect, e.RollbackSupported = stateCh, rollback
	return Inputs{PolicyVersion: "1", Policy: &mcpreadyv1.Policy{
		Inventory:   []string{"*"},
		Evidence:    &mcpreadyv1.EvidenceRules{OnUnknown: mcpreadyv1.UnknownEvidenceAction_UNKNOWN_EVIDENCE_ACTION_ALLOW},
		SideEffects: []*mcpreadyv1.SideEffectRule{{Match: "*/pay", Assigned: stateCh}},
		Principals:  []*mcpreadyv1.PrincipalRule{{PrincipalClass: "*", Allow: []string{"*"}}},
		Approvals:   []*mcpreadyv1.ApprovalRule{rule},
	}, Entries: map[string]*mcpreadyv1.RegistryEntry{"pay": e}}
}

// Approval above a value read from a declared argument path: below the
// threshold no approval is needed (so a client that cannot elicit may
// call), above it, or when the value is missing or not a number, it is.
// Before, aboveValue was ignored and every matching call needed approval.
func TestApprovalAboveValue(t *testing.T) {
	for _, path := range []string{"amount", "order.total"} {
		s := paySnapshot(t, &mcpreadyv1.ApprovalRule{Match: "*/pay", Required: true, AboveValue: 100, ValuePath: path}, false)
		wrap := func(v string) []byte {
			if path == "amount" {
				return []byte(`{"amount":` + v + `}`)
			}
			return []byte(`{"order":{"total":` + v + `}}`)
		}
		for _, tc := range []struct {
			args []byte
			need bool
		}{
			{wrap("50"), false}, {wrap("100"), false}, {wrap("100.01"), true}, {wrap(`"250"`), true},
			{wrap(`"lots"`), true}, {wrap("null"), true}, {[]byte(`{}`), true}, {nil, true}, {[]byte(`not json`), true},
		} {
			d := s.Decide(Request{Tool: "com.example/pay/pay", Principal: "p", Arguments: tc.args, Now: t0}, nil)
			if !tc.need {
				if d.Refusal != nil || d.Routes[0].ApprovalRequired {
					t.Fatalf("%s %s: refusal %v, want admitted without approval", path, tc.args, d.Refusal)
				}
				continue
			}
			var re *RefusalError
			if d.Refusal == nil || !errors.As(d.Refusal, &re) || re.Code != readiness.CodeApprovalUnavailable {
				t.Fatalf("%s %s without elicitation: %v, want approval_required_unavailable", path, tc.args, d.Refusal)
			}
			d = s.Decide(Request{Tool: "com.example/pay/pay", Principal: "p", Arguments: tc.args, Now: t0, ApprovalAvailable: true}, nil)
			if d.Refusal != nil || !d.Routes[0].ApprovalRequired {
				t.Fatalf("%s %s: approval not required", path, tc.args)
			}
		}
		// A listing has no arguments: the tool is shown.
		if vs := s.Visible(Request{Principal: "p", Now: t0}, nil); len(vs) != 1 {
			t.Fatalf("listing: %v", vs)
		}
	}
	// aboveValue without a valuePath cannot be read: every call needs
	// approval, and the snapshot warns.
	s := paySnapshot(t, &mcpreadyv1.ApprovalRule{Match: "*/pay", Required: true, AboveValue: 100}, false)
	if d := s.Decide(Request{Tool: "com.example/pay/pay", Principal: "p", Arguments: []byte(`{"amount":1}`), Now: t0, ApprovalAvailable: true}, nil); !d.Routes[0].ApprovalRequired {
		t.Fatal("aboveValue without valuePath waived approval")
	}
	if len(s.Warnings()) != 1 {
		t.Fatalf("warnings %v", s.Warnings())
	}
}

// A reversible rule covers only effects that cannot be undone: an entry
// that supports rollback is exempt, one that does not needs approval.
// Before, reversible was only shown to the approver.
func TestApprovalReversible(t *testing.T) {
	rule := &mcpreadyv1.ApprovalRule{Match: "*/pay", Required: true, Reversible: true}
	for _, rollback := range []bool{true, false} {
		d := paySnapshot(t, rule, rollback).Decide(Request{Tool: "com.example/pay/pay", Principal: "p", Now: t0, ApprovalAvailable: true}, nil)
		if d.Refusal != nil || d.Routes[0].ApprovalRequired == rollback || d.Routes[0].Reversible != rollback {
			t.Fatalf("rollback %v: approval %v reversible %v", rollback, d.Routes[0].ApprovalRequired, d.Routes[0].Reversible)
		}
	}
}

func BenchmarkDecideAboveValue(b *testing.B) {
	s := paySnapshot(b, &mcpreadyv1.ApprovalRule{Match: "*/pay", Required: true, AboveValue: 100, ValuePath: "amount"}, false)
	req := Request{Tool: "com.example/pay/pay", Principal: "p", Arguments: []byte(`{"amount":50,"memo":"x"}`), Now: t0}
	for b.Loop() {
		if d := s.Decide(req, nil); d.Refusal != nil {
			b.Fatal(d.Refusal)
		}
	}
}

// FuzzAboveValue: any arguments either need approval or are a number at
// the path not above the threshold; the check never panics.
func FuzzAboveValue(f *testing.F) {
	f.Add([]byte(`{"amount":50}`))
	f.Add([]byte(`{"amount":"1e400"}`))
	f.Add([]byte(`{"amount":{"x":1}}`))
	f.Add([]byte(`[1,2]`))
	s := paySnapshot(f, &mcpreadyv1.ApprovalRule{Match: "*/pay", Required: true, AboveValue: 100, ValuePath: "amount"}, false)
	f.Fuzz(func(t *testing.T, args []byte) {
		d := s.Decide(Request{Tool: "com.example/pay/pay", Principal: "p", Arguments: args, Now: t0}, nil)
		if d.Refusal == nil {
			v, ok := number(lookup(decodeArgs(args), []string{"amount"}))
			if !ok || v > 100 {
				t.Fatalf("%q admitted without approval", args)
			}
		}
	})
}

// The provider's word that a tool needs a human's confirmation
// (Declaration tools[].humanConfirmation) is enforced: "required" makes
// every call need approval; "required-above-value" leaves it to the
// policy's value rule for the tool, and needs approval on every call
// without one; "none" (or nothing) changes nothing; any other value is
// taken as required and warned of. Before, the field was accepted and
// ignored: a call of a tool its provider said must be confirmed ran
// unasked.
func TestDeclaredHumanConfirmation(t *testing.T) {
	valueRule := &mcpreadyv1.ApprovalRule{Match: "*/pay", Required: true, AboveValue: 100, ValuePath: "amount"}
	other := &mcpreadyv1.ApprovalRule{Match: "*/other", Required: true}
	for _, tc := range []struct {
		hc      string
		rule    *mcpreadyv1.ApprovalRule
		args    string
		need    bool
		warning bool
	}{
		{"required", other, `{"amount":1}`, true, false},
		{"required-above-value", other, `{"amount":1}`, true, false},
		{"required-above-value", valueRule, `{"amount":50}`, false, false},
		{"required-above-value", valueRule, `{"amount":500}`, true, false},
		{"", other, `{"amount":1}`, false, false},
		{"none", other, `{"amount":1}`, false, false},
		{"sometimes", other, `{"amount":1}`, true, true},
	} {
		in := payInputs(tc.rule, false)
		in.Declarations = map[string]*mcpreadyv1.Declaration{"com.example/pay": {ServerName: "com.example/pay",
			Tools: []*mcpreadyv1.DeclaredTool{{Name: "pay", SideEffect: stateCh, HumanConfirmation: tc.hc}}}}
		s, err := NewSnapshot(in)
		if err != nil {
			t.Fatal(err)
		}
		d := s.Decide(Request{Tool: "com.example/pay/pay", Principal: "p", Arguments: []byte(tc.args), Now: t0, ApprovalAvailable: true}, nil)
		if d.Refusal != nil || d.Routes[0].ApprovalRequired != tc.need {
			t.Errorf("humanConfirmation %q, args %s: refusal %v, approval %v, want %v", tc.hc, tc.args, d.Refusal, d.Routes[0].ApprovalRequired, tc.need)
		}
		warned := false
		for _, w := range s.Warnings() {
			warned = warned || strings.Contains(w, "humanConfirmation")
		}
		if warned != tc.warning {
			t.Errorf("humanConfirmation %q: warnings %q", tc.hc, s.Warnings())
		}
	}
}
