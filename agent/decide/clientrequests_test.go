package decide

import (
	"testing"

	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
)

func TestClientRequest(t *testing.T) {
	in := fixture()
	if !snap(t, in).ClientRequest("com.example/docs", "dev", ClientSampling) {
		t.Fatal("no clientRequests: every request must be allowed")
	}
	in.Policy.ClientRequests = []*mcpreadyv1.ClientRequestRule{
		{Server: "com.example/*", Allow: []string{ClientElicitation}},
		{Server: "com.other/docs", PrincipalClasses: []string{"ops"}, Allow: []string{"*"}},
	}
	s := snap(t, in)
	for _, c := range []struct {
		server, principal, method string
		want                      bool
	}{
		{"com.example/docs", "dev", ClientElicitation, true},
		{"com.example/docs", "dev", ClientSampling, false},
		{"com.example/docs", "dev", ClientRoots, false},
		{"com.other/docs", "ops", ClientSampling, true},
		{"com.other/docs", "dev", ClientSampling, false},
		{"com.evil/x", "ops", ClientElicitation, false},
	} {
		if got := s.ClientRequest(c.server, c.principal, c.method); got != c.want {
			t.Errorf("ClientRequest(%q, %q, %q) = %v, want %v", c.server, c.principal, c.method, got, c.want)
		}
	}
}
