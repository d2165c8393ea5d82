package subscribe

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcpready/mcpready/artifact"
	"github.com/mcpready/mcpready/sign"
)

// newNacks is mcpready_agent_discovery_nacks_total, registered on reg
// when it is not nil.
func newNacks(reg prometheus.Registerer) (*prometheus.CounterVec, error) {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "mcpready_agent_discovery_nacks_total",
		Help: "Discovery responses this agent refused (NACKed), by resource type (unknown for a type that is not one) and reason (e.g. rollback, expired, key-revoked, tombstone, unsigned-removal)."}, []string{"type_url", "reason"})
	if reg != nil {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// nackReason is the stable reason of a NACK: the version check's, the
// signature check's, or this package's own.
func nackReason(err error) string {
	var ve *artifact.VersionError
	switch {
	case errors.As(err, &ve):
		return ve.Reason
	case sign.ReasonOf(err) != "":
		return string(sign.ReasonOf(err))
	case errors.Is(err, sign.ErrTrustChain):
		return sign.ErrTrustChain.Error()
	case errors.Is(err, ErrUnsignedRemoval):
		return ErrUnsignedRemoval.Error()
	case errors.Is(err, ErrOutOfScope):
		return ErrOutOfScope.Error()
	case errors.Is(err, ErrNoTrust):
		return "no-trust"
	case errors.Is(err, artifact.ErrUnknownKind):
		return "unknown-kind"
	}
	return "other"
}
