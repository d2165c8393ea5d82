package pipeline

import (
	"fmt"
	"slices"
	"strings"

	"github.com/mcpready/mcpready/agent/decide"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
)

// approvalPrompt is the question put to the human approving route r for
// caller: the tool, the server, the caller, the side-effect class, whether the effect
// can be undone, whether the tool offers a dry run (RegistryEntry
// dry_run_supported), and only the arguments the redaction allow-list keeps
// (rec.kept_arguments, never the others).
func approvalPrompt(caller string, rec *mcpreadyv1.Receipt, r *decide.Route) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Approve calling %s on %s", r.Identity.GetToolName(), r.Identity.GetServerName())
	if caller != "" {
		fmt.Fprintf(&b, " for %s", caller)
	}
	se := r.ConsumerSideEffect
	if se == mcpreadyv1.SideEffectClass_SIDE_EFFECT_CLASS_UNKNOWN || se == mcpreadyv1.SideEffectClass_SIDE_EFFECT_CLASS_UNSPECIFIED {
		se = r.ProviderSideEffect
	}
	fmt.Fprintf(&b, "? Side effect: %s", strings.TrimPrefix(se.String(), "SIDE_EFFECT_CLASS_"))
	if r.Reversible {
		b.WriteString("; it can be undone (the tool supports rollback).")
	} else {
		b.WriteString("; it cannot be undone.")
	}
	if r.Spec.GetDryRunSupported() {
		b.WriteString(" The tool offers a dry run.")
	}
	kept := rec.GetKeptArguments()
	if len(kept) == 0 {
		b.WriteString(" Arguments are not shown (redaction policy).")
		return b.String()
	}
	names := make([]string, 0, len(kept))
	for k := range kept {
		names = append(names, k)
	}
	slices.Sort(names)
	b.WriteString(" Arguments:")
	for i, k := range names {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, " %s=%q", k, kept[k])
	}
	b.WriteString(" (others not shown).")
	return b.String()
}
