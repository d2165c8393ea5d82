package discovery

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/mcpready/mcpready/artifact"
	"github.com/mcpready/mcpready/controlplane/store"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/nodelabel"
)

// distributed lists the kinds agents receive.
var distributed = []artifact.Kind{artifact.KindTrustPolicy, artifact.KindDeclaration, artifact.KindRegistryEntry, artifact.KindPolicy, artifact.KindEvidence}

// resource is one distributable artifact with its parsed scope.
type resource struct {
	pb    *mcpreadyv1.Resource
	scope nodelabel.Scope
}

// snapshot is the immutable set of one kind's live resources.
type snapshot struct {
	version   string
	resources []*resource // sorted by name
	// tombstones are the signed tombstones of deleted names (sorted by
	// name), sent with the removals so an agent can check them.
	tombstones []*mcpreadyv1.Resource
	built      time.Time
}

// resource returns the live resource named name whatever its scope, or nil.
func (s *snapshot) resource(name string) *resource {
	if s == nil {
		return nil
	}
	i, ok := slices.BinarySearchFunc(s.resources, name, func(r *resource, n string) int { return strings.Compare(r.pb.Name, n) })
	if !ok {
		return nil
	}
	return s.resources[i]
}

// tombstone returns the tombstone of the deleted name, or nil.
func (s *snapshot) tombstone(name string) *mcpreadyv1.Resource {
	i, ok := slices.BinarySearchFunc(s.tombstones, name, func(r *mcpreadyv1.Resource, n string) int { return strings.Compare(r.Name, n) })
	if !ok {
		return nil
	}
	return s.tombstones[i]
}

func buildSnapshot(k artifact.Kind, recs []store.Record, now time.Time) *snapshot {
	var maxMod int64
	s := &snapshot{built: now}
	for _, r := range recs {
		maxMod = max(maxMod, r.ModRevision)
		if r.Deleted {
			s.tombstones = append(s.tombstones, &mcpreadyv1.Resource{Name: r.Name, TypeUrl: artifact.KindTombstone.TypeURL(), Version: strconv.FormatInt(r.Revision, 10), Bundle: r.Bundle})
			continue
		}
		res := &resource{pb: &mcpreadyv1.Resource{Name: r.Name, TypeUrl: k.TypeURL(), Version: strconv.FormatInt(r.Revision, 10), Bundle: r.Bundle}, scope: nodelabel.ScopeOf(r.Labels)}
		s.resources = append(s.resources, res)
	}
	s.version = strconv.FormatInt(maxMod, 10)
	return s
}

// nodeScope is a node's values for each scoping dimension.
type nodeScope = nodelabel.Values

func scopeOf(n *mcpreadyv1.Node) nodeScope { return nodelabel.ValuesOf(n.GetLabels()) }

func (r *resource) visibleTo(ns *nodeScope) bool { return r.scope.Includes(ns) }

// filter returns the resources of s visible to ns, restricted to names
// when names is non-empty.
func (s *snapshot) filter(ns *nodeScope, names []string) []*mcpreadyv1.Resource {
	out := make([]*mcpreadyv1.Resource, 0, len(s.resources))
	for _, r := range s.resources {
		if len(names) > 0 && !slices.Contains(names, r.pb.Name) {
			continue
		}
		if r.visibleTo(ns) {
			out = append(out, r.pb)
		}
	}
	return out
}

// entitled returns held (name -> version an agent says it holds) without
// the names whose current version is scoped away from ns, unless the
// version the agent names was itself within ns's scope. Only an agent
// that held a resource is sent its scoped-away successor (which is how it
// learns to drop it); naming another tenant's resource gets nothing.
func (s *Server) entitled(ctx context.Context, k artifact.Kind, ns *nodeScope, held map[string]string) (map[string]string, error) {
	out := make(map[string]string, len(held))
	sn := s.snapshot(k)
	for name, v := range held {
		if r := sn.resource(name); r != nil && !r.visibleTo(ns) {
			ok, err := s.heldInScope(ctx, k, name, v, ns)
			if err != nil {
				return nil, status.Errorf(codes.Unavailable, "checking held %s %q: %v", k, name, err)
			}
			if !ok {
				s.o.Logger.Warn("discovery: ignoring a held resource that was never in the agent's scope", "kind", k, "name", name, "version", v)
				continue
			}
		}
		out[name] = v
	}
	return out, nil
}

// heldInScope reports whether revision version of (k, name) exists and
// was scoped to ns.
func (s *Server) heldInScope(ctx context.Context, k artifact.Kind, name, version string, ns *nodeScope) (bool, error) {
	recs, err := s.st.History(ctx, k, name)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	for _, r := range recs {
		if strconv.FormatInt(r.Revision, 10) == version && !r.Deleted {
			sc := nodelabel.ScopeOf(r.Labels)
			return sc.Includes(ns), nil
		}
	}
	return false, nil
}
