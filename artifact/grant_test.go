package artifact

import (
	"errors"
	"strings"
	"testing"

	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
)

// TestCheckEvidenceGrant: a grant that may sign Evidence (by name or "*")
// without evidenceIssuer or independence is refused, naming each missing
// field; a bound, a revoked or a non-Evidence grant is not.
func TestCheckEvidenceGrant(t *testing.T) {
	for _, c := range []struct {
		kg      *mcpreadyv1.KeyGrant
		missing string // "" when accepted
	}{
		{&mcpreadyv1.KeyGrant{Name: "bound", Kinds: []string{"Evidence"}, EvidenceIssuer: "org/qa", Independence: "third-party"}, ""},
		{&mcpreadyv1.KeyGrant{Name: "loose", Kinds: []string{"Policy", "Evidence"}}, "evidenceIssuer nor independence"},
		{&mcpreadyv1.KeyGrant{Name: "any", Kinds: []string{"*"}, EvidenceIssuer: "org/probe"}, "no independence"},
		{&mcpreadyv1.KeyGrant{Name: "issuerless", Kinds: []string{"Evidence"}, Independence: "consumer"}, "no evidenceIssuer:"},
		{&mcpreadyv1.KeyGrant{Name: "gone", Kinds: []string{"Evidence"}, Revoked: true}, ""},
		{&mcpreadyv1.KeyGrant{Name: "policy-only", Kinds: []string{"Policy"}}, ""},
	} {
		err := CheckEvidenceGrant(c.kg)
		if c.missing == "" {
			if err != nil {
				t.Errorf("%s: %v", c.kg.GetName(), err)
			}
			continue
		}
		if !errors.Is(err, ErrEvidenceGrantUnbound) || !strings.Contains(err.Error(), c.missing) || !strings.Contains(err.Error(), `key "`+c.kg.GetName()+`"`) {
			t.Errorf("%s: %v, want %v naming %q", c.kg.GetName(), err, ErrEvidenceGrantUnbound, c.missing)
		}
	}
}
