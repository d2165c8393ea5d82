package decide

import (
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
)

// A provider's declared timeouts (Declaration.timeouts) set a route's
// per-attempt timeout where the Policy sets none: perAttempt as it is, and
// recommendedTotal shared by the route's attempts when it is shorter than
// the deadline. The Policy's own per-attempt timeout wins, and no attempt
// outlasts the deadline. Before, both were accepted and ignored: a
// provider declaring 4 s per attempt got 5 s (10 s deadline, 2 attempts).
func TestDeclaredTimeouts(t *testing.T) {
	d := func(v time.Duration) *durationpb.Duration { return durationpb.New(v) }
	cases := []struct {
		name     string
		declared *mcpreadyv1.DeclaredTimeouts
		policyPA time.Duration
		deadline time.Duration
		want     time.Duration
	}{
		{"none declared", nil, 0, 10 * time.Second, 5 * time.Second},
		{"declared per attempt", &mcpreadyv1.DeclaredTimeouts{PerAttempt: d(4 * time.Second)}, 0, 10 * time.Second, 4 * time.Second},
		{"declared total shared by the attempts", &mcpreadyv1.DeclaredTimeouts{RecommendedTotal: d(6 * time.Second)}, 0, 10 * time.Second, 3 * time.Second},
		{"declared total longer than the deadline", &mcpreadyv1.DeclaredTimeouts{RecommendedTotal: d(60 * time.Second)}, 0, 10 * time.Second, 5 * time.Second},
		{"declared per attempt over the total", &mcpreadyv1.DeclaredTimeouts{RecommendedTotal: d(6 * time.Second), PerAttempt: d(4 * time.Second)}, 0, 10 * time.Second, 4 * time.Second},
		{"declared per attempt past the deadline", &mcpreadyv1.DeclaredTimeouts{PerAttempt: d(30 * time.Second)}, 0, 10 * time.Second, 10 * time.Second},
		{"policy per attempt wins", &mcpreadyv1.DeclaredTimeouts{PerAttempt: d(4 * time.Second), RecommendedTotal: d(2 * time.Second)}, 7 * time.Second, 10 * time.Second, 7 * time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := fixture()
			in.Policy.Deadline = d(tc.deadline)
			if tc.policyPA > 0 {
				in.Policy.Retry.PerAttemptTimeout = d(tc.policyPA)
			}
			in.Declarations["com.example/docs"] = &mcpreadyv1.Declaration{ServerName: "com.example/docs", Timeouts: tc.declared}
			req := baseReq()
			req.Tool = "com.example/docs/docs.lookup"
			dec := snap(t, in).Decide(req, nil)
			if len(dec.Routes) != 1 || dec.Routes[0].MaxAttempts != 2 {
				t.Fatalf("routes %+v", dec.Routes)
			}
			if got := dec.Routes[0].PerAttempt; got != tc.want {
				t.Fatalf("per attempt %v, want %v", got, tc.want)
			}
		})
	}
}
