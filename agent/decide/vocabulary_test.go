package decide

import (
	"slices"
	"testing"

	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
)

func TestWarnings(t *testing.T) {
	tests := []struct {
		name string
		pol  *mcpreadyv1.Policy
		decl []string
		want []string
	}{
		{"known names in any spelling", &mcpreadyv1.Policy{
			Retry:    &mcpreadyv1.RetryRules{RetryableConditions: []string{"Timeout", "HTTP_5xx", " transport "}},
			Evidence: &mcpreadyv1.EvidenceRules{RequiredIndependence: "Third_Party"}}, []string{"rate-limited"}, nil},
		{"nothing set", &mcpreadyv1.Policy{}, nil, nil},
		{"unknown names", &mcpreadyv1.Policy{
			Retry:    &mcpreadyv1.RetryRules{RetryableConditions: []string{"timeout", "http-418"}},
			Evidence: &mcpreadyv1.EvidenceRules{RequiredIndependence: "audited"}}, []string{"flaky"},
			[]string{
				`policy retry.retryableConditions: unknown retry condition "http-418" (matches no failure)`,
				`declaration acme retryableConditions: unknown retry condition "flaky" (matches no failure)`,
				`policy evidence.requiredIndependence: unknown value "audited" (no evidence meets it)`,
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := NewSnapshot(Inputs{Policy: tt.pol, Declarations: map[string]*mcpreadyv1.Declaration{
				"acme": {RetryableConditions: tt.decl}}})
			if err != nil {
				t.Fatal(err)
			}
			if got := s.Warnings(); !slices.Equal(got, tt.want) {
				t.Fatalf("warnings\n got %q\nwant %q", got, tt.want)
			}
		})
	}
}
