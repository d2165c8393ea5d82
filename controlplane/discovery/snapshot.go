package discovery

import (
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mcpready/mcpready/artifact"
	"github.com/mcpready/mcpready/controlplane/store"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
)

// Scoping labels. An artifact's metadata.labels may carry these keys with a
// comma-separated list of values; a node only receives the artifact if, for
// every such label present, the node's matching label has one of the
// listed values. An artifact without scoping labels goes to every node.
const (
	LabelRegion      = "mcpready.dev/region"
	LabelTenantClass = "mcpready.dev/tenant-class"
	LabelHost        = "mcpready.dev/host"
)

// Node label keys read from mcpreadyv1.Node.labels. The tenant-class value
// may be a comma-separated list; the prefixed forms ("mcpready.dev/region")
// are accepted as well.
const (
	NodeRegion      = "region"
	NodeTenantClass = "tenant-class"
	NodeHost        = "host"
)

var scopeKeys = [...]struct{ artifact, node string }{
	{LabelRegion, NodeRegion}, {LabelTenantClass, NodeTenantClass}, {LabelHost, NodeHost},
}

// distributed lists the kinds agents receive.
var distributed = []artifact.Kind{artifact.KindTrustPolicy, artifact.KindDeclaration, artifact.KindRegistryEntry, artifact.KindPolicy, artifact.KindEvidence}

// resource is one distributable artifact with its parsed scope.
type resource struct {
	pb    *mcpreadyv1.Resource
	scope [len(scopeKeys)][]string // nil: unscoped in that dimension
}

// snapshot is the immutable set of one kind's live resources.
type snapshot struct {
	version   string
	resources []*resource // sorted by name
	built     time.Time
}

func buildSnapshot(k artifact.Kind, recs []store.Record, now time.Time) *snapshot {
	var maxMod int64
	s := &snapshot{built: now}
	for _, r := range recs {
		maxMod = max(maxMod, r.ModRevision)
		if r.Deleted {
			continue
		}
		res := &resource{pb: &mcpreadyv1.Resource{Name: r.Name, TypeUrl: k.TypeURL(), Version: strconv.FormatInt(r.Revision, 10), Bundle: r.Bundle}}
		for i, sk := range scopeKeys {
			if v, ok := r.Labels[sk.artifact]; ok {
				res.scope[i] = splitList(v)
			}
		}
		s.resources = append(s.resources, res)
	}
	s.version = strconv.FormatInt(maxMod, 10)
	return s
}

func splitList(v string) []string {
	var out []string
	for p := range strings.SplitSeq(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	if out == nil {
		out = []string{} // present but empty: matches no node
	}
	return out
}

// nodeScope is a node's values for each scoping dimension.
type nodeScope [len(scopeKeys)][]string

func scopeOf(n *mcpreadyv1.Node) nodeScope {
	var ns nodeScope
	labels := n.GetLabels()
	for i, sk := range scopeKeys {
		v, ok := labels[sk.node]
		if !ok {
			v, ok = labels[sk.artifact]
		}
		if !ok && sk.node == NodeTenantClass {
			v, ok = labels["tenant-classes"]
		}
		if ok {
			ns[i] = splitList(v)
		}
	}
	return ns
}

func (r *resource) visibleTo(ns *nodeScope) bool {
	for i, allowed := range r.scope {
		if allowed == nil {
			continue
		}
		if !slices.ContainsFunc(ns[i], func(v string) bool { return slices.Contains(allowed, v) }) {
			return false
		}
	}
	return true
}

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
