package pipeline

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpready/mcpready/agent/circuit"
	"github.com/mcpready/mcpready/agent/config"
	"github.com/mcpready/mcpready/agent/decide"
	"github.com/mcpready/mcpready/agent/internal/mcptest"
	"github.com/mcpready/mcpready/agent/upstream"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/readiness"
)

// fake is a Transport over a real upstream pool: it dials exactly the
// target it is given and records the dials and approval questions.
type fake struct {
	pool    *upstream.Pool
	mu      sync.Mutex
	dialled []string // endpoints
	asked   []string // entries
	prompts []string // approval questions
	approve bool
}

func newFake(t testing.TB) *fake {
	f := &fake{}
	f.pool = upstream.NewPool(upstream.Options{Resolve: func(tg upstream.Target) (config.Upstream, bool) {
		return config.Upstream{Name: tg.Server, URL: tg.Endpoint}, tg.Endpoint != ""
	}})
	t.Cleanup(f.pool.Close)
	return f
}

func (f *fake) Dial(ctx context.Context, t upstream.Target) (*upstream.Session, error) {
	f.mu.Lock()
	f.dialled = append(f.dialled, t.Endpoint)
	f.mu.Unlock()
	return f.pool.Shared(ctx, t)
}

func (f *fake) Call(ctx context.Context, up *upstream.Session, params *mcp.CallToolParams) (upstream.Result, any, error) {
	res, err := up.Call(ctx, params)
	return res, nil, err
}

func (f *fake) Approve(_ context.Context, r decide.Route) (bool, any, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked = append(f.asked, r.Entry)
	f.prompts = append(f.prompts, r.ApprovalPrompt)
	return f.approve, nil, nil
}

func entry(server, endpoint string) *mcpreadyv1.RegistryEntry {
	return &mcpreadyv1.RegistryEntry{
		Identity: &mcpreadyv1.ToolIdentity{ServerName: server, ServerVersion: "1.0.0", ToolName: "echo", Endpoint: endpoint, ProtocolVersion: "2025-11-25"},
		State:    mcpreadyv1.LifecycleState_LIFECYCLE_STATE_QUALIFIED,
	}
}

func policy() *mcpreadyv1.Policy {
	return &mcpreadyv1.Policy{
		Inventory:          []string{"*"},
		Evidence:           &mcpreadyv1.EvidenceRules{OnUnknown: mcpreadyv1.UnknownEvidenceAction_UNKNOWN_EVIDENCE_ACTION_ALLOW},
		SideEffects:        []*mcpreadyv1.SideEffectRule{{Match: "*/echo", Assigned: mcpreadyv1.SideEffectClass_SIDE_EFFECT_CLASS_READ_ONLY}},
		Principals:         []*mcpreadyv1.PrincipalRule{{PrincipalClass: "dev", Allow: []string{"*"}}},
		EquivalenceClasses: []*mcpreadyv1.EquivalenceClass{{Name: "echo_any", Members: []string{"*/echo"}, FallbackAllowed: true}},
	}
}

type sink struct {
	mu   sync.Mutex
	recs []*mcpreadyv1.Receipt
}

func (s *sink) emit(r *mcpreadyv1.Receipt) { s.mu.Lock(); s.recs = append(s.recs, r); s.mu.Unlock() }

func setup(t testing.TB, p *mcpreadyv1.Policy, entries map[string]*mcpreadyv1.RegistryEntry) (*Pipeline, State, *sink) {
	t.Helper()
	snap, err := decide.NewSnapshot(decide.Inputs{PolicyVersion: "1", Policy: p, Entries: entries})
	if err != nil {
		t.Fatal(err)
	}
	out := &sink{}
	return New(Options{Region: "eu", Emit: out.emit}), State{Decide: snap, Circuits: circuit.NewSet(circuit.Config{})}, out
}

func request(tool string) Request {
	return Request{Requested: tool, Tool: tool, Caller: Caller{Name: "c", Principal: "dev"}, Arguments: []byte(`{"text":"hi"}`)}
}

// Two entries name the same server with different endpoints and only B is
// admitted: the pipeline dials B's endpoint, and the receipt names it.
func TestCallDialsRouteEndpoint(t *testing.T) {
	upA, upB := mcptest.New(t, mcptest.Options{}), mcptest.New(t, mcptest.Options{})
	p := policy()
	p.Inventory = []string{"b"}
	pl, st, out := setup(t, p, map[string]*mcpreadyv1.RegistryEntry{"a": entry("test", upA.URL), "b": entry("test", upB.URL)})
	tr := newFake(t)
	res := pl.Call(context.Background(), st, request("test/echo"), tr)
	if res.Answer == nil || res.Answer.IsError {
		t.Fatalf("answer %+v", res.Answer)
	}
	if !slices.Equal(tr.dialled, []string{upB.URL}) || upA.Hits() != 0 {
		t.Fatalf("dialled %v (A hit %d times), want only B %s", tr.dialled, upA.Hits(), upB.URL)
	}
	if len(out.recs) != 1 || out.recs[0].GetSelected().GetEndpoint() != upB.URL || out.recs[0].GetSelected().GetEntry() != "b" {
		t.Fatalf("receipts %v", out.recs)
	}
}

// A fallback route that requires approval is asked about before its first
// attempt; a refusal ends the call there, an approval runs it.
func TestApprovalPerRoute(t *testing.T) {
	for _, grant := range []bool{false, true} {
		upA, upB := mcptest.New(t, mcptest.Options{}), mcptest.New(t, mcptest.Options{})
		upA.SetFault(mcptest.FaultServerError, "tools/call")
		b := entry("other", upB.URL)
		b.ApprovalRequired = true
		pl, st, out := setup(t, policy(), map[string]*mcpreadyv1.RegistryEntry{"a": entry("test", upA.URL), "b": b})
		tr := newFake(t)
		tr.approve = grant
		req := request("echo_any")
		req.Caller.Elicit = true
		res := pl.Call(context.Background(), st, req, tr)
		if !slices.Equal(tr.asked, []string{"b"}) {
			t.Fatalf("grant %v: asked %v, want [b]", grant, tr.asked)
		}
		rec := out.recs[len(out.recs)-1]
		if !grant {
			te, ok := ParseToolError(res.Answer)
			if !ok || te.Outcome != "APPROVAL_DENIED" || te.Code != string(readiness.CodeApprovalDenied) || slices.Contains(tr.dialled, upB.URL) {
				t.Fatalf("declined: %+v dialled %v", te, tr.dialled)
			}
			if rec.GetApproval() != mcpreadyv1.ApprovalState_APPROVAL_STATE_DENIED {
				t.Fatalf("approval state %v", rec.GetApproval())
			}
			continue
		}
		if res.Answer.IsError || rec.GetSelected().GetEntry() != "b" || rec.GetApproval() != mcpreadyv1.ApprovalState_APPROVAL_STATE_APPROVED {
			t.Fatalf("approved: %+v selected %v approval %v", res.Answer, rec.GetSelected(), rec.GetApproval())
		}
		if acts := readiness.ActionStrings(rec.GetActions()); !slices.Contains(acts, "fallback:b") {
			t.Fatalf("actions %v", acts)
		}
	}
}

// Refusals before and by the decision are receipted and answered with a
// structured tool error; nothing is dialled.
func TestRefusals(t *testing.T) {
	up := mcptest.New(t, mcptest.Options{})
	entries := map[string]*mcpreadyv1.RegistryEntry{"a": entry("test", up.URL)}
	cases := []struct {
		name string
		st   func(State) State
		req  func(*Request)
		code readiness.Code
		step int
	}{
		{"no policy", func(State) State { return State{} }, func(*Request) {}, readiness.CodeNoPolicy, 1},
		{"front refusal", func(s State) State { return s }, func(r *Request) {
			r.Refusal = &decide.RefusalError{Step: readiness.StepTrust, Code: readiness.CodeUnauthenticated, Reason: "no token"}
		}, readiness.CodeUnauthenticated, 2},
		{"unknown tool", func(s State) State { return s }, func(r *Request) { r.Tool = "nope" }, readiness.CodeUnknownTool, 0},
		{"principal", func(s State) State { return s }, func(r *Request) { r.Caller.Principal = "stranger" }, readiness.CodePrincipalDenied, 2},
		{"pinned entry gone", func(s State) State { return s }, func(r *Request) { r.Pin, r.RequestID = "zz", "req-1" }, readiness.CodeInputRoute, 1},
		{"drift", func(s State) State { s.Drift = blocked("a"); return s }, func(*Request) {}, readiness.CodeDriftBlocked, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pl, st, out := setup(t, policy(), entries)
			tr := newFake(t)
			req := request("test/echo")
			tc.req(&req)
			res := pl.Call(context.Background(), tc.st(st), req, tr)
			te, ok := ParseToolError(res.Answer)
			if !ok || te.Code != string(tc.code) || te.Step != tc.step || len(tr.dialled) != 0 {
				t.Fatalf("got %+v (dialled %v), want code %s step %d", te, tr.dialled, tc.code, tc.step)
			}
			if len(out.recs) != 1 || out.recs[0].GetReceiptId() != te.Receipt || (req.RequestID != "" && out.recs[0].GetRequestId() != req.RequestID) {
				t.Fatalf("receipts %v", out.recs)
			}
			if tc.code == readiness.CodeDriftBlocked && te.Outcome != "DRIFT_BLOCKED" {
				t.Fatalf("outcome %s", te.Outcome)
			}
		})
	}
}

type blocked string

func (b blocked) Drifted(e string) bool { return e == string(b) }

// Listing and calling go through the same request: a tool is listed exactly
// when a call of it is admitted, here across the client's protocol version.
func TestVisibleMatchesCall(t *testing.T) {
	up := mcptest.New(t, mcptest.Options{})
	p := policy()
	p.ProtocolVersions = []string{"2025-11-25"}
	pl, st, _ := setup(t, p, map[string]*mcpreadyv1.RegistryEntry{"a": entry("test", up.URL)})
	for _, proto := range []string{"2025-11-25", "2024-11-05"} {
		c := Caller{Principal: "dev", Protocol: proto}
		listed := len(pl.Visible(st, c)) > 0
		req := request("test/echo")
		req.Caller = c
		res := pl.Call(context.Background(), st, req, newFake(t))
		if called := !res.Answer.IsError; listed != called {
			t.Fatalf("protocol %s: listed %v, called %v (%s)", proto, listed, called, strings.TrimSpace(res.Answer.Content[0].(*mcp.TextContent).Text))
		}
	}
}

// The approval question names the tool, the server, the caller, the
// side-effect class, whether the effect can be undone and whether the tool
// offers a dry run, and shows only the arguments the redaction allow-list
// keeps. Before, it showed no arguments and said nothing of reversibility
// or dry runs.
func TestApprovalPrompt(t *testing.T) {
	for _, rollback := range []bool{false, true} {
		dryRun := !rollback
		pm := newPayment(t, payOpts{noStore: true, rollback: rollback, dryRun: dryRun, approvals: []*mcpreadyv1.ApprovalRule{{Match: "*/charge", Required: true}}})
		pm.pl.opts.Builder.Redaction.KeepArguments = []string{"amount"}
		pm.tr.approve = true
		req := Request{Requested: "test/charge", Tool: "test/charge", Caller: Caller{Name: "c", Principal: "dev", Elicit: true},
			Arguments: []byte(`{"amount":5,"key":"s3cr3t"}`)}
		if res := pm.pl.Call(context.Background(), pm.st, req, pm.tr); res.Answer == nil || res.Answer.IsError {
			t.Fatalf("answer %+v", res.Answer)
		}
		if len(pm.tr.prompts) != 1 {
			t.Fatalf("prompts %q", pm.tr.prompts)
		}
		q := pm.tr.prompts[0]
		undo := "cannot be undone"
		if rollback {
			undo = "can be undone"
		}
		for _, want := range []string{"Approve calling charge on test for c?", "Side effect: STATE_CHANGING", undo, `amount="5"`} {
			if !strings.Contains(q, want) {
				t.Errorf("prompt %q lacks %q", q, want)
			}
		}
		if strings.Contains(q, "offers a dry run") != dryRun {
			t.Errorf("prompt %q: dry run offered %v", q, dryRun)
		}
		if strings.Contains(q, "s3cr3t") || strings.Contains(q, "key") {
			t.Fatalf("prompt %q shows an argument the allow-list does not keep", q)
		}
	}
}

// Approval by value end to end: a charge of 5 under an above-100 rule runs
// without asking; a charge of 500 is asked about and, denied, never
// reaches the upstream.
func TestApprovalAboveValueCall(t *testing.T) {
	pm := newPayment(t, payOpts{noStore: true, approvals: []*mcpreadyv1.ApprovalRule{{Match: "*/charge", Required: true, AboveValue: 100, ValuePath: "amount"}}})
	charge := func(amount string) Result {
		return pm.pl.Call(context.Background(), pm.st, Request{Requested: "test/charge", Tool: "test/charge",
			Caller: Caller{Name: "c", Principal: "dev", Elicit: true}, Arguments: []byte(`{"amount":` + amount + `}`)}, pm.tr)
	}
	if res := charge("5"); res.Answer.IsError || len(pm.tr.asked) != 0 || res.Receipt.GetApproval() != mcpreadyv1.ApprovalState_APPROVAL_STATE_NOT_REQUIRED {
		t.Fatalf("small charge: %+v asked %v", res.Answer, pm.tr.asked)
	}
	res := charge("500")
	if te, ok := ParseToolError(res.Answer); !ok || te.Code != string(readiness.CodeApprovalDenied) || len(pm.tr.asked) != 1 || pm.ledger.Calls() != 1 {
		t.Fatalf("large charge: %+v asked %v, %s", res.Answer, pm.tr.asked, pm.ledger)
	}
}

// Failure domains end to end: a (operator acme) resets connections; the
// fallback goes to c (another operator) rather than b (acme too), and the
// receipt records the domains of the routes tried. Before, b was tried
// next.
func TestFailureDomainsCall(t *testing.T) {
	upA, upB, upC := mcptest.New(t, mcptest.Options{}), mcptest.New(t, mcptest.Options{}), mcptest.New(t, mcptest.Options{})
	upA.SetFault(mcptest.FaultReset, "tools/call")
	a, b, c := entry("a", upA.URL), entry("b", upB.URL), entry("c", upC.URL)
	a.FailureDomains, b.FailureDomains, c.FailureDomains = []string{"operator:acme"}, []string{"operator:acme"}, []string{"operator:other"}
	pl, st, out := setup(t, policy(), map[string]*mcpreadyv1.RegistryEntry{"a": a, "b": b, "c": c})
	tr := newFake(t)
	res := pl.Call(context.Background(), st, request("echo_any"), tr)
	if res.Answer == nil || res.Answer.IsError || res.Route.Entry != "c" || slices.Contains(tr.dialled, upB.URL) {
		t.Fatalf("answer %+v route %v dialled %v", res.Answer, res.Route, tr.dialled)
	}
	if got := out.recs[0].GetFailureDomains(); !slices.Equal(got, []string{"operator:acme", "operator:other"}) {
		t.Fatalf("receipt domains %v", got)
	}
}

// The approval question for a fallback route names that route's own tool
// and server, not the first route's: A (test/echo) fails, B (other/repeat)
// requires approval, and the human is asked about repeat on other.
func TestFallbackApprovalNamesItsRoute(t *testing.T) {
	upA, upB := mcptest.New(t, mcptest.Options{}), mcptest.New(t, mcptest.Options{NoDefaultTools: true})
	mcp.AddTool(upB.Server, &mcp.Tool{Name: "repeat"}, func(_ context.Context, _ *mcp.CallToolRequest, in mcptest.EchoInput) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "B:" + in.Text}}}, nil, nil
	})
	upA.SetFault(mcptest.FaultServerError, "tools/call")
	b := entry("other", upB.URL)
	b.Identity.ToolName = "repeat"
	b.ApprovalRequired = true
	p := policy()
	p.SideEffects = append(p.SideEffects, &mcpreadyv1.SideEffectRule{Match: "other/repeat", Assigned: mcpreadyv1.SideEffectClass_SIDE_EFFECT_CLASS_READ_ONLY})
	p.EquivalenceClasses[0].Members = []string{"test/echo", "other/repeat"}
	pl, st, out := setup(t, p, map[string]*mcpreadyv1.RegistryEntry{"a": entry("test", upA.URL), "b": b})
	tr := newFake(t)
	tr.approve = true
	req := request("echo_any")
	req.Caller.Elicit = true
	res := pl.Call(context.Background(), st, req, tr)
	if res.Answer == nil || res.Answer.IsError || len(res.Answer.Content) != 1 || res.Answer.Content[0].(*mcp.TextContent).Text != "B:hi" {
		t.Fatalf("approved fallback: %+v", res.Answer)
	}
	if len(tr.prompts) != 1 || !strings.HasPrefix(tr.prompts[0], "Approve calling repeat on other for c?") {
		t.Fatalf("prompts %q, want one naming repeat on other", tr.prompts)
	}
	if rec := out.recs[len(out.recs)-1]; rec.GetSelected().GetEntry() != "b" || rec.GetApproval() != mcpreadyv1.ApprovalState_APPROVAL_STATE_APPROVED {
		t.Fatalf("receipt selected %v approval %v", rec.GetSelected(), rec.GetApproval())
	}
}

// refusalOf finds the decision's refusal as errors.As does, and costs an
// admitted call (no refusal) no allocation.
func TestRefusalOf(t *testing.T) {
	re := &decide.RefusalError{Step: readiness.StepEligibility, Code: readiness.CodeUnknownTool, Reason: "r"}
	for name, tc := range map[string]struct {
		err  error
		want *decide.RefusalError
	}{
		"none":    {nil, nil},
		"refusal": {re, re},
		"wrapped": {fmt.Errorf("deciding: %w", re), re},
		"other":   {errors.New("other"), nil},
	} {
		if got := refusalOf(tc.err); got != tc.want {
			t.Errorf("%s: %v, want %v", name, got, tc.want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { _ = refusalOf(nil) }); n != 0 {
		t.Errorf("%v allocations without a refusal", n)
	}
}
