package decide

import (
	"testing"

	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/readiness"
)

func TestClientRequest(t *testing.T) {
	in := fixture()
	if !snap(t, in).ClientRequest("com.example/docs", "dev", readiness.ClientSampling) {
		t.Fatal("no clientRequests: every request must be allowed")
	}
	in.Policy.ClientRequests = []*mcpreadyv1.ClientRequestRule{
		{Server: "com.example/*", Allow: []string{readiness.ClientElicitation}},
		{Server: "com.other/docs", PrincipalClasses: []string{"ops"}, Allow: []string{"*"}},
	}
	s := snap(t, in)
	for _, c := range []struct {
		server, principal, method string
		want                      bool
	}{
		{"com.example/docs", "dev", readiness.ClientElicitation, true},
		{"com.example/docs", "dev", readiness.ClientSampling, false},
		{"com.example/docs", "dev", readiness.ClientRoots, false},
		{"com.other/docs", "ops", readiness.ClientSampling, true},
		{"com.other/docs", "dev", readiness.ClientSampling, false},
		{"com.evil/x", "ops", readiness.ClientElicitation, false},
	} {
		if got := s.ClientRequest(c.server, c.principal, c.method); got != c.want {
			t.Errorf("ClientRequest(%q, %q, %q) = %v, want %v", c.server, c.principal, c.method, got, c.want)
		}
	}
}
