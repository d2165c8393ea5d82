package front

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/readiness"
)

// With Policy.clientRequests set, an upstream's request towards the client
// that no rule grants is refused before the client sees it, on every path
// such a request takes: a session-era upstream's sampling request on a
// dedicated session, a stateless upstream's input request fulfilled over a
// session-era client's session, and input requests handed to a stateless
// client (its own or a held call's). Granted requests still reach the
// client. Failed before: every upstream could sample the client's model.
func TestClientRequestsUnderPolicy(t *testing.T) {
	h := newMRTRHarness(t)
	p := mrtrPolicy()
	p.ClientRequests = []*mcpreadyv1.ClientRequestRule{{Server: "*", Allow: []string{readiness.ClientElicitation}}}
	h.install(t, p)
	for _, version := range []string{"2026-07-28", "2025-11-25"} {
		t.Run(version, func(t *testing.T) {
			var asked []string
			cs := h.connect(t, "/mcp/servers/st", devToken, answering(true, &asked), version)
			if got := text(call(t, cs, "confirm", map[string]any{"text": "tea"})); got != "tea: accept ok=true" {
				t.Fatalf("granted elicitation: got %q", got)
			}
			wantToolError(t, call(t, cs, "capital", map[string]any{}), "REFUSED", readiness.CodeClientRequestNotPermitted)
			old := h.connect(t, "/mcp/servers/old", devToken, answering(true, &asked), version)
			if got := text(call(t, old, "ask", map[string]any{})); got != "accept ok=true" {
				t.Fatalf("granted elicitation of a session-era upstream: got %q", got)
			}
			if res := call(t, old, "muse", map[string]any{}); !res.IsError {
				t.Fatalf("refused sampling of a session-era upstream answered: %q", text(res))
			}
			if slices.Contains(asked, "capital of France?") {
				t.Fatalf("the client was asked to sample: %q", asked)
			}
		})
	}
	// Once per era and server: each refusal is counted once, on whichever
	// path it took.
	for _, server := range []string{"st", "old"} {
		if n := testutil.ToFloat64(h.front.metrics.clientRequestsRefused.WithLabelValues(server, readiness.ClientSampling)); n != 2 {
			t.Errorf("refusals of %s's sampling counted %v, want 2", server, n)
		}
		if n := testutil.ToFloat64(h.front.metrics.clientRequestsRefused.WithLabelValues(server, readiness.ClientElicitation)); n != 0 {
			t.Errorf("granted elicitation of %s counted as refused %v times", server, n)
		}
	}
}

// Every request an upstream sends towards the client leaves a receipt of
// its own: the request (digested, never quoted), the server, the caller's
// classes and the outcome, whether the client answered it or the policy
// refused it. Failed before: only the call's receipt recorded the call,
// and a sampling request on a dedicated session left no trace at all.
func TestClientRequestsReceipted(t *testing.T) {
	h := newMRTRHarness(t)
	p := mrtrPolicy()
	p.ClientRequests = []*mcpreadyv1.ClientRequestRule{{Server: "*", Allow: []string{readiness.ClientElicitation}}}
	h.install(t, p)
	var asked []string
	old := h.connect(t, "/mcp/servers/old", devToken, answering(true, &asked), "2025-11-25")
	if got := text(call(t, old, "ask", map[string]any{})); got != "accept ok=true" {
		t.Fatalf("ask: got %q", got)
	}
	_ = call(t, old, "muse", map[string]any{})
	st := h.connect(t, "/mcp/servers/st", devToken, answering(true, &asked), "2025-11-25")
	if got := text(call(t, st, "confirm", map[string]any{"text": "tea"})); got != "tea: accept ok=true" {
		t.Fatalf("confirm: got %q", got)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	var got []string
	for _, r := range h.recs {
		if !strings.HasPrefix(r.GetRequested(), "elicitation/") && !strings.HasPrefix(r.GetRequested(), "sampling/") {
			continue
		}
		got = append(got, fmt.Sprintf("%s %s %s %s", r.GetRequested(), r.GetSelected().GetServerName(), readiness.OutcomeName(r.GetOutcome()), r.GetPrincipalClass()))
		if r.GetArgumentsDigest() == "" || strings.Contains(r.String(), "sure about tea") || strings.Contains(r.String(), "capital of France") {
			t.Errorf("receipt %s: want the request digested, never quoted: %v", r.GetRequested(), r)
		}
		if r.GetOutcome() == mcpreadyv1.OutcomeClass_OUTCOME_CLASS_REFUSED && !strings.Contains(r.GetErrorMessage(), string(readiness.CodeClientRequestNotPermitted)) {
			t.Errorf("refusal receipt does not name its code: %q", r.GetErrorMessage())
		}
	}
	want := []string{"elicitation/create old SUCCESS dev", "sampling/createMessage old REFUSED dev", "elicitation/create st SUCCESS dev"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("client request receipts:\n got %q\nwant %q", got, want)
	}
}
