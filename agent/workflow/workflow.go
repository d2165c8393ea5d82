// Package workflow tracks, per principal, the workflows the host agent's
// tool calls belong to (the workflow id a caller names) and records how
// each ended (readiness layer 7): the orchestrator reports a workflow's
// end state (completed, failed or abandoned) and which of its calls
// contributed, and the agent turns the report into one workflow receipt,
// signed and chained with the request receipts through the same spool,
// which lists the workflow's request receipts by id, the route that
// answered each (primary or fallback) and its attempts. A workflow that
// gets neither a call nor a report for its idle timeout is recorded as
// abandoned (expired).
//
// A workflow belongs to the principal whose call opened it: another
// principal's calls and reports in it are refused (workflow_foreign), a
// reported workflow takes no more calls or reports (workflow_closed), and
// the open workflows are capped per principal and overall
// (workflow_limit). Nothing here trusts what a report claims beyond what
// the agent recorded: a contributing receipt must be a call of that
// workflow.
//
// The package must not decide or route calls, keep arguments or results
// (a call is kept as its receipt id, route, outcome and attempts), or
// speak MCP or HTTP (package front does).
package workflow

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/mcpready/mcpready/agent/receipt"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/readiness"
)

// ReportTool is the name of the MCP tool (and the requested name of a
// workflow receipt) through which an orchestrator reports a workflow.
const ReportTool = "mcpready.workflow.report"

// MetaReceipt is the _meta field of a workflow call's answer that names
// the call's receipt, which a report may list as contributing.
const MetaReceipt = "mcpready.dev/receipt"

// Limits of ids and reports.
const (
	// MaxIDLen is the longest workflow id accepted, in bytes.
	MaxIDLen = 128
	// MaxReportBytes is the largest report body accepted.
	MaxReportBytes = 64 << 10
	// maxReceiptIDLen bounds one contributing receipt id of a report.
	maxReceiptIDLen = 64
)

// Defaults of the Options limits.
const (
	DefaultMaxOpen             = 10000
	DefaultMaxOpenPerPrincipal = 256
	DefaultMaxCalls            = 512
	DefaultMaxCallsTotal       = 65536
	DefaultIdleTimeout         = time.Hour
)

// Errors. Each refusal wraps one of them; Code maps it to its readiness code.
var (
	ErrIDInvalid          = errors.New("invalid workflow id")
	ErrForeign            = errors.New("workflow opened by another principal")
	ErrClosed             = errors.New("workflow already reported")
	ErrLimit              = errors.New("too many open workflows")
	ErrUnknown            = errors.New("unknown workflow")
	ErrReportInvalid      = errors.New("invalid workflow report")
	ErrReportNotPermitted = errors.New("principal may not report workflows")
)

var codes = []struct {
	err  error
	code readiness.Code
}{
	{ErrIDInvalid, readiness.CodeWorkflowIDInvalid}, {ErrForeign, readiness.CodeWorkflowForeign}, {ErrClosed, readiness.CodeWorkflowClosed},
	{ErrLimit, readiness.CodeWorkflowLimit}, {ErrUnknown, readiness.CodeWorkflowUnknown}, {ErrReportInvalid, readiness.CodeWorkflowReportInvalid},
	{ErrReportNotPermitted, readiness.CodeWorkflowReportNotPermitted},
}

// Code is the readiness code of an error of this package ("" for another error).
func Code(err error) readiness.Code {
	for _, c := range codes {
		if errors.Is(err, c.err) {
			return c.code
		}
	}
	return ""
}

// CheckID refuses (ErrIDInvalid) an empty or oversized workflow id, or one
// with a byte other than ASCII letters, digits and . _ - : / @.
func CheckID(id string) error {
	if id == "" || len(id) > MaxIDLen {
		return fmt.Errorf("%w: %d bytes (1 to %d allowed)", ErrIDInvalid, len(id), MaxIDLen)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-' || c == ':' || c == '/' || c == '@') {
			return fmt.Errorf("%w: byte %d is not a letter, digit or . _ - : / @", ErrIDInvalid, i)
		}
	}
	return nil
}

// Report is what an orchestrator reports: the workflow, its end state and,
// optionally, which of its calls contributed (receipt ids; none named
// means every call of the workflow).
type Report struct {
	Workflow    string   `json:"workflow"`
	State       string   `json:"state"`
	Contributed []string `json:"contributed,omitempty"`
}

// states maps a report's state to the end state.
var states = map[string]mcpreadyv1.WorkflowEndState{
	"completed": mcpreadyv1.WorkflowEndState_WORKFLOW_END_STATE_COMPLETED,
	"failed":    mcpreadyv1.WorkflowEndState_WORKFLOW_END_STATE_FAILED,
	"abandoned": mcpreadyv1.WorkflowEndState_WORKFLOW_END_STATE_ABANDONED,
}

// ParseReport decodes one report (a JSON object, at most MaxReportBytes):
// unknown fields, trailing data, a state other than completed, failed or
// abandoned, an invalid workflow id, and empty, oversized or repeated
// contributing receipt ids are refused (ErrReportInvalid or ErrIDInvalid).
func ParseReport(b []byte) (Report, error) {
	var r Report
	if len(b) > MaxReportBytes {
		return r, fmt.Errorf("%w: %d bytes (at most %d)", ErrReportInvalid, len(b), MaxReportBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return Report{}, fmt.Errorf("%w: %w", ErrReportInvalid, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return Report{}, fmt.Errorf("%w: data after the report object", ErrReportInvalid)
	}
	if err := CheckID(r.Workflow); err != nil {
		return Report{}, err
	}
	if _, ok := states[r.State]; !ok {
		return Report{}, fmt.Errorf("%w: state %q (want completed, failed or abandoned)", ErrReportInvalid, r.State)
	}
	seen := make(map[string]bool, len(r.Contributed))
	for _, id := range r.Contributed {
		switch {
		case id == "" || len(id) > maxReceiptIDLen:
			return Report{}, fmt.Errorf("%w: a contributing receipt id of %d bytes", ErrReportInvalid, len(id))
		case seen[id]:
			return Report{}, fmt.Errorf("%w: receipt %s named twice", ErrReportInvalid, id)
		}
		seen[id] = true
	}
	return r, nil
}

// Principal is who calls or reports, as the front authenticated them.
type Principal struct {
	// Name is the principal's own name (workflows belong to it); Class and
	// Tenant are its principal and tenant classes (the receipt's).
	Name, Class, Tenant string
	// MayReport: the principal may report workflows (config reportWorkflows).
	MayReport bool
}

// Ledger records workflow receipts (package spool's Writer).
type Ledger interface {
	Record(rec *mcpreadyv1.Receipt, durable bool) error
}

// Options configures a Tracker. Zero values are documented per field.
type Options struct {
	// MaxOpen and MaxOpenPerPrincipal cap the open workflows overall and
	// per principal; zero means DefaultMaxOpen and
	// DefaultMaxOpenPerPrincipal. Reported workflows are remembered (so
	// they take no more calls) up to MaxOpen more, oldest forgotten first.
	MaxOpen, MaxOpenPerPrincipal int
	// MaxCalls is how many calls one workflow lists, and MaxCallsTotal how
	// many all open workflows list together; later ones are counted only
	// (calls_dropped). Zero means DefaultMaxCalls and DefaultMaxCallsTotal.
	MaxCalls, MaxCallsTotal int
	// IdleTimeout is how long a workflow stays open without a call or a
	// report; then Sweep records it abandoned (expired). Zero means
	// DefaultIdleTimeout.
	IdleTimeout time.Duration
	// Builder stamps workflow receipts like request receipts.
	Builder receipt.Builder
	// Region is this host's region (the receipt's).
	Region string
	// Ledger records workflow receipts, durably before a report is
	// answered; nil records none.
	Ledger Ledger
	// Emit observes every workflow receipt before Ledger records it; nil
	// observes none.
	Emit func(*mcpreadyv1.Receipt)
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// flow is one open workflow.
type flow struct {
	owner   Principal
	opened  time.Time
	last    time.Time
	calls   []*mcpreadyv1.WorkflowCall
	dropped int64
}

// Tracker tracks workflows. It is safe for concurrent use.
type Tracker struct {
	opts Options

	mu          sync.Mutex
	open        map[string]*flow
	perOwner    map[string]int
	calls       int               // calls listed by the open workflows
	closed      map[string]string // reported workflow -> owner name
	closedOrder []string          // closed ids, oldest first
}

// New returns a Tracker.
func New(opts Options) *Tracker {
	if opts.MaxOpen <= 0 {
		opts.MaxOpen = DefaultMaxOpen
	}
	if opts.MaxOpenPerPrincipal <= 0 {
		opts.MaxOpenPerPrincipal = DefaultMaxOpenPerPrincipal
	}
	if opts.MaxCalls <= 0 {
		opts.MaxCalls = DefaultMaxCalls
	}
	if opts.MaxCallsTotal <= 0 {
		opts.MaxCallsTotal = DefaultMaxCallsTotal
	}
	if opts.IdleTimeout <= 0 {
		opts.IdleTimeout = DefaultIdleTimeout
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Tracker{opts: opts, open: map[string]*flow{}, perOwner: map[string]int{}, closed: map[string]string{}}
}

// Admit says whether p may call in workflow id, opening it on p's first
// call: nil, or an error wrapping ErrIDInvalid, ErrForeign, ErrClosed or
// ErrLimit (the call must then be refused with Code(err)).
func (t *Tracker) Admit(p Principal, id string) error {
	if err := CheckID(id); err != nil {
		return err
	}
	now := t.opts.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if f := t.open[id]; f != nil {
		if f.owner.Name != p.Name {
			return fmt.Errorf("%w: workflow %s belongs to another principal", ErrForeign, id)
		}
		f.last = now
		return nil
	}
	if owner, ok := t.closed[id]; ok {
		if owner != p.Name {
			return fmt.Errorf("%w: workflow %s belongs to another principal", ErrForeign, id)
		}
		return fmt.Errorf("%w: workflow %s was reported; name a new workflow id", ErrClosed, id)
	}
	switch {
	case t.perOwner[p.Name] >= t.opts.MaxOpenPerPrincipal:
		return fmt.Errorf("%w: principal %s has %d open workflows (at most %d)", ErrLimit, p.Name, t.perOwner[p.Name], t.opts.MaxOpenPerPrincipal)
	case len(t.open) >= t.opts.MaxOpen:
		return fmt.Errorf("%w: this agent has %d open workflows (at most %d)", ErrLimit, len(t.open), t.opts.MaxOpen)
	}
	t.open[id] = &flow{owner: p, opened: now, last: now}
	t.perOwner[p.Name]++
	return nil
}

// Note records the finished call rec (its receipt, already emitted) in
// workflow id of p, which Admit admitted. A call of a workflow no longer
// open to p (reported or expired meanwhile) is not recorded.
func (t *Tracker) Note(p Principal, id string, rec *mcpreadyv1.Receipt) {
	c := CallOf(rec)
	t.mu.Lock()
	defer t.mu.Unlock()
	f := t.open[id]
	if f == nil || f.owner.Name != p.Name {
		return
	}
	f.last = t.opts.Now()
	if len(f.calls) >= t.opts.MaxCalls || t.calls >= t.opts.MaxCallsTotal {
		f.dropped++
		return
	}
	f.calls = append(f.calls, c)
	t.calls++
}

// CallOf is the workflow's record of a request receipt: its id, the tool
// requested, the route that answered (without access facts), the outcome,
// the attempts, and whether a fallback route answered.
func CallOf(rec *mcpreadyv1.Receipt) *mcpreadyv1.WorkflowCall {
	c := &mcpreadyv1.WorkflowCall{ReceiptId: rec.GetReceiptId(), Requested: rec.GetRequested(), Outcome: rec.GetOutcome(), Attempts: rec.GetAttemptCount()}
	if s := rec.GetSelected(); s != nil {
		c.Selected = &mcpreadyv1.Selection{Entry: s.GetEntry(), Endpoint: s.GetEndpoint(), ServerName: s.GetServerName(), ServerVersion: s.GetServerVersion(),
			ToolName: s.GetToolName(), InputSchemaDigest: s.GetInputSchemaDigest(), OutputSchemaDigest: s.GetOutputSchemaDigest(), ProtocolVersion: s.GetProtocolVersion()}
		for _, a := range rec.GetActions() {
			if a.GetKind() == mcpreadyv1.ActionKind_ACTION_KIND_FALLBACK && a.GetEntry() == s.GetEntry() {
				c.Fallback = true
			}
		}
	}
	return c
}

// Answer is what an accepted report is answered with.
type Answer struct {
	// Receipt is the workflow receipt's id.
	Receipt  string `json:"receipt"`
	Workflow string `json:"workflow"`
	State    string `json:"state"`
	// Calls and Contributed count the workflow's listed calls and those
	// recorded as contributing.
	Calls       int `json:"calls"`
	Contributed int `json:"contributed"`
}

// Report handles one report body of p: it parses it, checks it against
// what the agent recorded, closes the workflow and records the workflow
// receipt durably. A refused report (an error wrapping one of this
// package's errors, or the Ledger's) also gets a receipt, refused, whose
// id is returned with the error. The workflow stays open when its receipt
// could not be recorded.
func (t *Tracker) Report(p Principal, body []byte) (Answer, string, error) {
	now := t.opts.Now()
	rep, err := ParseReport(body)
	switch {
	case !p.MayReport:
		err = fmt.Errorf("%w: principal %s (agent config reportWorkflows, or identityProvider.workflowReporters for its class)", ErrReportNotPermitted, p.Name)
	case err == nil:
		var f *flow
		if f, err = t.close(p, rep); err == nil {
			rec, ans := t.receipt(p, rep.Workflow, now, f, states[rep.State], false)
			ans.State = rep.State
			if err = t.record(rec); err != nil {
				t.reopen(rep.Workflow, f)
				return Answer{}, rec.GetReceiptId(), err
			}
			return ans, rec.GetReceiptId(), nil
		}
	}
	rec := t.refused(p, rep.Workflow, now, err)
	_ = t.record(rec) // refused: the refusal stands whether or not its receipt is durable
	return Answer{}, rec.GetReceiptId(), err
}

// close takes workflow rep.Workflow of p out of the open set, marking the
// calls rep names as contributing.
func (t *Tracker) close(p Principal, rep Report) (*flow, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	id := rep.Workflow
	f := t.open[id]
	if f == nil {
		owner, ok := t.closed[id]
		switch {
		case ok && owner != p.Name:
			return nil, fmt.Errorf("%w: workflow %s belongs to another principal", ErrForeign, id)
		case ok:
			return nil, fmt.Errorf("%w: workflow %s was reported before", ErrClosed, id)
		}
		return nil, fmt.Errorf("%w: no call of workflow %s was recorded on this agent (or it idled out and was forgotten)", ErrUnknown, id)
	}
	if f.owner.Name != p.Name {
		return nil, fmt.Errorf("%w: workflow %s belongs to another principal", ErrForeign, id)
	}
	calls := make([]*mcpreadyv1.WorkflowCall, len(f.calls))
	for i, c := range f.calls {
		calls[i] = proto.Clone(c).(*mcpreadyv1.WorkflowCall)
		calls[i].Contributed = len(rep.Contributed) == 0 || slices.Contains(rep.Contributed, c.GetReceiptId())
	}
	for _, r := range rep.Contributed {
		if !slices.ContainsFunc(f.calls, func(c *mcpreadyv1.WorkflowCall) bool { return c.GetReceiptId() == r }) {
			return nil, fmt.Errorf("%w: receipt %s is not a recorded call of workflow %s", ErrReportInvalid, r, id)
		}
	}
	t.forgetLocked(id, f)
	t.rememberLocked(id, p.Name)
	out := *f
	out.calls = calls
	return &out, nil
}

// reopen undoes close for a workflow whose receipt could not be recorded.
func (t *Tracker) reopen(id string, f *flow) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.closed, id)
	if i := slices.Index(t.closedOrder, id); i >= 0 {
		t.closedOrder = slices.Delete(t.closedOrder, i, i+1)
	}
	for _, c := range f.calls {
		c.Contributed = false
	}
	if t.open[id] == nil {
		t.open[id] = f
		t.perOwner[f.owner.Name]++
		t.calls += len(f.calls)
	}
}

func (t *Tracker) forgetLocked(id string, f *flow) {
	delete(t.open, id)
	t.calls -= len(f.calls)
	if t.perOwner[f.owner.Name]--; t.perOwner[f.owner.Name] <= 0 {
		delete(t.perOwner, f.owner.Name)
	}
}

// rememberLocked keeps a closed id (so it takes no more calls), forgetting
// the oldest past MaxOpen.
func (t *Tracker) rememberLocked(id, owner string) {
	t.closed[id] = owner
	t.closedOrder = append(t.closedOrder, id)
	for len(t.closedOrder) > t.opts.MaxOpen {
		delete(t.closed, t.closedOrder[0])
		t.closedOrder = t.closedOrder[1:]
	}
}

// Sweep records every workflow idle for IdleTimeout as abandoned (an
// expired workflow receipt each) and returns how many.
func (t *Tracker) Sweep() int {
	now := t.opts.Now()
	type expired struct {
		id string
		f  *flow
	}
	var out []expired
	t.mu.Lock()
	for id, f := range t.open {
		if now.Sub(f.last) >= t.opts.IdleTimeout {
			t.forgetLocked(id, f)
			t.rememberLocked(id, f.owner.Name)
			out = append(out, expired{id, f})
		}
	}
	t.mu.Unlock()
	slices.SortFunc(out, func(a, b expired) int { return a.f.opened.Compare(b.f.opened) })
	for _, e := range out {
		rec, _ := t.receipt(e.f.owner, e.id, now, e.f, mcpreadyv1.WorkflowEndState_WORKFLOW_END_STATE_ABANDONED, true)
		_ = t.record(rec) // the Ledger logs a receipt it cannot record
	}
	return len(out)
}

// Run sweeps every tenth of IdleTimeout (at least every second, at most
// every minute) until ctx ends.
func (t *Tracker) Run(ctx context.Context) {
	tick := time.NewTicker(min(max(t.opts.IdleTimeout/10, time.Second), time.Minute))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			t.Sweep()
		}
	}
}

// Open is how many workflows are open.
func (t *Tracker) Open() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.open)
}

// start is a workflow receipt of p for workflow id.
func (t *Tracker) start(p Principal, id string, now time.Time) *mcpreadyv1.Receipt {
	rec := t.opts.Builder.Start(now)
	rec.RequestId = receipt.NewID()
	rec.Requested = ReportTool
	rec.WorkflowId, rec.PrincipalClass, rec.TenantClass, rec.Region = id, p.Class, p.Tenant, t.opts.Region
	return rec
}

// receipt is the workflow receipt of f ending in state.
func (t *Tracker) receipt(p Principal, id string, now time.Time, f *flow, state mcpreadyv1.WorkflowEndState, expired bool) (*mcpreadyv1.Receipt, Answer) {
	rec := t.start(p, id, now)
	rec.Outcome = mcpreadyv1.OutcomeClass_OUTCOME_CLASS_SUCCESS
	rec.WorkflowOutcome = EndStateWord(state)
	rec.Workflow = &mcpreadyv1.WorkflowRecord{EndState: state, Expired: expired, Calls: f.calls, CallsDropped: f.dropped, OpenedAt: timestamppb.New(f.opened)}
	ans := Answer{Receipt: rec.GetReceiptId(), Workflow: id, Calls: len(f.calls)}
	for _, c := range f.calls {
		if c.GetContributed() {
			ans.Contributed++
		}
	}
	return rec, ans
}

// refused is the receipt of a report refused with err.
func (t *Tracker) refused(p Principal, id string, now time.Time, err error) *mcpreadyv1.Receipt {
	rec := t.start(p, id, now)
	rec.Outcome = mcpreadyv1.OutcomeClass_OUTCOME_CLASS_REFUSED
	rec.FailedLayer = mcpreadyv1.ReadinessLayer_READINESS_LAYER_WORKFLOW
	rec.ErrorMessage = receipt.SafeError(err.Error())
	rec.Workflow = &mcpreadyv1.WorkflowRecord{RefusalCode: string(Code(err))}
	return rec
}

func (t *Tracker) record(rec *mcpreadyv1.Receipt) error {
	t.opts.Builder.Finish(rec, t.opts.Now())
	if t.opts.Emit != nil {
		t.opts.Emit(rec)
	}
	if t.opts.Ledger == nil {
		return nil
	}
	return t.opts.Ledger.Record(rec, true)
}

// EndStateWord is an end state in the words of a report ("completed", ...).
func EndStateWord(s mcpreadyv1.WorkflowEndState) string {
	for w, v := range states {
		if v == s {
			return w
		}
	}
	return ""
}
