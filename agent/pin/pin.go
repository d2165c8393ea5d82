// Package pin computes the digests that pin an MCP tool definition (the
// defence against a "rug pull": a server changing a tool after it was
// approved) and compares a live tool with its RegistryEntry, naming every
// difference as typed drift: version, schemas, definition, and each
// dimension the entry records (side-effect class and idempotency against
// the annotations' hints, permissions, data access, network destinations).
//
// Digests are RFC 8785 (JCS) canonical JSON, then SHA-256, "sha256:<hex>"
// (artifact.CanonicalDigest), so key order and whitespace never matter. It
// takes plain JSON values, not go-sdk types, and never talks to a server.
package pin

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/mcpready/mcpready/artifact"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
)

// ErrMalformed wraps a definition whose schemas or annotations are not JSON.
var ErrMalformed = errors.New("pin: malformed tool definition")

// Tool is the pinned part of an MCP tool definition. Raw JSON fields may be
// nil (absent); "null" is treated as absent too.
type Tool struct {
	Name         string
	Description  string
	InputSchema  json.RawMessage
	OutputSchema json.RawMessage
	Annotations  json.RawMessage
}

// Digests are the pinned digests of one tool definition. OutputSchema is ""
// when the tool declares no output schema.
type Digests struct {
	Definition   string
	InputSchema  string
	OutputSchema string
}

// Compute returns the digests of t. The definition digest covers
// {name, description, inputSchema, outputSchema, annotations}, with absent
// members omitted.
func Compute(t Tool) (Digests, error) {
	var d Digests
	def := map[string]json.RawMessage{}
	name, _ := json.Marshal(t.Name)
	def["name"] = name
	if t.Description != "" {
		desc, _ := json.Marshal(t.Description)
		def["description"] = desc
	}
	for _, f := range []struct {
		key    string
		raw    json.RawMessage
		digest *string
	}{
		{"inputSchema", t.InputSchema, &d.InputSchema},
		{"outputSchema", t.OutputSchema, &d.OutputSchema},
		{"annotations", t.Annotations, nil},
	} {
		if absent(f.raw) {
			continue
		}
		c, err := artifact.Canonicalize(f.raw)
		if err != nil {
			return Digests{}, fmt.Errorf("%w: %s: %w", ErrMalformed, f.key, err)
		}
		def[f.key] = c
		if f.digest != nil {
			*f.digest = artifact.Digest(c)
		}
	}
	b, err := json.Marshal(def)
	if err != nil {
		return Digests{}, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	if d.Definition, err = artifact.CanonicalDigest(b); err != nil {
		return Digests{}, err
	}
	return d, nil
}

func absent(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) == 0 || string(t) == "null"
}

// Observed builds the ToolIdentity of a live tool as served now, for
// Compare (and for enrolment, which pins exactly this).
func Observed(serverName, serverVersion, endpoint, protocolVersion string, t Tool) (*mcpreadyv1.ToolIdentity, error) {
	d, err := Compute(t)
	if err != nil {
		return nil, err
	}
	return &mcpreadyv1.ToolIdentity{
		ServerName:         serverName,
		ServerVersion:      serverVersion,
		ToolName:           t.Name,
		Endpoint:           endpoint,
		ProtocolVersion:    protocolVersion,
		InputSchemaDigest:  d.InputSchema,
		OutputSchemaDigest: d.OutputSchema,
		DefinitionDigest:   d.Definition,
	}, nil
}

// Live is one tool as its upstream serves it now: its observed identity
// (Observed), its definition (whose annotations carry the side-effect
// hints) and, when the caller knows them (from the upstream's signed
// Declaration or its authorization challenge), the permissions it now
// requires and the data access it now declares.
type Live struct {
	Identity *mcpreadyv1.ToolIdentity
	Tool     Tool
	// Permissions are the scopes or permissions the tool now requires; nil
	// when not known (compared only then with what the entry records).
	Permissions []string
	// DataAccess is the data access the tool now declares; UNSPECIFIED
	// when not known.
	DataAccess mcpreadyv1.DataAccessClass
	// Destinations are the network destinations (hosts) the tool now
	// declares it reaches; nil when not known.
	Destinations []string
	// DeclaredEndpoint is the endpoint the provider's Declaration now
	// states for the tool's server; "" when not known.
	DeclaredEndpoint string
}

// Compare returns the typed drift between what the entry pins and the live
// tool, sorted, or nil when they match. Only what the entry records is
// compared:
//   - VERSION_DRIFT: server or tool version changed;
//   - INPUT_SCHEMA_DRIFT / OUTPUT_SCHEMA_DRIFT: a schema digest changed;
//   - DEFINITION_DRIFT: the whole-definition digest changed (description,
//     annotations, or the schemas themselves);
//   - SIDE_EFFECT_DRIFT: the definition changed and the side-effect class
//     or idempotency its annotations now hint (SideEffectOf,
//     IdempotencyOf) contradicts the entry's side_effect or idempotency (an
//     unchanged definition never drifts here: the organisation may have
//     classified an unannotated tool itself);
//   - PERMISSION_DRIFT: the permissions the tool now requires differ from
//     the entry's authority (scopes and permission set);
//   - DATA_ACCESS_DRIFT: the declared data access is more sensitive than
//     the entry's (PUBLIC < TENANT_PRIVATE < SENSITIVE; a Declaration
//     classifies a whole server, so a tool qualified for more sensitive
//     data than its server declares is no drift);
//   - NETWORK_DRIFT: the endpoint changed, the provider now declares
//     another endpoint than the one the entry pins, or a destination the
//     tool now declares is outside the entry's network_scope.
//
// A pinned identity field that is empty is unknown, so an observed value
// there is drift too, except tool_version, which MCP does not carry on the
// wire.
func Compare(pinned *mcpreadyv1.RegistryEntry, live Live) []mcpreadyv1.DriftLabel {
	var out []mcpreadyv1.DriftLabel
	add := func(changed bool, l mcpreadyv1.DriftLabel) {
		if changed && !slices.Contains(out, l) {
			out = append(out, l)
		}
	}
	id, obs := pinned.GetIdentity(), live.Identity
	add(id.GetServerVersion() != obs.GetServerVersion() ||
		(obs.GetToolVersion() != "" && id.GetToolVersion() != obs.GetToolVersion()),
		mcpreadyv1.DriftLabel_DRIFT_LABEL_VERSION_DRIFT)
	add(id.GetInputSchemaDigest() != obs.GetInputSchemaDigest(), mcpreadyv1.DriftLabel_DRIFT_LABEL_INPUT_SCHEMA_DRIFT)
	add(id.GetOutputSchemaDigest() != obs.GetOutputSchemaDigest(), mcpreadyv1.DriftLabel_DRIFT_LABEL_OUTPUT_SCHEMA_DRIFT)
	add(id.GetEndpoint() != obs.GetEndpoint() || live.DeclaredEndpoint != "" && live.DeclaredEndpoint != id.GetEndpoint() ||
		!InScope(pinned.GetNetworkScope(), live.Destinations), mcpreadyv1.DriftLabel_DRIFT_LABEL_NETWORK_DRIFT)
	defChanged := id.GetDefinitionDigest() != obs.GetDefinitionDigest()
	add(defChanged, mcpreadyv1.DriftLabel_DRIFT_LABEL_DEFINITION_DRIFT)
	add(defChanged && (sideEffectDrift(pinned.GetSideEffect(), SideEffectOf(live.Tool.Annotations)) ||
		idempotencyDrift(pinned.GetIdempotency(), IdempotencyOf(live.Tool.Annotations))),
		mcpreadyv1.DriftLabel_DRIFT_LABEL_SIDE_EFFECT_DRIFT)
	add(permissionDrift(pinned.GetAuthority(), live.Permissions), mcpreadyv1.DriftLabel_DRIFT_LABEL_PERMISSION_DRIFT)
	add(pinned.GetDataAccess() != mcpreadyv1.DataAccessClass_DATA_ACCESS_CLASS_UNSPECIFIED &&
		live.DataAccess > pinned.GetDataAccess(), mcpreadyv1.DriftLabel_DRIFT_LABEL_DATA_ACCESS_DRIFT)
	slices.Sort(out)
	return out
}

// Blocklist is the set of registry entries blocked on this host because
// their live definition drifted. Safe for concurrent use; it implements
// decide.DriftGuard (Drifted).
type Blocklist struct {
	m sync.Map // entry name -> []mcpreadyv1.DriftLabel
}

// Block blocks entry with its drift labels (replacing earlier labels).
func (b *Blocklist) Block(entry string, labels []mcpreadyv1.DriftLabel) {
	b.m.Store(entry, slices.Clone(labels))
}

// Unblock lifts the block (e.g. after a new snapshot no longer pins the
// drifted definition).
func (b *Blocklist) Unblock(entry string) { b.m.Delete(entry) }

// Drifted reports whether entry is blocked.
func (b *Blocklist) Drifted(entry string) bool {
	_, ok := b.m.Load(entry)
	return ok
}

// Labels returns the drift labels entry was blocked with (nil if not).
func (b *Blocklist) Labels(entry string) []mcpreadyv1.DriftLabel {
	v, ok := b.m.Load(entry)
	if !ok {
		return nil
	}
	return slices.Clone(v.([]mcpreadyv1.DriftLabel))
}
