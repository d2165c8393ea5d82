package artifact

import (
	"fmt"
	"slices"

	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/readiness"
)

// checkEvidence refuses Evidence whose conditions contradict themselves:
// a principal class, tenant class or region stated both at the top level
// and in the subject with different values, or a protocolVersion the
// subject's protocolVersions do not list, or an authClass no agent calls
// with (readiness.IsAuthClass), or a subject inputClass no Policy could
// define (ValidInputClass). Such evidence would hold for no call
// (agent/decide matches them).
func checkEvidence(o *Object) error {
	ev, ok := o.Spec.(*mcpreadyv1.Evidence)
	if !ok {
		return nil
	}
	sub := ev.GetSubject()
	for _, c := range []struct{ field, top, subject string }{
		{"principalClass", ev.GetPrincipalClass(), sub.GetPrincipalClass()},
		{"tenantClass", ev.GetTenantClass(), sub.GetTenantClass()},
		{"region", ev.GetRegion(), sub.GetRegion()},
	} {
		if c.top != "" && c.subject != "" && c.top != c.subject {
			return fmt.Errorf("%w: spec.%s %q and subject.%s %q disagree; the evidence would hold for no call", ErrInvalid, c.field, c.top, c.field, c.subject)
		}
	}
	if a := ev.GetAuthClass(); a != "" && !readiness.IsAuthClass(a) {
		return fmt.Errorf("%w: spec.authClass %q is not an auth class agents call with (%s, %s, %s or oauth:<grant>); the evidence would hold for no call",
			ErrInvalid, a, readiness.AuthKeyless, readiness.AuthBearer, readiness.AuthStdio)
	}
	if ic := sub.GetInputClass(); ic != "" && !ValidInputClass(ic) {
		return fmt.Errorf("%w: subject.inputClass %q is not a name Policy.inputClasses accepts; the evidence would hold for no call", ErrInvalid, ic)
	}
	if pv, pvs := ev.GetProtocolVersion(), sub.GetProtocolVersions(); pv != "" && len(pvs) > 0 && !slices.Contains(pvs, pv) {
		return fmt.Errorf("%w: spec.protocolVersion %q is not in subject.protocolVersions; the evidence would hold for no call", ErrInvalid, pv)
	}
	return nil
}
