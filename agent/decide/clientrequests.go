package decide

import "slices"

// ClientRequest reports whether server may send method
// (readiness.ClientSampling, ClientElicitation, ClientRoots) towards the client of a caller of
// principal class: always when the Policy lists no clientRequests, else
// only when one of them matches server (glob) and principal (any class
// when the rule names none) and allows method (or "*").
func (s *Snapshot) ClientRequest(server, principal, method string) bool {
	rules := s.policy.GetClientRequests()
	if len(rules) == 0 {
		return true
	}
	for _, r := range rules {
		if match(r.GetServer(), server) && (len(r.GetPrincipalClasses()) == 0 || matchAny(r.GetPrincipalClasses(), principal)) &&
			(slices.Contains(r.GetAllow(), method) || slices.Contains(r.GetAllow(), "*")) {
			return true
		}
	}
	return false
}
