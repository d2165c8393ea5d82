package pin

// The side-effect, permission and network dimensions of typed drift: what
// a tool's annotations hint, and how each compares with what an entry
// records. Nothing recorded means nothing to compare.

import (
	"encoding/json"
	"net/url"
	"slices"
	"strings"

	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
)

// hints are the MCP tool annotations that bear on side effects.
type hints struct {
	ReadOnly    bool  // readOnlyHint
	Destructive *bool // destructiveHint
	Idempotent  bool  // idempotentHint
}

// parseHints reads the hints of annotations (a JSON object) by their exact
// keys, as the MCP schema names them: decoding into a tagged struct would
// also take "ReadOnlyHint" or "READONLYHINT" for readOnlyHint, so a tool
// could hint one thing to MCP clients and another here. A hint that is not
// a boolean (or null) gives no hints at all.
func parseHints(ann json.RawMessage) (hints, bool) {
	var m map[string]json.RawMessage
	if absent(ann) || json.Unmarshal(ann, &m) != nil {
		return hints{}, false
	}
	var readOnly, destructive, idempotent *bool
	for key, p := range map[string]**bool{"readOnlyHint": &readOnly, "destructiveHint": &destructive, "idempotentHint": &idempotent} {
		if v, ok := m[key]; ok && json.Unmarshal(v, p) != nil {
			return hints{}, false
		}
	}
	return hints{ReadOnly: readOnly != nil && *readOnly, Destructive: destructive, Idempotent: idempotent != nil && *idempotent}, true
}

// SideEffectOf is the side-effect class a tool's annotations hint:
// READ_ONLY for readOnlyHint, DESTRUCTIVE or STATE_CHANGING by
// destructiveHint, else UNKNOWN (no annotations, or no hint either way).
// Enrolment pins exactly this.
func SideEffectOf(ann json.RawMessage) mcpreadyv1.SideEffectClass {
	h, ok := parseHints(ann)
	switch {
	case !ok:
		return mcpreadyv1.SideEffectClass_SIDE_EFFECT_CLASS_UNKNOWN
	case h.ReadOnly:
		return mcpreadyv1.SideEffectClass_SIDE_EFFECT_CLASS_READ_ONLY
	case h.Destructive != nil && *h.Destructive:
		return mcpreadyv1.SideEffectClass_SIDE_EFFECT_CLASS_DESTRUCTIVE
	case h.Destructive != nil:
		return mcpreadyv1.SideEffectClass_SIDE_EFFECT_CLASS_STATE_CHANGING
	}
	return mcpreadyv1.SideEffectClass_SIDE_EFFECT_CLASS_UNKNOWN
}

// IdempotencyOf is the idempotency a tool's annotations hint:
// NATURALLY_IDEMPOTENT for idempotentHint or readOnlyHint, else UNSPECIFIED.
func IdempotencyOf(ann json.RawMessage) mcpreadyv1.IdempotencyClass {
	if h, ok := parseHints(ann); ok && (h.Idempotent || h.ReadOnly) {
		return mcpreadyv1.IdempotencyClass_IDEMPOTENCY_CLASS_NATURALLY_IDEMPOTENT
	}
	return mcpreadyv1.IdempotencyClass_IDEMPOTENCY_CLASS_UNSPECIFIED
}

// sideEffectDrift: the hinted class contradicts the pinned one. No hint
// either way (UNKNOWN) contradicts only a pinned READ_ONLY (the read-only
// claim was withdrawn); a pinned WRITE_CAPABLE (never hinted, assigned by
// the organisation) only a hint of read-only or destructive.
func sideEffectDrift(pinned, hinted mcpreadyv1.SideEffectClass) bool {
	switch {
	case pinned == mcpreadyv1.SideEffectClass_SIDE_EFFECT_CLASS_UNSPECIFIED:
		return false
	case hinted == mcpreadyv1.SideEffectClass_SIDE_EFFECT_CLASS_UNKNOWN:
		return pinned == mcpreadyv1.SideEffectClass_SIDE_EFFECT_CLASS_READ_ONLY
	case pinned == mcpreadyv1.SideEffectClass_SIDE_EFFECT_CLASS_WRITE_CAPABLE:
		return hinted == mcpreadyv1.SideEffectClass_SIDE_EFFECT_CLASS_READ_ONLY ||
			hinted == mcpreadyv1.SideEffectClass_SIDE_EFFECT_CLASS_DESTRUCTIVE
	}
	return pinned != hinted
}

// idempotencyDrift: a pinned NATURALLY_IDEMPOTENT tool no longer hints it,
// or a pinned NOT_IDEMPOTENT one now does. KEYED (a property of the
// organisation's calls, not of the hints) is never compared.
func idempotencyDrift(pinned, hinted mcpreadyv1.IdempotencyClass) bool {
	natural := hinted == mcpreadyv1.IdempotencyClass_IDEMPOTENCY_CLASS_NATURALLY_IDEMPOTENT
	switch pinned {
	case mcpreadyv1.IdempotencyClass_IDEMPOTENCY_CLASS_NATURALLY_IDEMPOTENT:
		return !natural
	case mcpreadyv1.IdempotencyClass_IDEMPOTENCY_CLASS_NOT_IDEMPOTENT:
		return natural
	}
	return false
}

// permissionDrift: the permissions now required (when known) are not the
// set the entry records (its scopes and permission set together; when it
// records neither there is nothing to compare).
func permissionDrift(a *mcpreadyv1.Authority, now []string) bool {
	if now == nil || len(a.GetScopes())+len(a.GetPermissionSet()) == 0 {
		return false
	}
	pinned := setOf(append(slices.Clone(a.GetScopes()), a.GetPermissionSet()...))
	return !slices.Equal(pinned, setOf(now))
}

func setOf(xs []string) []string {
	out := slices.Clone(xs)
	slices.Sort(out)
	return slices.Compact(out)
}

// InScope reports whether every destination is one of the entry's network
// destinations (exactly, or a subdomain of a "*.example" pattern); an empty
// scope or unknown (nil) destinations leave nothing to compare.
func InScope(scope, destinations []string) bool {
	if len(scope) == 0 {
		return true
	}
	for _, d := range destinations {
		if !slices.ContainsFunc(scope, func(s string) bool { return hostMatches(s, d) }) {
			return false
		}
	}
	return true
}

// hostMatches: host d (a bare host or a URL) is pattern s.
func hostMatches(s, d string) bool {
	if u, err := url.Parse(d); err == nil && u.Hostname() != "" {
		d = u.Hostname()
	}
	s, d = strings.ToLower(s), strings.ToLower(d)
	return d == s || (strings.HasPrefix(s, "*.") && strings.HasSuffix(d, s[1:]))
}

// Declared returns l with what the provider's signed Declaration of the
// tool's server now states: its required scopes (when it lists any), its
// data classification (when it names a DataAccessClass: "public",
// "tenant-private" or "sensitive") and its endpoint. A nil Declaration, or
// one silent on any of these, leaves that dimension unknown.
func (l Live) Declared(d *mcpreadyv1.Declaration) Live {
	l.DeclaredEndpoint = d.GetEndpoint()
	if s := d.GetAuth().GetRequiredScopes(); len(s) > 0 {
		l.Permissions = slices.Clone(s)
	}
	c := strings.ToUpper(strings.NewReplacer("-", "_", " ", "_").Replace(d.GetDataHandling().GetClassification()))
	if v, ok := mcpreadyv1.DataAccessClass_value["DATA_ACCESS_CLASS_"+c]; ok && c != "" && c != "UNSPECIFIED" {
		l.DataAccess = mcpreadyv1.DataAccessClass(v)
	}
	return l
}
