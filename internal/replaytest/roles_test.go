package replaytest_test

import (
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/mcpready/mcpready/artifact"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/internal/testpki"
)

// TestWrongRoleStoresNothing: valid, newer bundles and the exact
// tombstone sent by callers without the admin role (a reader, an agent, a
// certificate no rule names) are refused before the write path, store
// nothing, and are counted and logged per method; an agent cannot read
// the history of what it runs. The matrix of every RPC against every
// wrong role is controlplane/authz's TestEveryRPCEveryWrongRole.
func TestWrongRoleStoresNothing(t *testing.T) {
	t.Parallel()
	e := start(t)
	k, name := artifact.KindPolicy, nameOf(artifact.KindPolicy)
	v1 := e.version(k, "1", "", time.Time{})
	e.apply(v1)
	callers := map[string]mcpreadyv1.AdminServiceClient{}
	for _, cn := range []string{"reader-audit", node, "stranger"} {
		callers[cn] = mcpreadyv1.NewAdminServiceClient(e.dial(cn))
	}
	rev := e.etcdRevision()
	for cn, c := range callers {
		if _, err := c.Apply(ctx(t), &mcpreadyv1.ApplyRequest{Bundle: e.version(k, "2", cn, time.Time{})}); status.Code(err) != codes.PermissionDenied {
			t.Errorf("%s applies: %v", cn, err)
		}
		if _, err := c.Delete(ctx(t), &mcpreadyv1.DeleteRequest{Tombstone: testpki.Tombstone(t, v1, "", e.pki.Org)}); status.Code(err) != codes.PermissionDenied {
			t.Errorf("%s deletes: %v", cn, err)
		}
	}
	if _, err := callers[node].History(ctx(t), &mcpreadyv1.HistoryRequest{Kind: string(k), Name: name}); status.Code(err) != codes.PermissionDenied {
		t.Errorf("an agent reads the history: %v", err)
	}
	if r := e.etcdRevision(); r != rev {
		t.Fatalf("refused callers wrote (etcd revision %d, was %d)", r, rev)
	}
	for _, m := range []string{"Apply", "Delete"} {
		method := "/mcpready.v1.AdminService/" + m
		if got := e.counter("mcpready_controlplane_rpc_refused_total", map[string]string{"method": method, "reason": "forbidden"}); got != float64(len(callers)) {
			t.Errorf("%s refusals counted: %v, want %d", m, got, len(callers))
		}
		if got := e.logged("rpc refused", map[string]string{"method": method, "reason": "forbidden"}); got != len(callers) {
			t.Errorf("%s refusals logged: %d, want %d", m, got, len(callers))
		}
	}
}
