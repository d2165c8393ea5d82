package workflow

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/readiness"
)

// ledger keeps what it records; fail makes Record fail.
type ledger struct {
	mu   sync.Mutex
	recs []*mcpreadyv1.Receipt
	fail error
}

func (l *ledger) Record(rec *mcpreadyv1.Receipt, durable bool) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !durable {
		panic("workflow receipts are recorded durably")
	}
	if l.fail != nil {
		return l.fail
	}
	l.recs = append(l.recs, rec)
	return nil
}

func (l *ledger) last() *mcpreadyv1.Receipt {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.recs) == 0 {
		return nil
	}
	return l.recs[len(l.recs)-1]
}

var (
	alice = Principal{Name: "alice", Class: "employee", Tenant: "acme", MayReport: true}
	bob   = Principal{Name: "bob", Class: "employee", Tenant: "acme", MayReport: true}
)

func call(id, entry string, outcome mcpreadyv1.OutcomeClass, attempts int32, fallback bool) *mcpreadyv1.Receipt {
	r := &mcpreadyv1.Receipt{ReceiptId: id, Requested: "search", Outcome: outcome, AttemptCount: attempts,
		Selected: &mcpreadyv1.Selection{Entry: entry, ServerName: "docs", ToolName: "search", Access: &mcpreadyv1.AccessFacts{Issuer: "https://as"}}}
	if fallback {
		r.Actions = []*mcpreadyv1.Action{{Kind: mcpreadyv1.ActionKind_ACTION_KIND_FALLBACK, Entry: entry}}
	}
	return r
}

func newTracker(l *ledger, mod func(*Options)) (*Tracker, *time.Time) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	o := Options{Ledger: l, Now: func() time.Time { return now }, Region: "eu"}
	if mod != nil {
		mod(&o)
	}
	return New(o), &now
}

func TestReportRecordsWorkflowReceipt(t *testing.T) {
	l := &ledger{}
	tr, _ := newTracker(l, nil)
	if err := tr.Admit(alice, "wf-1"); err != nil {
		t.Fatal(err)
	}
	tr.Note(alice, "wf-1", call("R1", "docs-a", mcpreadyv1.OutcomeClass_OUTCOME_CLASS_TIMEOUT, 2, false))
	if err := tr.Admit(alice, "wf-1"); err != nil {
		t.Fatal(err)
	}
	tr.Note(alice, "wf-1", call("R2", "docs-b", mcpreadyv1.OutcomeClass_OUTCOME_CLASS_SUCCESS, 1, true))
	ans, id, err := tr.Report(alice, []byte(`{"workflow":"wf-1","state":"completed","contributed":["R2"]}`))
	if err != nil {
		t.Fatal(err)
	}
	if ans.Calls != 2 || ans.Contributed != 1 || ans.Receipt != id || ans.State != "completed" {
		t.Errorf("answer %+v", ans)
	}
	rec := l.last()
	wf := rec.GetWorkflow()
	if rec.GetReceiptId() != id || rec.GetRequested() != ReportTool || rec.GetWorkflowId() != "wf-1" || rec.GetWorkflowOutcome() != "completed" ||
		rec.GetPrincipalClass() != "employee" || rec.GetRegion() != "eu" || rec.GetOutcome() != mcpreadyv1.OutcomeClass_OUTCOME_CLASS_SUCCESS {
		t.Fatalf("workflow receipt %v", rec)
	}
	if wf.GetEndState() != mcpreadyv1.WorkflowEndState_WORKFLOW_END_STATE_COMPLETED || len(wf.GetCalls()) != 2 || wf.GetExpired() {
		t.Fatalf("workflow record %v", wf)
	}
	c1, c2 := wf.GetCalls()[0], wf.GetCalls()[1]
	if c1.GetReceiptId() != "R1" || c1.GetContributed() || c1.GetFallback() || c1.GetAttempts() != 2 {
		t.Errorf("call 1 %v", c1)
	}
	if c2.GetReceiptId() != "R2" || !c2.GetContributed() || !c2.GetFallback() || c2.GetSelected().GetEntry() != "docs-b" {
		t.Errorf("call 2 %v", c2)
	}
	if c2.GetSelected().GetAccess() != nil {
		t.Error("access facts copied into the workflow record")
	}
	if tr.Open() != 0 {
		t.Errorf("%d open after the report", tr.Open())
	}
}

// TestRefusals: the bad input of the issue, each with its code and a
// refused receipt.
func TestRefusals(t *testing.T) {
	l := &ledger{}
	tr, _ := newTracker(l, nil)
	if err := tr.Admit(alice, "wf-a"); err != nil {
		t.Fatal(err)
	}
	tr.Note(alice, "wf-a", call("R1", "docs-a", mcpreadyv1.OutcomeClass_OUTCOME_CLASS_SUCCESS, 1, false))
	noReport := alice
	noReport.MayReport = false
	for _, c := range []struct {
		name string
		p    Principal
		body string
		want error
	}{
		{"unknown workflow", alice, `{"workflow":"wf-never","state":"completed"}`, ErrUnknown},
		{"foreign workflow", bob, `{"workflow":"wf-a","state":"completed"}`, ErrForeign},
		{"not permitted", noReport, `{"workflow":"wf-a","state":"completed"}`, ErrReportNotPermitted},
		{"bad state", alice, `{"workflow":"wf-a","state":"done"}`, ErrReportInvalid},
		{"unknown field", alice, `{"workflow":"wf-a","state":"completed","success":true}`, ErrReportInvalid},
		{"trailing data", alice, `{"workflow":"wf-a","state":"completed"}{}`, ErrReportInvalid},
		{"oversized id", alice, `{"workflow":"` + strings.Repeat("w", MaxIDLen+1) + `","state":"completed"}`, ErrIDInvalid},
		{"malformed id", alice, `{"workflow":"wf a","state":"completed"}`, ErrIDInvalid},
		{"receipt of another workflow", alice, `{"workflow":"wf-a","state":"completed","contributed":["R9"]}`, ErrReportInvalid},
		{"receipt twice", alice, `{"workflow":"wf-a","state":"completed","contributed":["R1","R1"]}`, ErrReportInvalid},
		{"not json", alice, `completed`, ErrReportInvalid},
	} {
		t.Run(c.name, func(t *testing.T) {
			n := len(l.recs)
			_, id, err := tr.Report(c.p, []byte(c.body))
			if !errors.Is(err, c.want) {
				t.Fatalf("err %v, want %v", err, c.want)
			}
			rec := l.last()
			if len(l.recs) != n+1 || rec.GetReceiptId() != id || rec.GetOutcome() != mcpreadyv1.OutcomeClass_OUTCOME_CLASS_REFUSED ||
				rec.GetWorkflow().GetRefusalCode() != string(Code(err)) || Code(err) == "" || rec.GetErrorMessage() == "" {
				t.Errorf("refused receipt %v", rec)
			}
		})
	}
	if tr.Open() != 1 {
		t.Fatal("a refused report closed the workflow")
	}
	if _, _, err := tr.Report(alice, []byte(`{"workflow":"wf-a","state":"failed"}`)); err != nil {
		t.Fatal(err)
	}
	// reported: a second report and any further call are refused, also for another principal
	if _, _, err := tr.Report(alice, []byte(`{"workflow":"wf-a","state":"completed"}`)); !errors.Is(err, ErrClosed) || Code(err) != readiness.CodeWorkflowClosed {
		t.Errorf("double report: %v", err)
	}
	if err := tr.Admit(alice, "wf-a"); !errors.Is(err, ErrClosed) {
		t.Errorf("call after the report: %v", err)
	}
	if err := tr.Admit(bob, "wf-a"); !errors.Is(err, ErrForeign) {
		t.Errorf("foreign call after the report: %v", err)
	}
	if _, _, err := tr.Report(bob, []byte(`{"workflow":"wf-a","state":"completed"}`)); !errors.Is(err, ErrForeign) {
		t.Errorf("foreign report after the report: %v", err)
	}
}

func TestAdmitOwnershipAndLimits(t *testing.T) {
	tr, _ := newTracker(&ledger{}, func(o *Options) { o.MaxOpen, o.MaxOpenPerPrincipal = 3, 2 })
	for _, id := range []string{"a1", "a2"} {
		if err := tr.Admit(alice, id); err != nil {
			t.Fatal(err)
		}
	}
	if err := tr.Admit(bob, "a1"); !errors.Is(err, ErrForeign) || Code(err) != readiness.CodeWorkflowForeign {
		t.Errorf("bob in alice's workflow: %v", err)
	}
	if err := tr.Admit(alice, "a3"); !errors.Is(err, ErrLimit) {
		t.Errorf("third workflow of alice: %v", err)
	}
	if err := tr.Admit(alice, "a1"); err != nil {
		t.Errorf("an open workflow of alice is not limited: %v", err)
	}
	if err := tr.Admit(bob, "b1"); err != nil {
		t.Fatal(err)
	}
	if err := tr.Admit(bob, "b2"); !errors.Is(err, ErrLimit) || Code(err) != readiness.CodeWorkflowLimit {
		t.Errorf("past the overall cap: %v", err)
	}
	for _, id := range []string{"", strings.Repeat("x", MaxIDLen+1), "a b", "a\x00", "wf\u00e9"} {
		if err := tr.Admit(alice, id); !errors.Is(err, ErrIDInvalid) {
			t.Errorf("id %q: %v", id, err)
		}
	}
	if err := CheckID("team/nightly-report:2026-12-01@v1_x"); err != nil {
		t.Error(err)
	}
}

func TestNoteIsBoundedAndOwned(t *testing.T) {
	l := &ledger{}
	tr, _ := newTracker(l, func(o *Options) { o.MaxCalls = 2 })
	_ = tr.Admit(alice, "wf")
	for _, id := range []string{"R1", "R2", "R3", "R4"} {
		tr.Note(alice, "wf", call(id, "e", mcpreadyv1.OutcomeClass_OUTCOME_CLASS_SUCCESS, 1, false))
	}
	tr.Note(bob, "wf", call("B1", "e", mcpreadyv1.OutcomeClass_OUTCOME_CLASS_SUCCESS, 1, false))
	if _, _, err := tr.Report(alice, []byte(`{"workflow":"wf","state":"completed"}`)); err != nil {
		t.Fatal(err)
	}
	wf := l.last().GetWorkflow()
	if len(wf.GetCalls()) != 2 || wf.GetCallsDropped() != 2 {
		t.Errorf("calls %d dropped %d, want 2 and 2", len(wf.GetCalls()), wf.GetCallsDropped())
	}
}

// TestCallsBoundedOverall: all open workflows together list at most
// MaxCallsTotal calls; a closed workflow's calls free the budget.
func TestCallsBoundedOverall(t *testing.T) {
	l := &ledger{}
	tr, _ := newTracker(l, func(o *Options) { o.MaxCallsTotal = 3 })
	for _, wf := range []string{"w1", "w2"} {
		_ = tr.Admit(alice, wf)
		for _, id := range []string{"a", "b"} {
			tr.Note(alice, wf, call(wf+id, "e", mcpreadyv1.OutcomeClass_OUTCOME_CLASS_SUCCESS, 1, false))
		}
	}
	if _, _, err := tr.Report(alice, []byte(`{"workflow":"w2","state":"completed"}`)); err != nil {
		t.Fatal(err)
	}
	if wf := l.last().GetWorkflow(); len(wf.GetCalls()) != 1 || wf.GetCallsDropped() != 1 {
		t.Errorf("w2: %d calls, %d dropped; want 1 and 1", len(wf.GetCalls()), wf.GetCallsDropped())
	}
	tr.Note(alice, "w1", call("w1c", "e", mcpreadyv1.OutcomeClass_OUTCOME_CLASS_SUCCESS, 1, false))
	if _, _, err := tr.Report(alice, []byte(`{"workflow":"w1","state":"completed"}`)); err != nil {
		t.Fatal(err)
	}
	if wf := l.last().GetWorkflow(); len(wf.GetCalls()) != 3 || wf.GetCallsDropped() != 0 {
		t.Errorf("w1: %d calls, %d dropped; want 3 and 0 (w2's report freed the budget)", len(wf.GetCalls()), wf.GetCallsDropped())
	}
}

func TestSweepRecordsAbandoned(t *testing.T) {
	l := &ledger{}
	tr, now := newTracker(l, func(o *Options) { o.IdleTimeout = time.Minute })
	_ = tr.Admit(alice, "idle")
	tr.Note(alice, "idle", call("R1", "e", mcpreadyv1.OutcomeClass_OUTCOME_CLASS_SUCCESS, 1, false))
	_ = tr.Admit(alice, "busy")
	*now = now.Add(50 * time.Second)
	_ = tr.Admit(alice, "busy")
	*now = now.Add(20 * time.Second)
	if n := tr.Sweep(); n != 1 {
		t.Fatalf("swept %d, want 1", n)
	}
	rec := l.last()
	if rec.GetWorkflowId() != "idle" || !rec.GetWorkflow().GetExpired() ||
		rec.GetWorkflow().GetEndState() != mcpreadyv1.WorkflowEndState_WORKFLOW_END_STATE_ABANDONED || len(rec.GetWorkflow().GetCalls()) != 1 {
		t.Fatalf("expired receipt %v", rec)
	}
	if _, _, err := tr.Report(alice, []byte(`{"workflow":"idle","state":"completed"}`)); !errors.Is(err, ErrClosed) {
		t.Errorf("report after expiry: %v", err)
	}
	if tr.Open() != 1 {
		t.Errorf("%d open, want busy only", tr.Open())
	}
}

// TestReportNotRecordedKeepsWorkflowOpen: a report whose receipt cannot
// be made durable is refused and the workflow can be reported again.
func TestReportNotRecordedKeepsWorkflowOpen(t *testing.T) {
	l := &ledger{fail: errors.New("spool full")}
	tr, _ := newTracker(l, nil)
	_ = tr.Admit(alice, "wf")
	tr.Note(alice, "wf", call("R1", "e", mcpreadyv1.OutcomeClass_OUTCOME_CLASS_SUCCESS, 1, false))
	if _, _, err := tr.Report(alice, []byte(`{"workflow":"wf","state":"completed"}`)); err == nil {
		t.Fatal("report accepted without its receipt")
	}
	l.fail = nil
	if _, _, err := tr.Report(alice, []byte(`{"workflow":"wf","state":"completed","contributed":["R1"]}`)); err != nil {
		t.Fatalf("second report after the ledger recovered: %v", err)
	}
	if c := l.last().GetWorkflow().GetCalls(); len(c) != 1 || !c[0].GetContributed() {
		t.Errorf("calls %v", c)
	}
}

func TestConcurrentCallsAndReports(t *testing.T) {
	l := &ledger{}
	tr, _ := newTracker(l, nil)
	var wg sync.WaitGroup
	for i := range 8 {
		p := Principal{Name: string(rune('a' + i)), MayReport: true}
		wg.Go(func() {
			for j := range 50 {
				id := p.Name + "-wf"
				if tr.Admit(p, id) == nil {
					tr.Note(p, id, call(p.Name+string(rune('0'+j%10)), "e", mcpreadyv1.OutcomeClass_OUTCOME_CLASS_SUCCESS, 1, false))
				}
				if j == 25 {
					_, _, _ = tr.Report(p, []byte(`{"workflow":"`+id+`","state":"completed"}`))
				}
			}
		})
	}
	wg.Wait()
	if tr.Open() != 0 {
		t.Errorf("%d open", tr.Open())
	}
}

func FuzzParseReport(f *testing.F) {
	for _, s := range []string{`{"workflow":"wf-1","state":"completed"}`, `{"workflow":"w","state":"failed","contributed":["R1","R2"]}`,
		`{"workflow":"","state":"abandoned"}`, `{"state":1}`, `[]`, `{"workflow":"w","state":"completed"} x`, ``} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := ParseReport(b)
		if err != nil {
			if Code(err) == "" {
				t.Fatalf("error without a code: %v", err)
			}
			return
		}
		if CheckID(r.Workflow) != nil || states[r.State] == 0 || len(r.Contributed) > MaxReportBytes {
			t.Fatalf("accepted %+v", r)
		}
	})
}

func TestDefaults(t *testing.T) {
	o := New(Options{}).opts
	if o.MaxOpen != 10000 || o.MaxOpenPerPrincipal != 256 || o.MaxCalls != 512 || o.MaxCallsTotal != 65536 || o.IdleTimeout != time.Hour {
		t.Errorf("defaults %+v", o)
	}
}
