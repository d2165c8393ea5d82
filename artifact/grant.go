package artifact

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
)

// ErrEvidenceGrantUnbound: a TrustPolicy key grant may sign Evidence but
// does not bind both claims an Evidence makes (evidenceIssuer,
// independence). Such a key could state any issuer and any independence
// class, so a Policy's acceptedIssuers and requiredIndependence would not
// constrain it; sign.NewTrust refuses the TrustPolicy instead.
var ErrEvidenceGrantUnbound = errors.New("a grant of Evidence binds no claim")

// CheckEvidenceGrant refuses (wrapping ErrEvidenceGrantUnbound, naming
// each missing field) a grant whose kinds allow Evidence (by name or
// "*") without both evidenceIssuer and independence. A revoked grant
// (revoked: true) signs nothing and is not checked, so a chain keeps
// revoking keys granted before the rule.
func CheckEvidenceGrant(kg *mcpreadyv1.KeyGrant) error {
	if kg.GetRevoked() || !slices.ContainsFunc(kg.GetKinds(), func(k string) bool { return k == "*" || k == string(KindEvidence) }) {
		return nil
	}
	var missing []string
	if kg.GetEvidenceIssuer() == "" {
		missing = append(missing, "evidenceIssuer")
	}
	if kg.GetIndependence() == "" {
		missing = append(missing, "independence")
	}
	if len(missing) == 0 {
		return nil
	}
	return fmt.Errorf("%w: key %q may sign Evidence but sets no %s: set both evidenceIssuer and independence, the only claims its Evidence may make",
		ErrEvidenceGrantUnbound, kg.GetName(), strings.Join(missing, " nor "))
}
