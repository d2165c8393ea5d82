package lifecycle

// Drift reports are signed artifacts (kind DriftReport). The Manager acts
// only on a report that verifies under the active TrustPolicy with a key
// granted the DriftReport kind for the reporting node ("<node id>/*": the
// report's metadata.name is "<node id>/<entry name>"), whose node id is
// the caller's (which controlplane/authz binds to the caller's
// certificate), whose issuedAt lies within the report window, and which
// names the digest of the entry's current bundle. Reports are rate-limited
// per node, and the candidates one entry may accumulate are bounded.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/mcpready/mcpready/artifact"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
)

// Reasons a drift report is refused; each error also carries a gRPC
// status (status.Code works on it).
var (
	// ErrUnsignedReport: the request carries no signed report, or sets the
	// unsigned fields beside one.
	ErrUnsignedReport = errors.New("drift report not signed")
	// ErrReportSigner: the report does not verify, or its key is not
	// granted DriftReport for the reporting node, or the node is not the
	// caller's.
	ErrReportSigner = errors.New("drift report signer not accepted")
	// ErrReportStale: issuedAt is missing or outside the report window.
	ErrReportStale = errors.New("drift report outside the report window")
	// ErrReportRevision: the report is about another revision of the
	// entry than the current one.
	ErrReportRevision = errors.New("drift report about another revision")
	// ErrReportRate: the node sent more reports than its rate allows.
	ErrReportRate = errors.New("drift reports rate-limited")
	// ErrTooManyCandidates: the entry already has the maximum number of
	// candidates created from reports.
	ErrTooManyCandidates = errors.New("too many candidates for the entry")
)

// Defaults of the report limits (Options zero values).
const (
	DefaultReportWindow          = 10 * time.Minute
	DefaultReportsPerMinute      = 30
	DefaultMaxCandidatesPerEntry = 4
)

// reportError is a refusal with its sentinel and gRPC status.
type reportError struct {
	code   codes.Code
	reason error
	detail string
}

func (e *reportError) Error() string {
	if e.detail == "" {
		return e.reason.Error()
	}
	return e.reason.Error() + ": " + e.detail
}
func (e *reportError) Unwrap() error              { return e.reason }
func (e *reportError) GRPCStatus() *status.Status { return status.New(e.code, e.Error()) }

func refuse(code codes.Code, reason error, format string, args ...any) error {
	return &reportError{code: code, reason: reason, detail: fmt.Sprintf(format, args...)}
}

// refusalReasons are the metric and log reasons of the refusal sentinels.
var refusalReasons = map[error]string{ErrUnsignedReport: "unsigned", ErrReportSigner: "signer", ErrReportStale: "stale",
	ErrReportRevision: "revision", ErrReportRate: "rate", ErrTooManyCandidates: "candidates"}

// refusalReason is the reason of a report refusal, or "" when err is none.
func refusalReason(err error) string {
	var re *reportError
	if errors.As(err, &re) {
		return refusalReasons[re.reason]
	}
	return ""
}

// limiters holds one token bucket per reporting node.
type limiters struct {
	mu     sync.Mutex
	perMin int
	m      map[string]*rate.Limiter
}

func (l *limiters) allow(node string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = map[string]*rate.Limiter{}
	}
	lim, ok := l.m[node]
	if !ok {
		lim = rate.NewLimiter(rate.Limit(float64(l.perMin)/60), max(l.perMin/3, 1))
		l.m[node] = lim
	}
	return lim.Allow()
}

// verifyReport returns the signed report of req, or a refusal.
func (m *Manager) verifyReport(ctx context.Context, req *mcpreadyv1.ReportDriftRequest) (*mcpreadyv1.DriftReport, error) {
	if len(req.GetReport()) == 0 {
		return nil, refuse(codes.Unauthenticated, ErrUnsignedReport, "send the report signed by the agent's key (kind DriftReport)")
	}
	if req.GetEntryName() != "" || len(req.GetLabels()) > 0 || req.GetObserved() != nil || req.GetDetail() != "" {
		return nil, refuse(codes.InvalidArgument, ErrUnsignedReport, "entry_name, labels, observed and detail travel in the signed report only")
	}
	trust, err := m.o.Writer.Active(ctx)
	if err != nil {
		return nil, status.Errorf(codes.FailedPrecondition, "no active TrustPolicy to verify the drift report against: %v", err)
	}
	now := m.o.Now()
	v, err := trust.Verify(req.GetReport(), now)
	if err != nil {
		return nil, refuse(codes.PermissionDenied, ErrReportSigner, "%v", err)
	}
	dr, ok := v.Object.Spec.(*mcpreadyv1.DriftReport)
	if !ok {
		return nil, refuse(codes.InvalidArgument, ErrUnsignedReport, "the bundle holds a %s, not a DriftReport", v.Object.Kind)
	}
	node := req.GetNode().GetId()
	if node == "" || dr.GetNodeId() != node || v.Object.Metadata.Name != node+"/"+dr.GetEntryName() {
		return nil, refuse(codes.PermissionDenied, ErrReportSigner, "report %q names node %q; the caller is node %q and the name must be <node>/<entry>", v.Object.Metadata.Name, dr.GetNodeId(), node)
	}
	issued := v.Object.Provenance().GetIssuedAt()
	if issued == nil || now.Sub(issued.AsTime()).Abs() > m.window() {
		return nil, refuse(codes.FailedPrecondition, ErrReportStale, "issuedAt must be within %s of the control plane's clock", m.window())
	}
	if err := artifact.CheckExpiry(v.Object, now); err != nil {
		return nil, refuse(codes.FailedPrecondition, ErrReportStale, "%v", err)
	}
	if !m.reports.allow(node) {
		return nil, refuse(codes.ResourceExhausted, ErrReportRate, "node %q: at most %d reports a minute", node, m.reports.perMin)
	}
	return dr, nil
}

func (m *Manager) window() time.Duration {
	if m.o.ReportWindow > 0 {
		return m.o.ReportWindow
	}
	return DefaultReportWindow
}

// checkCandidateBound refuses a new candidate for entry when it already
// has the maximum number of candidates created from reports.
func (m *Manager) checkCandidateBound(ctx context.Context, entry, candName string) error {
	recs, _, err := m.st.List(ctx, artifact.KindRegistryEntry)
	if err != nil {
		return err
	}
	n := 0
	for _, r := range recs {
		if r.Name == candName {
			return nil // exists: no new candidate
		}
		if !r.Deleted && strings.HasPrefix(r.Name, entry+"+") {
			n++
		}
	}
	limit := m.o.MaxCandidatesPerEntry
	if limit <= 0 {
		limit = DefaultMaxCandidatesPerEntry
	}
	if n >= limit {
		return refuse(codes.ResourceExhausted, ErrTooManyCandidates, "entry %q already has %d candidates from drift reports; qualify or delete them first", entry, n)
	}
	return nil
}
