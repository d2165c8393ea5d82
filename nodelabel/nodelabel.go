// Package nodelabel names the label keys that scope which host agents
// receive which artifacts, for the agent and the control plane alike:
//
//   - node labels (Key), which an agent sends in mcpreadyv1.Node.labels on
//     the Discovery stream and which the agent itself reads (its region is
//     the region of its decisions);
//   - scope labels (ScopeKey), which an artifact's metadata.labels carry
//     with a comma-separated list of values; a node receives the artifact
//     only if, for every scope label present, its matching node label has
//     one of the listed values.
//
// Under mTLS an agent may claim only node labels bound to its identity;
// CertURI is the URI SAN that binds one to a client certificate.
//
// Nobody spells these keys as string literals elsewhere. The package names
// the keys and holds the one scope rule (Scope.Includes), which the
// Discovery server applies when it sends and the agent again when it
// installs; it must not import anything of the agent or control plane.
package nodelabel

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Key is a node label key.
type Key string

// Node label keys. A value may be a comma-separated list.
const (
	// Region is the host's region.
	Region Key = "region"
	// TenantClass lists the tenant classes the host serves.
	TenantClass Key = "tenant-class"
	// Host is the host name.
	Host Key = "host"
	// TenantClasses is accepted in place of TenantClass (the spelling the
	// CLI's --labels help and the demo use).
	TenantClasses Key = "tenant-classes"
)

// ScopeKey is an artifact metadata label key that scopes distribution.
type ScopeKey string

// Scope label keys, one per scoping dimension.
const (
	ScopeRegion      ScopeKey = "mcpready.dev/region"
	ScopeTenantClass ScopeKey = "mcpready.dev/tenant-class"
	ScopeHost        ScopeKey = "mcpready.dev/host"
)

// Dimensions lists the scoping dimensions in a fixed order.
var Dimensions = [...]Key{Region, TenantClass, Host}

// Scope returns the artifact label that scopes on k ("" for an alias).
func (k Key) Scope() ScopeKey {
	switch k {
	case Region:
		return ScopeRegion
	case TenantClass:
		return ScopeTenantClass
	case Host:
		return ScopeHost
	}
	return ""
}

// Lookup returns a node's value for k: the label k, else its scope form
// (e.g. "mcpready.dev/region"), else, for TenantClass, TenantClasses.
func Lookup(labels map[string]string, k Key) (string, bool) {
	if v, ok := labels[string(k)]; ok {
		return v, true
	}
	if s := k.Scope(); s != "" {
		if v, ok := labels[string(s)]; ok {
			return v, true
		}
	}
	if k == TenantClass {
		v, ok := labels[string(TenantClasses)]
		return v, ok
	}
	return "", false
}

// Split parses a comma-separated label value, dropping blanks. A present
// but empty value gives an empty, non-nil list (it matches nothing).
func Split(v string) []string {
	out := []string{}
	for p := range strings.SplitSeq(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// Scope is an artifact's scope: per dimension (in Dimensions order) the
// values its scope label lists, nil when it has none in that dimension.
type Scope [len(Dimensions)][]string

// ScopeOf reads the scope labels of an artifact's metadata.labels.
func ScopeOf(labels map[string]string) Scope {
	var s Scope
	for i, k := range Dimensions {
		if v, ok := labels[string(k.Scope())]; ok {
			s[i] = Split(v)
		}
	}
	return s
}

// Values are a node's values per dimension, from its node labels.
type Values [len(Dimensions)][]string

// ValuesOf reads a node's labels.
func ValuesOf(labels map[string]string) Values {
	var v Values
	for i, k := range Dimensions {
		if s, ok := Lookup(labels, k); ok {
			v[i] = Split(s)
		}
	}
	return v
}

// Includes reports whether a node with values n is in scope s: for every
// dimension s names, n has one of the listed values.
func (s *Scope) Includes(n *Values) bool {
	for i, allowed := range s {
		if allowed == nil {
			continue
		}
		if !slices.ContainsFunc(n[i], func(v string) bool { return slices.Contains(allowed, v) }) {
			return false
		}
	}
	return true
}

// CertURIPrefix starts the URI SANs that bind node labels to a client
// certificate: "urn:mcpready:node-label:KEY:VALUE", one SAN per value, KEY
// one of Dimensions (region, tenant-class, host), VALUE a single value
// (no comma). For example a certificate with the URI SANs
// "urn:mcpready:node-label:region:eu-west" and
// "urn:mcpready:node-label:tenant-class:gold" may claim region eu-west and
// tenant class gold. Such SANs never name the certificate's identity.
const CertURIPrefix = "urn:mcpready:node-label:"

// ErrCertURI: a URI SAN starts with CertURIPrefix but is not KEY:VALUE
// with a known key and one non-empty value.
var ErrCertURI = errors.New("malformed node-label URI SAN")

// CertURI is the URI SAN that binds value of key k to a certificate.
func CertURI(k Key, value string) string { return CertURIPrefix + string(k) + ":" + value }

// IsCertURI reports whether uri is a node-label URI SAN (well formed or not).
func IsCertURI(uri string) bool { return strings.HasPrefix(uri, CertURIPrefix) }

// FromCertURIs returns the node labels a certificate's URI SANs bind, per
// key; URIs without CertURIPrefix are ignored. A malformed node-label URI
// is an error wrapping ErrCertURI (the certificate binds nothing).
func FromCertURIs(uris []string) (map[Key][]string, error) {
	var out map[Key][]string
	for _, u := range uris {
		if !IsCertURI(u) {
			continue
		}
		k, v, ok := strings.Cut(strings.TrimPrefix(u, CertURIPrefix), ":")
		key := Key(k)
		if !ok || !slices.Contains(Dimensions[:], key) || v == "" || strings.ContainsAny(v, ", ") {
			return nil, fmt.Errorf("%w: %q (want %sKEY:VALUE, KEY one of region, tenant-class, host)", ErrCertURI, u, CertURIPrefix)
		}
		if out == nil {
			out = map[Key][]string{}
		}
		if !slices.Contains(out[key], v) {
			out[key] = append(out[key], v)
		}
	}
	return out, nil
}
