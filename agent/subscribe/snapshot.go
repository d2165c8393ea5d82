package subscribe

import (
	"sort"

	"github.com/mcpready/mcpready/artifact"
	"github.com/mcpready/mcpready/sign"
)

// Resource is one verified resource.
type Resource struct {
	Name    string
	Kind    artifact.Kind
	Version string
	// Bundle is the Sigstore bundle exactly as received.
	Bundle   []byte
	Verified *sign.Verified
}

// Snapshot is one immutable, fully verified configuration. Never modify it.
type Snapshot struct {
	// Generation counts accepted changes since the agent started.
	Generation uint64
	// Trust is the verified TrustPolicy; nil until one was received.
	Trust     *sign.Trust
	resources map[artifact.Kind]map[string]*Resource
}

// Get returns one resource, or nil.
func (s *Snapshot) Get(k artifact.Kind, name string) *Resource {
	if s == nil {
		return nil
	}
	return s.resources[k][name]
}

// List returns every resource of kind k sorted by name.
func (s *Snapshot) List(k artifact.Kind) []*Resource {
	if s == nil {
		return nil
	}
	m := s.resources[k]
	out := make([]*Resource, 0, len(m))
	for _, r := range m {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Versions returns name -> version of every resource of kind k.
func (s *Snapshot) Versions(k artifact.Kind) map[string]string {
	out := map[string]string{}
	if s == nil {
		return out
	}
	for n, r := range s.resources[k] {
		out[n] = r.Version
	}
	return out
}

// Empty reports whether the snapshot holds nothing.
func (s *Snapshot) Empty() bool {
	if s == nil {
		return true
	}
	for _, m := range s.resources {
		if len(m) > 0 {
			return false
		}
	}
	return true
}

func (s *Snapshot) clone() map[artifact.Kind]map[string]*Resource {
	out := map[artifact.Kind]map[string]*Resource{}
	if s == nil {
		return out
	}
	for k, m := range s.resources {
		c := make(map[string]*Resource, len(m))
		for n, r := range m {
			c[n] = r
		}
		out[k] = c
	}
	return out
}
