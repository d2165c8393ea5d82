package artifact

import (
	"fmt"
	"strings"

	"google.golang.org/protobuf/proto"

	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
)

// Kind names an artifact kind.
type Kind string

// The artifact kinds.
const (
	KindTrustPolicy   Kind = "TrustPolicy"
	KindDeclaration   Kind = "Declaration"
	KindRegistryEntry Kind = "RegistryEntry"
	KindPolicy        Kind = "Policy"
	KindEvidence      Kind = "Evidence"
	KindReceiptBatch  Kind = "ReceiptBatch"
	// KindTombstone is a signed deletion of another artifact.
	KindTombstone Kind = "Tombstone"
	// KindDriftReport is an agent's signed drift report (sent with
	// ReportDrift, never stored as an artifact).
	KindDriftReport Kind = "DriftReport"
)

var kinds = map[Kind]func() proto.Message{
	KindTrustPolicy:   func() proto.Message { return &mcpreadyv1.TrustPolicy{} },
	KindDeclaration:   func() proto.Message { return &mcpreadyv1.Declaration{} },
	KindRegistryEntry: func() proto.Message { return &mcpreadyv1.RegistryEntry{} },
	KindPolicy:        func() proto.Message { return &mcpreadyv1.Policy{} },
	KindEvidence:      func() proto.Message { return &mcpreadyv1.Evidence{} },
	KindReceiptBatch:  func() proto.Message { return &mcpreadyv1.ReceiptBatch{} },
	KindTombstone:     func() proto.Message { return &mcpreadyv1.Tombstone{} },
	KindDriftReport:   func() proto.Message { return &mcpreadyv1.DriftReport{} },
}

// Kinds lists every kind in a stable order.
func Kinds() []Kind {
	return []Kind{KindTrustPolicy, KindDeclaration, KindRegistryEntry, KindPolicy, KindEvidence, KindReceiptBatch, KindTombstone, KindDriftReport}
}

// ParseKind accepts a kind name case-insensitively, also in plural
// ("policies", "registryentries") as kubectl users type them.
func ParseKind(s string) (Kind, error) {
	l := strings.ToLower(s)
	for _, k := range Kinds() {
		kl := strings.ToLower(string(k))
		if l == kl || l == kl+"s" || (strings.HasSuffix(kl, "y") && l == kl[:len(kl)-1]+"ies") {
			return k, nil
		}
	}
	return "", fmt.Errorf("%w: %q (known: %s)", ErrUnknownKind, s, strings.Join(kindNames(), ", "))
}

func kindNames() []string {
	var out []string
	for _, k := range Kinds() {
		out = append(out, string(k))
	}
	return out
}

// NewSpec returns an empty spec message for k, or nil for an unknown kind.
func (k Kind) NewSpec() proto.Message {
	f, ok := kinds[k]
	if !ok {
		return nil
	}
	return f()
}

// PredicateType is the in-toto predicateType of k,
// "https://mcpready.dev/<kind in lower case>/v1".
func (k Kind) PredicateType() string {
	return "https://mcpready.dev/" + strings.ToLower(string(k)) + "/v1"
}

// TypeURL is the discovery type URL of k, "type.mcpready.dev/mcpready.v1.<Kind>".
func (k Kind) TypeURL() string {
	return "type.mcpready.dev/mcpready.v1." + string(k)
}

// KindFromTypeURL is the inverse of TypeURL.
func KindFromTypeURL(u string) (Kind, error) {
	const p = "type.mcpready.dev/mcpready.v1."
	if !strings.HasPrefix(u, p) {
		return "", fmt.Errorf("%w: type URL %q", ErrUnknownKind, u)
	}
	k := Kind(strings.TrimPrefix(u, p))
	if k.NewSpec() == nil {
		return "", fmt.Errorf("%w: type URL %q", ErrUnknownKind, u)
	}
	return k, nil
}

// KindFromPredicateType is the inverse of PredicateType.
func KindFromPredicateType(t string) (Kind, error) {
	for _, k := range Kinds() {
		if k.PredicateType() == t {
			return k, nil
		}
	}
	return "", fmt.Errorf("%w: predicateType %q", ErrUnknownKind, t)
}
