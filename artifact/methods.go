package artifact

// Method rules (Policy.principals[].methods): the apply-time check that
// every rule grants known non-tool methods and names what they may reach.
// The agent enforces them (agent/decide); this file only checks.

import (
	"errors"
	"fmt"
	"slices"
	"unicode"
	"unicode/utf8"

	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/readiness"
)

// ErrMethodRule is wrapped by every error about a method rule (a
// *MethodRuleError).
var ErrMethodRule = errors.New("method rule")

// MaxMethodPattern bounds one server, resource or prompt pattern in bytes.
const MaxMethodPattern = 1024

// MethodGrants are the values a MethodRule.allow may hold: the non-tool
// methods of a transparent view that the policy decides, and the
// wildcards over them. resources/subscribe also grants
// resources/unsubscribe.
var MethodGrants = []string{
	"resources/list", "resources/templates/list", "resources/read", "resources/subscribe",
	"prompts/list", "prompts/get", "completion/complete",
	"resources/*", "prompts/*", "*",
}

// MethodRuleError says which method rule is wrong, and why.
type MethodRuleError struct {
	// Principal and Rule index principals[] and its methods[].
	Principal, Rule int
	// Field is the rule's field at fault ("server", "allow", ...).
	Field  string
	Reason string
}

func (e *MethodRuleError) Error() string {
	return fmt.Sprintf("principals[%d].methods[%d].%s: %s", e.Principal, e.Rule, e.Field, e.Reason)
}

// Unwrap makes errors.Is(err, ErrMethodRule) and ErrInvalid true.
func (e *MethodRuleError) Unwrap() []error { return []error{ErrMethodRule, ErrInvalid} }

// checkMethodRule checks one rule: a server pattern, at least one known
// grant, and the resource or prompt patterns its grants need (a grant
// that could reach nothing is refused rather than kept silently; "*" needs
// one of the two).
func checkMethodRule(r *mcpreadyv1.MethodRule) (field, reason string, ok bool) {
	if reason, ok := checkPattern(r.GetServer()); !ok {
		return "server", reason, false
	}
	if len(r.GetAllow()) == 0 {
		return "allow", "grants no method", false
	}
	need := map[string]bool{}
	for _, g := range r.GetAllow() {
		switch g {
		case "resources/list", "resources/templates/list", "resources/read", "resources/subscribe", "resources/*":
			need["resources"] = true
		case "prompts/list", "prompts/get", "prompts/*":
			need["prompts"] = true
		case "completion/complete", "*":
			if len(r.GetPrompts()) == 0 && len(r.GetResources()) == 0 {
				return "allow", fmt.Sprintf("%q needs resources or prompts to reach", g), false
			}
		default:
			return "allow", fmt.Sprintf("%q is not a method the policy decides (one of %v)", g, MethodGrants), false
		}
	}
	for _, f := range []struct {
		name     string
		patterns []string
	}{{"resources", r.GetResources()}, {"prompts", r.GetPrompts()}} {
		if need[f.name] && len(f.patterns) == 0 {
			return f.name, "allow grants " + f.name + " methods but the rule names no " + f.name + ": it would reach nothing", false
		}
		for _, p := range f.patterns {
			if reason, ok := checkPattern(p); !ok {
				return f.name, reason, false
			}
		}
	}
	return "", "", true
}

// checkPattern accepts a non-empty, bounded UTF-8 glob without control
// characters.
func checkPattern(p string) (string, bool) {
	switch {
	case p == "":
		return "an empty pattern", false
	case len(p) > MaxMethodPattern:
		return fmt.Sprintf("pattern is %d bytes, at most %d", len(p), MaxMethodPattern), false
	case !utf8.ValidString(p):
		return "pattern is not UTF-8", false
	}
	for _, c := range p {
		if unicode.IsControl(c) {
			return fmt.Sprintf("pattern %q contains a control character", p), false
		}
	}
	return "", true
}

// ClientRequests are the requests an upstream can send towards a client
// that Policy.clientRequests grants ("*" grants all three).
var ClientRequests = []string{readiness.ClientSampling, readiness.ClientElicitation, readiness.ClientRoots, "*"}

// checkClientRequests checks every clientRequests rule of a Policy: a
// server pattern, principal class patterns, and known requests only.
func checkClientRequests(p *mcpreadyv1.Policy) error {
	for i, r := range p.GetClientRequests() {
		if reason, ok := checkPattern(r.GetServer()); !ok {
			return fmt.Errorf("%w: clientRequests[%d].server: %s", ErrInvalid, i, reason)
		}
		for _, c := range r.GetPrincipalClasses() {
			if reason, ok := checkPattern(c); !ok {
				return fmt.Errorf("%w: clientRequests[%d].principalClasses: %s", ErrInvalid, i, reason)
			}
		}
		for _, a := range r.GetAllow() {
			if !slices.Contains(ClientRequests, a) {
				return fmt.Errorf("%w: clientRequests[%d].allow: %q is not a request towards the client (one of %v)", ErrInvalid, i, a, ClientRequests)
			}
		}
	}
	return nil
}

// checkMethods checks every method rule of a Policy spec, in order.
func checkMethods(o *Object) error {
	p, ok := o.Spec.(*mcpreadyv1.Policy)
	if !ok {
		return nil
	}
	for i, pr := range p.GetPrincipals() {
		for j, r := range pr.GetMethods() {
			if field, reason, ok := checkMethodRule(r); !ok {
				return &MethodRuleError{Principal: i, Rule: j, Field: field, Reason: reason}
			}
		}
	}
	return checkClientRequests(p)
}
