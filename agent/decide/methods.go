package decide

// Non-tool methods of transparent views: Policy.principals[].methods
// compiled once per snapshot (compileMethods), and admitMethod, the one
// admission function of resources, prompts, completion and subscription
// requests and of the items resources/list, resources/templates/list and
// prompts/list show, so a client is never shown a resource or prompt it
// cannot read or get, or the reverse.

import (
	"fmt"
	"strings"
	"time"

	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/readiness"
)

// Completion references (CompleteParams.ref.type).
const (
	RefPrompt   = "ref/prompt"
	RefResource = "ref/resource"
)

// MethodRequest is one non-tool request of a transparent view.
type MethodRequest struct {
	// Method is the MCP method: resources/list, resources/templates/list,
	// resources/read, resources/subscribe, resources/unsubscribe,
	// prompts/list, prompts/get, completion/complete, or the housekeeping
	// initialize, server/discover and logging/setLevel.
	Method string
	// Server is the server the view shows.
	Server string
	// Name is what the request names: the resource URI (read, subscribe,
	// unsubscribe), the prompt name (prompts/get), the completion ref's
	// prompt name or URI template (Ref); "" for lists and housekeeping.
	Name string
	// Ref is a completion's reference type (RefPrompt, RefResource).
	Ref string
	// Principal and Tenant classes, Region of the host, Workflow and the
	// client's ProtocolVersion, as for tool calls (Request).
	Principal, Tenant, Region, Workflow, ProtocolVersion string
	// Tools: the tool admission admits the principal to at least one tool
	// of Server (the caller asks only for Housekeeping methods).
	Tools bool
	// Now is the decision time (entry expiry); zero means time.Now().
	Now time.Time
}

// Housekeeping reports whether method is protocol housekeeping of a
// transparent view (initialize, server/discover, logging/setLevel):
// admitted for a principal with a tool of the server or a method rule for
// it. ping never reaches the pipeline (the agent answers it itself).
func Housekeeping(method string) bool {
	switch method {
	case "initialize", "server/discover", "logging/setLevel":
		return true
	}
	return false
}

// MethodAccess is an admitted listing's filter (Shows).
type MethodAccess struct {
	rules []*methodRule
	list  string // the listing method; "" when nothing is listed
}

// Shows reports whether an admitted listing shows item (a resource URI for
// resources/list, a URI template for resources/templates/list, a prompt
// name for prompts/list): only when a rule that grants the listing also
// grants reading (getting) it.
func (a MethodAccess) Shows(item string) bool {
	method, kind := listed(a.list)
	if method == "" {
		return false
	}
	for _, r := range a.rules {
		if r.grants(a.list) && r.grants(method) && r.reaches(kind, item) {
			return true
		}
	}
	return false
}

// methodRule is one compiled MethodRule.
type methodRule struct {
	server             string
	allow              []string
	resources, prompts []string
}

func (r *methodRule) grants(method string) bool {
	if method == "resources/unsubscribe" {
		method = "resources/subscribe"
	}
	return matchAny(r.allow, method)
}

// item kinds a rule reaches.
const (
	kindNone = iota
	kindResource
	kindTemplate
	kindPrompt
)

func (r *methodRule) reaches(kind int, name string) bool {
	switch kind {
	case kindResource:
		return !dotSegments(name) && matchAny(r.resources, name)
	case kindPrompt:
		return matchAny(r.prompts, name)
	case kindTemplate:
		g, ok := templateGlob(name)
		return ok && !dotSegments(g) && matchAny(r.resources, g)
	}
	return false
}

// dotSegments reports whether uri has a "." or ".." path segment (also
// percent-encoded; segments end at "/", "\\" and their percent-encodings),
// which an upstream may resolve
// to a resource outside the pattern that matched the URI as written
// ("file:///public/../secret"): such a URI reaches nothing.
func dotSegments(uri string) bool {
	dots, other := 0, false // in the current segment
	for i := 0; i <= len(uri); i++ {
		esc := ""
		if i+2 < len(uri) && uri[i] == '%' {
			esc = strings.ToLower(uri[i+1 : i+3])
		}
		switch {
		case i == len(uri) || uri[i] == '/' || uri[i] == '\\' || esc == "2f" || esc == "5c":
			if !other && (dots == 1 || dots == 2) {
				return true
			}
			dots, other = 0, false
		case uri[i] == '.' || esc == "2e":
			dots++
		default:
			other = true
		}
		if esc == "2e" || esc == "2f" || esc == "5c" {
			i += 2
		}
	}
	return false
}

// methodTable is the compiled method rules of a snapshot.
type methodTable struct {
	// byRule: the method rules of each principal rule (by index).
	byRule [][]*methodRule
	// servers: the entries of each server (eligibility).
	servers map[string][]*entry
}

// compileMethods compiles the method rules of p's principal rules.
func compileMethods(p *mcpreadyv1.Policy, entries []*entry) methodTable {
	t := methodTable{byRule: make([][]*methodRule, len(p.GetPrincipals())), servers: map[string][]*entry{}}
	for i, pr := range p.GetPrincipals() {
		for _, m := range pr.GetMethods() {
			t.byRule[i] = append(t.byRule[i], &methodRule{server: m.GetServer(), allow: m.GetAllow(),
				resources: m.GetResources(), prompts: m.GetPrompts()})
		}
	}
	for _, e := range entries {
		t.servers[e.server] = append(t.servers[e.server], e)
	}
	return t
}

// AdmitMethod decides one non-tool request (admitMethod). For an admitted
// listing the MethodAccess filters what it shows.
func (s *Snapshot) AdmitMethod(req MethodRequest) (MethodAccess, *RefusalError) {
	return s.admitMethod(&req)
}

// admitMethod is the one admission function of non-tool methods, in the
// decision order: the server must pass the steps that concern a server
// (methodServer: eligibility, static trust and tenant boundary,
// residency); and a method rule of the principal's class or "*" (tenant
// classes as for tool rules) must grant the method on the server and
// reach what the request names (step 2). Housekeeping needs a tool of the
// server or any method rule for it.
func (s *Snapshot) admitMethod(req *MethodRequest) (MethodAccess, *RefusalError) {
	if req.Now.IsZero() {
		req.Now = time.Now()
	}
	if step, rj, ok := s.methodServer(req); !ok {
		return MethodAccess{}, &RefusalError{Step: step, Code: rj.code, Reason: rj.reason}
	}
	var rbuf [16]int
	var rules []*methodRule
	for _, ri := range s.grantFor(req.Principal, req.Tenant, rbuf[:]).rules {
		for _, r := range s.methods.byRule[ri] {
			if match(r.server, req.Server) {
				rules = append(rules, r)
			}
		}
	}
	refuse := func(code readiness.Code, format string, a ...any) (MethodAccess, *RefusalError) {
		return MethodAccess{}, &RefusalError{Step: readiness.StepTrust, Code: code, Reason: fmt.Sprintf(format, a...)}
	}
	if Housekeeping(req.Method) {
		if req.Tools || len(rules) > 0 {
			return MethodAccess{}, nil
		}
		return refuse(readiness.CodeMethodNotPermitted, "principal class %s has no tool of server %s and no method rule for it, so not its %s", req.Principal, req.Server, req.Method)
	}
	kind := itemKind(req)
	granted := false
	for _, r := range rules {
		if !r.grants(req.Method) {
			continue
		}
		granted = true
		if kind == kindNone || r.reaches(kind, req.Name) {
			return MethodAccess{rules: rules, list: req.Method}, nil
		}
	}
	switch {
	case !granted:
		return refuse(readiness.CodeMethodNotPermitted, "no method rule grants principal class %s %s on server %s", req.Principal, req.Method, req.Server)
	case kind == kindPrompt:
		return refuse(readiness.CodePromptNotPermitted, "prompt %q is not among the prompts principal class %s may use on server %s", req.Name, req.Principal, req.Server)
	case req.Method == "completion/complete" && req.Ref != RefPrompt && req.Ref != RefResource:
		return refuse(readiness.CodeMethodNotPermitted, "the completion names neither a prompt nor a resource")
	}
	return refuse(readiness.CodeResourceNotPermitted, "resource %q is not among the resources principal class %s may use on server %s", req.Name, req.Principal, req.Server)
}

// itemKind is what req names for the rules to reach (kindNone for a
// listing, which is filtered item by item instead).
func itemKind(req *MethodRequest) int {
	switch req.Method {
	case "resources/read", "resources/subscribe", "resources/unsubscribe":
		return kindResource
	case "prompts/get":
		return kindPrompt
	case "completion/complete":
		switch req.Ref {
		case RefPrompt:
			return kindPrompt
		case RefResource:
			return kindTemplate
		}
		return -1 // reaches nothing
	}
	return kindNone
}

// listed is the method that reads (gets) what a listing shows, and its kind.
func listed(list string) (string, int) {
	switch list {
	case "resources/list":
		return "resources/read", kindResource
	case "resources/templates/list":
		return "resources/read", kindTemplate
	case "prompts/list":
		return "prompts/get", kindPrompt
	}
	return "", kindNone
}

// methodServer checks the server of a request against the steps of the
// decision order that concern the server rather than one tool: some
// registry entry of it must pass eligibility (inventory, approved endpoint,
// networkScope, lifecycle, protocol versions (the client's too), expiry,
// workflow allowlist),
// the static trust checks (owner, issuers, auth scheme, scopes) and its
// tenant boundary, and residency (regions, data classes, same region).
// Else the rejection of the entry that got furthest.
func (s *Snapshot) methodServer(req *MethodRequest) (readiness.Step, rejection, bool) {
	es := s.methods.servers[req.Server]
	if len(es) == 0 {
		return readiness.StepEligibility, rejection{readiness.CodeNotInInventory, fmt.Sprintf("server %s has no registry entry", req.Server)}, false
	}
	if req.ProtocolVersion != "" && len(s.protocols) > 0 && !contains(s.protocols, req.ProtocolVersion) {
		return readiness.StepEligibility, rejClientProtocol, false
	}
	now := req.Now.UnixNano()
	best, bestRej := readiness.Step(-1), rejection{}
	for _, e := range es {
		step, rj := readiness.StepEligibility, e.static[readiness.StepEligibility]
		if rj.code == "" {
			rj, _ = s.expiry(e, now)
		}
		if rj.code == "" && len(e.workflows) > 0 && !contains(e.workflows, req.Workflow) {
			rj = rejWorkflow
		}
		if rj.code == "" {
			step, rj = readiness.StepTrust, e.static[readiness.StepTrust]
			if rj.code == "" && len(e.tenants) > 0 && !contains(e.tenants, req.Tenant) {
				rj = rejEntryTenant
			}
		}
		if rj.code == "" {
			step, rj = readiness.StepResidency, e.static[readiness.StepResidency]
			if rj.code == "" && s.sameRegion && (e.region == "" || e.region != req.Region) {
				rj = rejSameRegion
			}
		}
		if rj.code == "" {
			return readiness.StepNone, rejection{}, true
		}
		if step > best {
			best, bestRej = step, rejection{rj.code, e.name + ": " + rj.reason}
		}
	}
	return best, bestRej, false
}

// templateGlob turns an RFC 6570 URI template into a glob whose every
// expression ("{...}") is "*", so that a resources pattern matching the
// glob matches every expansion of the template (a "*" of the glob is
// consumed only by a "*" of the pattern). False for an unbalanced or
// nested brace: such a template reaches nothing.
func templateGlob(t string) (string, bool) {
	var b strings.Builder
	open := false
	for i := 0; i < len(t); i++ {
		switch c := t[i]; {
		case c == '{' && open, c == '}' && !open:
			return "", false
		case c == '{':
			open = true
		case c == '}':
			open = false
			b.WriteByte('*')
		case !open:
			b.WriteByte(c)
		}
	}
	if open {
		return "", false
	}
	return b.String(), true
}
