package front

import (
	"testing"

	"github.com/mcpready/mcpready/agent/config"
	"github.com/mcpready/mcpready/internal/oauthtest"
	"github.com/mcpready/mcpready/readiness"
)

// TestTenantCheckedPerCall: the upstream token's tenant claim (oauth.
// tenantClaim) must be the tenant the entry was qualified in; once the
// entry requires another tenant than the held token's, the call is refused
// at step 2 with tenant_mismatch before the upstream sees it, and the
// receipt names the rejection. Failed before: the tenant was never looked
// at and the call reached the upstream.
func TestTenantCheckedPerCall(t *testing.T) {
	as := oauthtest.Start(t, oauthtest.Options{Clients: []oauthtest.Client{{ID: "agent", Secret: "s", Claims: map[string]any{"tid": "tenant-b"}}}})
	o := &config.OAuth{Grant: config.GrantClientCredentials, ClientID: "agent", Scopes: []string{"read"}, TenantClaim: "tid"}
	h, hits, _, install := oauthFront(t, as, o, nil)
	tenant := func(tn string) {
		for _, e := range h.entries {
			e.Authority.Tenant = tn
		}
		install(as.Issuer)
	}
	tenant("tenant-b")
	cs := h.connect(t, "/mcp/servers/sec", devToken, nil, "2025-11-25")
	if res := call(t, cs, "echo", map[string]any{"text": "hi"}); res.IsError {
		t.Fatalf("token of the required tenant refused: %+v", res.Content[0])
	}

	tenant("tenant-a")
	before := hits.Load()
	te := wantToolError(t, call(t, cs, "echo", map[string]any{"text": "hi"}), "REFUSED", readiness.CodeTenantMismatch)
	if te.Step != int(readiness.StepTrust) || hits.Load() != before {
		t.Fatalf("refusal %+v; upstream hits %d -> %d", te, before, hits.Load())
	}
	h.mu.Lock()
	rec := h.recs[len(h.recs)-1]
	h.mu.Unlock()
	if c := rec.GetCandidates(); len(c) != 1 || c[0].GetRejectionCode() != string(readiness.CodeTenantMismatch) || c[0].GetRejectedAtStep() != readiness.StepTrust {
		t.Fatalf("receipt candidates %v", c)
	}
}
