package pipeline

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcpready/mcpready/agent/internal/mcptest"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/readiness"
)

// An entry whose endpoint host is outside its own networkScope is never
// dialled: with another admitted route the call runs there, without one
// it is refused (endpoint_out_of_scope). Before, the out-of-scope endpoint
// was called.
func TestEndpointOutsideNetworkScopeNeverDialled(t *testing.T) {
	upA, upB := mcptest.New(t, mcptest.Options{}), mcptest.New(t, mcptest.Options{})
	out := entry("test", upA.URL)
	out.NetworkScope = []string{"docs.example"}
	in := entry("test", upB.URL)
	in.NetworkScope = []string{"docs.example", "127.0.0.1"}

	pl, st, recs := setup(t, policy(), map[string]*mcpreadyv1.RegistryEntry{"a": out, "b": in})
	tr := newFake(t)
	res := pl.Call(context.Background(), st, request("test/echo"), tr)
	if res.Answer == nil || res.Answer.IsError || !slices.Equal(tr.dialled, []string{upB.URL}) {
		t.Fatalf("answer %+v, dialled %v: want only B %s", res.Answer, tr.dialled, upB.URL)
	}

	pl, st, recs = setup(t, policy(), map[string]*mcpreadyv1.RegistryEntry{"a": out})
	tr = newFake(t)
	res = pl.Call(context.Background(), st, request("test/echo"), tr)
	te, ok := ParseToolError(res.Answer)
	if !ok || te.Code != string(readiness.CodeEndpointOutOfScope) || len(tr.dialled) != 0 {
		t.Fatalf("out-of-scope only: answer %+v, dialled %v", te, tr.dialled)
	}
	if len(recs.recs) != 1 || recs.recs[0].GetOutcome() != mcpreadyv1.OutcomeClass_OUTCOME_CLASS_REFUSED {
		t.Fatalf("receipts %v", recs.recs)
	}
}

// The pinned endpoint redirects tools/call to another origin: nothing
// reaches that origin, the receipt records a network-identity failure
// naming it, and the control plane gets one NETWORK_DRIFT report whose
// observed identity has the redirect target as endpoint (before: no
// report at all).
func TestRedirectReportedAsNetworkDrift(t *testing.T) {
	var seen atomic.Int64
	other := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { seen.Add(1) }))
	defer other.Close()
	up := mcptest.New(t, mcptest.Options{})
	up.RedirectTo(other.URL + "/mcp")
	pl, st, recs := setup(t, policy(), map[string]*mcpreadyv1.RegistryEntry{"a": entry("test", up.URL)})
	reports := make(chan *mcpreadyv1.ReportDriftRequest, 4)
	pl.opts.ReportDrift = func(_ context.Context, req *mcpreadyv1.ReportDriftRequest) error {
		reports <- req
		return nil
	}
	tr := newFake(t)
	if res := pl.Call(context.Background(), st, request("test/echo"), tr); res.Answer == nil || res.Answer.IsError {
		t.Fatalf("warm-up %+v", res.Answer)
	}
	up.SetFault(mcptest.FaultRedirect, "tools/call")
	for range 2 {
		res := pl.Call(context.Background(), st, request("test/echo"), tr)
		if te, ok := ParseToolError(res.Answer); !ok || te.Layer != "REACHABILITY" || !strings.Contains(te.Reason, "network identity") {
			t.Fatalf("redirected call answered %+v", res.Answer)
		}
	}
	if seen.Load() != 0 {
		t.Fatalf("the other origin saw %d requests", seen.Load())
	}
	last := recs.recs[len(recs.recs)-1]
	if !strings.Contains(last.GetErrorMessage(), "network identity") || !strings.Contains(last.GetErrorMessage(), other.URL) {
		t.Fatalf("receipt error %q", last.GetErrorMessage())
	}
	select {
	case req := <-reports:
		if req.GetEntryName() != "a" || !slices.Equal(req.GetLabels(), []mcpreadyv1.DriftLabel{mcpreadyv1.DriftLabel_DRIFT_LABEL_NETWORK_DRIFT}) ||
			req.GetObserved().GetEndpoint() != other.URL+"/mcp" || req.GetObserved().GetToolName() != "echo" {
			t.Fatalf("drift report %v", req)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no NETWORK_DRIFT report")
	}
	select {
	case req := <-reports:
		t.Fatalf("second report for the same redirect: %v", req)
	case <-time.After(100 * time.Millisecond):
	}
}
