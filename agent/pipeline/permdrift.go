package pipeline

// PERMISSION_DRIFT: an upstream token that grants more authority than the
// entry was qualified with is refused at step 2 (decide) or when it is
// presented (the access transport), and reported to the control plane,
// which suspends the entry until it is qualified again.

import (
	"context"
	"slices"
	"strings"
	"time"

	"golang.org/x/time/rate"
	"google.golang.org/protobuf/proto"

	"github.com/mcpready/mcpready/agent/access"
	"github.com/mcpready/mcpready/agent/decide"
	"github.com/mcpready/mcpready/agent/invoke"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/readiness"
)

// Permission drift reports are rate-limited across entries and scope sets
// (each pair is reported once): a burst of driftBurst, then one every
// driftEvery. A report over the limit is dropped and sent at a later call
// that still sees the drift.
const (
	driftBurst = 5
	driftEvery = 10 * time.Second
)

func newDriftLimiter() *rate.Limiter { return rate.NewLimiter(rate.Every(driftEvery), driftBurst) }

// permissionDrift reports PERMISSION_DRIFT for the candidates of d that
// step 2 rejected with permission_drift.
func (p *Pipeline) permissionDrift(st *State, c Caller, d *decide.Decision, now time.Time) {
	if p.opts.ReportDrift == nil || p.opts.Access == nil {
		return
	}
	for _, cd := range d.Candidates {
		if cd.GetRejectionCode() == string(readiness.CodePermissionDrift) {
			p.reportPermissionDrift(st, c, cd.GetEntry(), cd.GetServerName(), now)
		}
	}
}

// reportPermissionDrift checks the token c's calls present to server
// against entry's qualified authority and, when it grants more, reports
// it once per entry and granted scope set, in the background.
func (p *Pipeline) reportPermissionDrift(st *State, c Caller, entry, server string, now time.Time) {
	x := st.Decide.AccessExpect(entry)
	up, ok := p.opts.AccessUpstream(server)
	if x == nil || !ok {
		return
	}
	g := p.opts.Access.Lookup(access.Principal{Name: c.Name}, up)
	if g == nil {
		return
	}
	if rj, ok := access.Check(&g.Facts, x, now); ok || rj.Code != readiness.CodePermissionDrift {
		return
	}
	key := "permission|" + entry + "|" + strings.Join(g.Facts.Scopes, " ")
	if _, dup := p.reported.Load(key); dup || !p.driftLimit.Allow() {
		return
	}
	if _, dup := p.reported.LoadOrStore(key, true); dup {
		return
	}
	var beyond []string
	for _, sc := range g.Facts.Scopes {
		if !slices.Contains(x.QualifiedScopes, sc) {
			beyond = append(beyond, sc)
		}
	}
	observed := proto.Clone(st.Decide.Entry(entry).GetIdentity()).(*mcpreadyv1.ToolIdentity)
	req := &mcpreadyv1.ReportDriftRequest{EntryName: entry, Labels: []mcpreadyv1.DriftLabel{mcpreadyv1.DriftLabel_DRIFT_LABEL_PERMISSION_DRIFT},
		Observed: observed, Detail: "observed by host agent at tools/call: the upstream token grants scopes beyond the qualified permission set: " + strings.Join(beyond, " ")}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := p.opts.ReportDrift(ctx, req); err != nil {
			p.reported.Delete(key) // reported again at a later call
			p.opts.Logger.Warn("reporting permission drift", "entry", entry, "err", err)
		}
	}()
}

// failed is the outcome of route r's failed attempt; when the access
// layer refused it, the token obtained for it may be the drift (the
// decision saw no token yet).
func (p *Pipeline) failed(st *State, c Caller, r decide.Route, err error) invoke.Outcome {
	out := failureOutcome(err)
	if out.Class == mcpreadyv1.OutcomeClass_OUTCOME_CLASS_ACCESS_NOT_READY && p.opts.ReportDrift != nil && p.opts.Access != nil {
		p.reportPermissionDrift(st, c, r.Entry, r.Identity.GetServerName(), p.opts.Now())
	}
	return out
}
