package subscribe

import (
	"fmt"
	"sort"
	"strings"

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
	// Unenforced lists the field paths the artifact sets that mcpready
	// does not enforce (artifact.Unenforced), sorted.
	Unenforced []string
}

func newResource(name string, k artifact.Kind, version string, bundle []byte, v *sign.Verified) *Resource {
	return &Resource{Name: name, Kind: k, Version: version, Bundle: bundle, Verified: v, Unenforced: artifact.Unenforced(v.Object)}
}

// Warning says that one installed artifact sets fields that are not
// enforced: they are accepted and have no effect.
type Warning struct {
	Kind    artifact.Kind
	Name    string
	Version string
	// Fields are spec field paths, e.g. "semanticValidation".
	Fields []string
}

func (w Warning) String() string {
	return fmt.Sprintf("%s %q (version %s) sets fields that are not enforced: %s", w.Kind, w.Name, w.Version, strings.Join(w.Fields, ", "))
}

// Warnings lists, per installed artifact that sets not-enforced fields,
// which fields, ordered by kind and name.
func (s *Snapshot) Warnings() []Warning {
	return s.newWarnings(nil)
}

// newWarnings is Warnings restricted to resources that old does not hold
// (the same *Resource): what a new install should log.
func (s *Snapshot) newWarnings(old *Snapshot) []Warning {
	if s == nil {
		return nil
	}
	var out []Warning
	for _, k := range artifact.Kinds() {
		for _, r := range s.List(k) {
			if len(r.Unenforced) == 0 || old.Get(k, r.Name) == r {
				continue
			}
			out = append(out, Warning{Kind: k, Name: r.Name, Version: r.Version, Fields: r.Unenforced})
		}
	}
	return out
}

// Snapshot is one immutable, fully verified configuration. Never modify it.
type Snapshot struct {
	// Generation counts accepted changes since the agent started.
	Generation uint64
	// Trust is the verified TrustPolicy; nil until one was received.
	Trust     *sign.Trust
	resources map[artifact.Kind]map[string]*Resource // held
	// withheld: held resources not used, and why (expiry.go).
	withheld map[artifact.Kind]map[string]string
}

// Get returns one resource in use, or nil (also for a withheld one).
func (s *Snapshot) Get(k artifact.Kind, name string) *Resource {
	if s == nil || s.withheld[k][name] != "" {
		return nil
	}
	return s.resources[k][name]
}

// List returns every resource of kind k in use, sorted by name.
func (s *Snapshot) List(k artifact.Kind) []*Resource {
	if s == nil {
		return nil
	}
	return s.list(k, false)
}

// list is List, with the withheld resources too when held is set.
func (s *Snapshot) list(k artifact.Kind, held bool) []*Resource {
	m := s.resources[k]
	out := make([]*Resource, 0, len(m))
	for n, r := range m {
		if held || s.withheld[k][n] == "" {
			out = append(out, r)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Versions returns name -> version of every resource of kind k held,
// withheld ones included (Discovery presents them as held).
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

// Empty reports whether the snapshot uses nothing (it holds nothing, or
// withholds all it holds).
func (s *Snapshot) Empty() bool {
	if s == nil {
		return true
	}
	for k, m := range s.resources {
		if len(m) > len(s.withheld[k]) {
			return false
		}
	}
	return true
}

// clone copies the held resources, withheld ones included.
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
