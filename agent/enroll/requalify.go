package enroll

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/protobuf/proto"

	"github.com/mcpready/mcpready/artifact"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
)

// Errors of re-qualification.
var (
	// ErrIdentityChanged: the server now serves another exact identity
	// than the stored entry pins, and no drift candidate of that entry
	// pins the new one. The old entry's name is never overwritten with
	// another identity.
	ErrIdentityChanged = errors.New("the server serves another identity than the entry pins and no drift candidate of the entry matches it")
	// ErrRequalifyFailed: a fixture of a re-qualification failed; nothing
	// is written (see RefusedError).
	ErrRequalifyFailed = errors.New("re-qualification failed")
	// ErrEnrolled: the entry is stored already; enrolling it again
	// without qualifying would demote it.
	ErrEnrolled = errors.New("already enrolled")
)

// Stored is the latest stored revision of a registry entry, as the caller
// read it from the control plane.
type Stored struct {
	// Spec is the entry's signed spec (the organisation's, or the control
	// plane's observer copy).
	Spec *mcpreadyv1.RegistryEntry
	// Labels are the entry's metadata labels (which scope distribution).
	Labels map[string]string
	// Version is the signed provenance version of that revision.
	Version string
	// Status is the entry's effective lifecycle status; nil is unknown
	// (then no drift candidate is followed).
	Status *mcpreadyv1.RegistryStatus
}

// Registry is what re-qualification reads from the control plane. The CLI
// implements it over the Admin API.
type Registry interface {
	// Entry returns the latest stored revision of the registry entry
	// named name; ok is false when none is stored (or it is deleted).
	Entry(ctx context.Context, name string) (s Stored, ok bool, err error)
}

// maxLineage bounds how many superseded-by links Place follows.
const maxLineage = 16

// Place decides where fresh (an entry from Entries, named as the entry it
// re-qualifies) is written, from what reg holds under its name, and
// rewrites fresh's name, version and supersedes accordingly:
//   - nothing stored: fresh keeps its name and version;
//   - the stored entry pins the same exact identity: fresh is the next
//     revision of that name (this renews a STALE qualification);
//   - the identity changed and a drift candidate of the stored entry
//     (its superseded-by link, followed through later drifts) pins
//     exactly the fresh identity: fresh is renamed to that candidate,
//     supersedes the entry the candidate replaces, and is the candidate's
//     next revision; qualifying it promotes the candidate;
//   - otherwise ErrIdentityChanged, and fresh is unchanged.
//
// A placed entry keeps the scoping the organisation set on the entry it
// replaces (labels, authority, data access, network scope, workflow
// allowlist, region, tenant classes, approval), which only narrows where
// and how it may be used. prior reports whether an entry was stored.
func Place(ctx context.Context, reg Registry, fresh *artifact.Object) (prior bool, err error) {
	spec, ok := fresh.Spec.(*mcpreadyv1.RegistryEntry)
	if !ok {
		return false, fmt.Errorf("enroll: %s is not a RegistryEntry", fresh.Metadata.Name)
	}
	name := fresh.Metadata.Name
	cur, ok, err := reg.Entry(ctx, name)
	if err != nil || !ok {
		return false, err
	}
	for range maxLineage {
		if proto.Equal(cur.Spec.GetIdentity(), spec.GetIdentity()) {
			place(fresh, spec, name, cur)
			return true, nil
		}
		next := cur.Status.GetSupersededBy()
		if next == "" {
			break
		}
		if cur, ok, err = reg.Entry(ctx, next); err != nil {
			return true, err
		} else if !ok {
			break
		}
		name = next
	}
	return true, fmt.Errorf("%w: %s now serves %s version %q (definition %s)", ErrIdentityChanged, fresh.Metadata.Name,
		spec.GetIdentity().GetToolName(), spec.GetIdentity().GetServerVersion(), spec.GetIdentity().GetDefinitionDigest())
}

func place(fresh *artifact.Object, spec *mcpreadyv1.RegistryEntry, name string, cur Stored) {
	old := cur.Spec
	fresh.Metadata.Name = name
	fresh.Metadata.Labels = maps.Clone(cur.Labels)
	spec.Provenance.Version = artifact.NextVersion(artifact.MaxVersion(cur.Version, old.GetProvenance().GetVersion()))
	spec.Supersedes = old.GetSupersedes()
	spec.Authority = old.GetAuthority()
	spec.DataAccess = old.GetDataAccess()
	spec.NetworkScope = slices.Clone(old.GetNetworkScope())
	spec.WorkflowAllowlist = slices.Clone(old.GetWorkflowAllowlist())
	spec.Region = old.GetRegion()
	spec.TenantClasses = slices.Clone(old.GetTenantClasses())
	spec.ApprovalRequired = spec.ApprovalRequired || old.GetApprovalRequired()
}

// RefusedError is a re-qualification (of an entry Place found stored)
// whose fixtures did not all pass. It names the failed fixtures, never
// their detail (which may hold server text).
type RefusedError struct {
	Entry  string
	Failed []Fixture
}

func (e *RefusedError) Error() string {
	var names []string
	for _, f := range e.Failed {
		names = append(names, f.Tool+":"+f.Name)
	}
	return fmt.Sprintf("re-qualification of %s refused, nothing written: failed fixture(s) %s", e.Entry, strings.Join(names, ", "))
}

// Is matches ErrRequalifyFailed.
func (e *RefusedError) Is(target error) bool { return target == ErrRequalifyFailed }

// Refuse returns a *RefusedError when entry (after Qualify) is not
// QUALIFIED, naming the failed fixtures of its tool in transcript; nil
// when it is.
func Refuse(entry *artifact.Object, transcript []Fixture) error {
	spec, _ := entry.Spec.(*mcpreadyv1.RegistryEntry)
	if spec.GetState() == mcpreadyv1.LifecycleState_LIFECYCLE_STATE_QUALIFIED {
		return nil
	}
	e := &RefusedError{Entry: entry.Metadata.Name}
	for _, f := range transcript {
		if f.Tool == spec.GetIdentity().GetToolName() && !f.Passed {
			e.Failed = append(e.Failed, Fixture{Tool: f.Tool, Name: f.Name, Negative: f.Negative})
		}
	}
	return e
}

// Only returns s restricted to the tool named tool (sharing its
// connection), or false when s does not list it.
func (s *Server) Only(tool string) (*Server, bool) {
	for _, t := range s.Tools {
		if t.Name == tool {
			c := *s
			c.Tools = []*mcp.Tool{t}
			return &c, true
		}
	}
	return nil, false
}
