// Package enroll turns a live MCP server into signed-ready RegistryEntries:
// it lists the server's tools, computes each tool's exact identity and
// pinned digests, and (optionally) runs a basic qualification: the listing,
// a safe call of every read-only-annotated tool with arguments generated from
// its input schema, and negative fixtures (an empty-argument call must be
// rejected, an unknown tool must error). Re-qualification (Place, Refuse)
// decides where a re-run's result goes: the next revision of an entry
// with the same identity, or the drift candidate of a changed one,
// never the old entry's name for a new identity.
//
// It produces artifact objects; signing and applying them is the caller's
// job. It never calls a tool that is not annotated read-only.
package enroll

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/mcpready/mcpready/agent/config"
	"github.com/mcpready/mcpready/agent/pin"
	"github.com/mcpready/mcpready/agent/upstream"
	"github.com/mcpready/mcpready/artifact"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/probe"
)

// Suite names the qualification this package runs.
const Suite = "mcpready-enroll-basic/v1"

// Server is a listed server.
type Server struct {
	Name, Version, Endpoint, ProtocolVersion string
	Tools                                    []*mcp.Tool
	session                                  *upstream.Session
	pool                                     *upstream.Pool
}

// Close closes the connection to the server.
func (s *Server) Close() { s.pool.Close() }

// List connects to up (URL or command, with its credentials) and lists its tools.
func List(ctx context.Context, up config.Upstream) (*Server, error) {
	pool := upstream.NewPool(upstream.Options{Resolve: func(t upstream.Target) (config.Upstream, bool) { return up, t.Server == up.Name }})
	sess, err := pool.Shared(ctx, upstream.Target{Server: up.Name})
	if err != nil {
		pool.Close()
		return nil, err
	}
	tools, err := sess.ListTools(ctx)
	if err != nil {
		pool.Close()
		return nil, err
	}
	sort.Slice(tools, func(i, j int) bool { return tools[i].Name < tools[j].Name })
	return &Server{Name: up.Name, Version: sess.ServerVersion(), Endpoint: sess.Endpoint(),
		ProtocolVersion: sess.ProtocolVersion(), Tools: tools, session: sess, pool: pool}, nil
}

// EntryName is the metadata.name of a tool's RegistryEntry: "<server>/<tool>".
func EntryName(server, tool string) string { return server + "/" + tool }

// Entries returns one CANDIDATE RegistryEntry per tool, with its identity
// and digests. issuer names the organisation in the provenance.
func (s *Server) Entries(issuer string, now time.Time) ([]*artifact.Object, error) {
	var out []*artifact.Object
	for _, t := range s.Tools {
		pt, err := upstream.PinTool(t)
		if err != nil {
			return nil, fmt.Errorf("tool %s: %w", t.Name, err)
		}
		id, err := pin.Observed(s.Name, s.Version, s.Endpoint, s.ProtocolVersion, pt)
		if err != nil {
			return nil, fmt.Errorf("tool %s: %w", t.Name, err)
		}
		e := &mcpreadyv1.RegistryEntry{
			Provenance: &mcpreadyv1.Provenance{Issuer: issuer, VerificationMethod: "sigstore-bundle-key", Version: "1",
				IssuedAt: timestamppb.New(now), SourceUri: s.Endpoint},
			Identity:         id,
			ArgumentContract: &mcpreadyv1.ArgumentContract{RequiredArguments: required(t)},
			SideEffect:       sideEffect(t),
			Idempotency:      idempotency(t),
			State:            mcpreadyv1.LifecycleState_LIFECYCLE_STATE_CANDIDATE,
			DiscoverySource:  "mcpready enroll",
		}
		if e.SideEffect == mcpreadyv1.SideEffectClass_SIDE_EFFECT_CLASS_DESTRUCTIVE {
			e.ApprovalRequired = true
		}
		out = append(out, artifact.New(artifact.KindRegistryEntry, EntryName(s.Name, t.Name), e))
	}
	return out, nil
}

func sideEffect(t *mcp.Tool) mcpreadyv1.SideEffectClass {
	a := t.Annotations
	switch {
	case a == nil:
		return mcpreadyv1.SideEffectClass_SIDE_EFFECT_CLASS_UNKNOWN
	case a.ReadOnlyHint:
		return mcpreadyv1.SideEffectClass_SIDE_EFFECT_CLASS_READ_ONLY
	case a.DestructiveHint != nil && *a.DestructiveHint:
		return mcpreadyv1.SideEffectClass_SIDE_EFFECT_CLASS_DESTRUCTIVE
	case a.DestructiveHint != nil && !*a.DestructiveHint:
		return mcpreadyv1.SideEffectClass_SIDE_EFFECT_CLASS_STATE_CHANGING
	}
	return mcpreadyv1.SideEffectClass_SIDE_EFFECT_CLASS_UNKNOWN
}

func idempotency(t *mcp.Tool) mcpreadyv1.IdempotencyClass {
	if a := t.Annotations; a != nil && (a.IdempotentHint || a.ReadOnlyHint) {
		return mcpreadyv1.IdempotencyClass_IDEMPOTENCY_CLASS_NATURALLY_IDEMPOTENT
	}
	return mcpreadyv1.IdempotencyClass_IDEMPOTENCY_CLASS_UNSPECIFIED
}

func required(t *mcp.Tool) []string {
	var out []string
	if req, ok := probe.SchemaObject(t.InputSchema)["required"].([]any); ok {
		for _, r := range req {
			if s, ok := r.(string); ok {
				out = append(out, s)
			}
		}
	}
	sort.Strings(out)
	return out
}

// Fixture is the outcome of one qualification fixture.
type Fixture struct {
	Tool     string `json:"tool"`
	Name     string `json:"name"`
	Passed   bool   `json:"passed"`
	Negative bool   `json:"negative,omitempty"`
	Detail   string `json:"detail,omitempty"`
}

// Qualify runs the basic qualification of every tool and marks the entries
// whose fixtures all passed QUALIFIED, with a qualification block whose
// evidence reference names the qualification Evidence (EvidenceName), which
// Evidence builds from the returned transcript.
func (s *Server) Qualify(ctx context.Context, entries []*artifact.Object, now time.Time) ([]Fixture, error) {
	var all []Fixture
	unknown := fmt.Sprintf("mcpready-no-such-tool-%d", now.UnixNano())
	_, err := s.session.CallTool(ctx, &mcp.CallToolParams{Name: unknown, Arguments: map[string]any{}})
	unknownErrors := err != nil
	if !unknownErrors {
		// Some servers answer an unknown tool with isError instead.
		res, _ := s.session.CallTool(ctx, &mcp.CallToolParams{Name: unknown, Arguments: map[string]any{}})
		unknownErrors = res != nil && res.IsError
	}
	for i, t := range s.Tools {
		fx := []Fixture{{Tool: t.Name, Name: "listed", Passed: true}}
		fx = append(fx, Fixture{Tool: t.Name, Name: "unknown-tool-errors", Negative: true, Passed: unknownErrors})
		if len(required(t)) > 0 {
			res, err := s.session.CallTool(ctx, &mcp.CallToolParams{Name: t.Name, Arguments: map[string]any{}})
			rejected := err != nil || (res != nil && res.IsError)
			fx = append(fx, Fixture{Tool: t.Name, Name: "empty-arguments-rejected", Negative: true, Passed: rejected})
		}
		if sideEffect(t) == mcpreadyv1.SideEffectClass_SIDE_EFFECT_CLASS_READ_ONLY {
			args := probe.ExampleArguments(probe.SchemaObject(t.InputSchema))
			res, err := s.session.CallTool(ctx, &mcp.CallToolParams{Name: t.Name, Arguments: args})
			f := Fixture{Tool: t.Name, Name: "safe-call", Passed: err == nil && res != nil && !res.IsError}
			if err != nil {
				f.Detail = err.Error()
			} else if res.IsError {
				f.Detail = "isError result"
			}
			fx = append(fx, f)
		}
		all = append(all, fx...)
		passed, negOK := 0, true
		for _, f := range fx {
			if f.Passed {
				passed++
			} else if f.Negative {
				negOK = false
			}
		}
		if i >= len(entries) {
			continue
		}
		e := entries[i].Spec.(*mcpreadyv1.RegistryEntry)
		e.Qualification = &mcpreadyv1.Qualification{Suite: Suite, EvidenceRef: EvidenceName(entries[i].Metadata.Name),
			QualifiedAt: timestamppb.New(now), FixturesPassed: int32(passed), FixturesTotal: int32(len(fx)), NegativeFixturePassed: negOK}
		if passed == len(fx) {
			e.State = mcpreadyv1.LifecycleState_LIFECYCLE_STATE_QUALIFIED
		}
	}
	if len(all) == 0 {
		return nil, errors.New("enroll: the server lists no tools")
	}
	return all, nil
}
