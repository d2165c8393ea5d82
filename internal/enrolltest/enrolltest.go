// Package enrolltest enrols a live MCP server's tools for tests: the
// RegistryEntry objects enrolment drafts from its listing, marked
// QUALIFIED, as an organisation would publish them after qualification.
// It is for tests only and must not be imported by the packages it tests
// with; it decides nothing and stores nothing.
package enrolltest

import (
	"context"
	"testing"
	"time"

	"github.com/mcpready/mcpready/agent/config"
	"github.com/mcpready/mcpready/agent/enroll"
	"github.com/mcpready/mcpready/artifact"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
)

// Qualified lists up's tools and returns one QUALIFIED RegistryEntry object
// per tool, issued by "org" now; it fails t when up cannot be listed.
func Qualified(t testing.TB, up config.Upstream) []*artifact.Object {
	t.Helper()
	srv, err := enroll.List(context.Background(), up)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	objs, err := srv.Entries("org", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		o.Spec.(*mcpreadyv1.RegistryEntry).State = mcpreadyv1.LifecycleState_LIFECYCLE_STATE_QUALIFIED
	}
	return objs
}
