package explain

// The recovery and result fields of a receipt in words: the idempotency
// binding, failure domains, quota and cost, whether the call was cold, how
// the agent authenticated, and the semantic validators' versions.

import (
	"fmt"
	"strings"

	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
)

// recovery is the execution paragraph's lines after the attempts (each
// indented, each only when the receipt records it).
func recovery(r *mcpreadyv1.Receipt) []string {
	var out []string
	if id := r.GetIdempotency(); id.GetKeyRef() != "" {
		out = append(out, idempotencyLine(id))
	}
	if d := r.GetFailureDomains(); len(d) > 0 {
		out = append(out, fmt.Sprintf("Failure domains of the routes tried: %s.", strings.Join(d, ", ")))
	}
	if q := r.GetQuota(); q != "" {
		out = append(out, fmt.Sprintf("Local quota: %s.", q))
	}
	if c := r.GetCost(); c != "" {
		out = append(out, fmt.Sprintf("Cost: %s.", c))
	}
	if w := warmthWords(r.GetWarmth()); w != "" {
		out = append(out, "The first attempt was "+w+".")
	}
	return out
}

// keyRef is the execution line's key reference, for a receipt that has
// one but no idempotency record (recovery words the record).
func keyRef(r *mcpreadyv1.Receipt) string {
	if r.GetIdempotency().GetKeyRef() != "" {
		return ""
	}
	return prefixed(", idempotency key ", r.GetIdempotencyKeyRef())
}

func idempotencyLine(id *mcpreadyv1.IdempotencyRecord) string {
	s := fmt.Sprintf("Idempotency key %s (a keyed reference, never the key), scoped to %s, kept %s", id.GetKeyRef(), or(id.GetScope(), "?"),
		id.GetRetention().AsDuration())
	if id.GetAllocated() {
		s += "; allocated by the agent"
	}
	if id.GetRepeat() {
		s += "; forwarded as a repeat of an earlier call with the same payload"
	}
	return s + "; carried in " + strings.Join(append(append([]string{}, id.GetCarried()...), "_meta"), " and ") + "."
}

func warmthWords(w mcpreadyv1.CallWarmth) string {
	switch w {
	case mcpreadyv1.CallWarmth_CALL_WARMTH_WARM:
		return "warm: the upstream session was in use"
	case mcpreadyv1.CallWarmth_CALL_WARMTH_COLD_NEW_SESSION:
		return "cold: it opened a new upstream session"
	case mcpreadyv1.CallWarmth_CALL_WARMTH_COLD_IDLE:
		return "cold: the upstream session had been idle past the agent's threshold"
	}
	return ""
}

// authNote is the routed line's tail naming the auth class, if recorded.
func authNote(r *mcpreadyv1.Receipt) string {
	return prefixed("; authenticated to the upstream as ", r.GetAuthClass())
}

// semanticWords is the semantic verdict with the versions of the
// validators that ran.
func semanticWords(r *mcpreadyv1.Receipt) string {
	v := or(r.GetSemanticValidation(), "not run")
	if vs := r.GetSemanticValidatorVersion(); vs != "" {
		v += " (validators " + strings.ReplaceAll(vs, ",", ", ") + ")"
	}
	return v
}
