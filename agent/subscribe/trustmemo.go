package subscribe

// The verified trust chain is remembered per exact set of offered
// TrustPolicy bundles, so a TrustPolicy response that offers what was
// already verified (the held bundle again, after a reconnect, a repeated
// full set, a removal-only delta) is not verified again. The key is each
// bundle's name and the digest of its exact bytes (artifact.Digest),
// which fixes its signed version: a different bundle, even at the same
// version and name, is another key and goes through sign.PickTrust. Only
// successes are remembered. The outcome of PickTrust does not depend on
// the time except for the TrustPolicy's own expiry, which Apply checks on
// every use (Client.fresh); the successor check against the high-water
// marks is not remembered either.

import (
	"slices"
	"strings"

	"github.com/mcpready/mcpready/artifact"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/sign"
)

// maxTrustMemo bounds the remembered sets; beyond it the memo starts over.
const maxTrustMemo = 8

type trustPick struct {
	trust *sign.Trust
	ref   sign.TrustRef
}

// trustKey is the memo key of an offered set: "name\x00digest" per
// bundle, sorted, joined by "\x01".
func trustKey(rs map[string]*mcpreadyv1.Resource) string {
	parts := make([]string, 0, len(rs))
	for _, r := range rs {
		parts = append(parts, r.GetName()+"\x00"+artifact.Digest(r.GetBundle()))
	}
	slices.Sort(parts)
	return strings.Join(parts, "\x01")
}
