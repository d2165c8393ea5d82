// Package authz authenticates and authorises every RPC the control plane
// serves. A caller's identity comes from its verified mTLS client
// certificate; configured rules map identities to roles:
//
//   - admin: apply and delete artifacts;
//   - agent: Discovery, receipt upload and drift reports, for its own node
//     id only (the node id a request names must be its certificate's), and
//     with the node labels (region, tenant classes, host) bound to its
//     identity only: those its certificate carries as node-label URI SANs
//     (nodelabel.CertURI), those Options.NodeLabels grants it, and host
//     equal to its own node id. A request
//     claiming any other value is refused (ErrWrongLabels), so an agent
//     cannot ask for what is scoped to another region or tenant;
//   - reader: get, history, registry status, receipt queries, tail, export.
//
// Admins may also read. A caller on a loopback connection without a client
// certificate is the single-machine quickstart and holds every role, but
// only when Options.LocalPlaintext says so (its node labels are
// self-asserted); anything else without a certificate is refused as
// unauthenticated. A method the table does not name is refused:
// the table fails closed.
//
// It must not verify artifacts or inspect anything of a request but its
// node id; that is the services' job.
package authz

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/nodelabel"
)

// Role is what a caller may do.
type Role string

// The roles.
const (
	RoleAdmin  Role = "admin"
	RoleAgent  Role = "agent"
	RoleReader Role = "reader"
)

// ParseRole parses a role name.
func ParseRole(s string) (Role, error) {
	switch r := Role(s); r {
	case RoleAdmin, RoleAgent, RoleReader:
		return r, nil
	}
	return "", fmt.Errorf("%w: unknown role %q (want admin, agent or reader)", ErrConfig, s)
}

// Errors.
var (
	// ErrConfig: the rules do not parse.
	ErrConfig = errors.New("authz: bad configuration")
	// ErrUnauthenticated: the caller presented no verified identity.
	ErrUnauthenticated = errors.New("no verified client identity")
	// ErrForbidden: the caller's roles do not allow the method.
	ErrForbidden = errors.New("role does not allow this method")
	// ErrWrongNode: an agent named a node id other than its certificate's.
	ErrWrongNode = errors.New("node id is not the caller's")
	// ErrWrongLabels: an agent claimed node labels its identity is not
	// bound to (neither its certificate nor Options.NodeLabels).
	ErrWrongLabels = errors.New("node labels are not the caller's")
)

// LabelRule grants the identities matching Match (a path.Match pattern, as
// in Rule) the node-label values they may claim: per nodelabel key
// (region, tenant-class, host) the allowed values. A key a matching rule
// does not name may not be claimed at all.
type LabelRule struct {
	Match  string
	Labels map[nodelabel.Key][]string
}

// ParseLabelRule parses "PATTERN=key:v1|v2;key2:v3" (keys as in package
// nodelabel: region, tenant-class, host).
func ParseLabelRule(s string) (LabelRule, error) {
	i := strings.LastIndexByte(s, '=')
	if i <= 0 {
		return LabelRule{}, fmt.Errorf("%w: node-label rule %q: want PATTERN=key:v1|v2;key:v", ErrConfig, s)
	}
	pat := s[:i]
	if _, err := path.Match(pat, ""); err != nil {
		return LabelRule{}, fmt.Errorf("%w: node-label rule %q: %w", ErrConfig, s, err)
	}
	r := LabelRule{Match: pat, Labels: map[nodelabel.Key][]string{}}
	for part := range strings.SplitSeq(s[i+1:], ";") {
		k, vs, ok := strings.Cut(part, ":")
		key := nodelabel.Key(strings.TrimSpace(k))
		if !ok || !slices.Contains(nodelabel.Dimensions[:], key) || strings.TrimSpace(vs) == "" {
			return LabelRule{}, fmt.Errorf("%w: node-label rule %q: %q is not key:v1|v2 with key one of region, tenant-class, host", ErrConfig, s, part)
		}
		for v := range strings.SplitSeq(vs, "|") {
			r.Labels[key] = append(r.Labels[key], strings.TrimSpace(v))
		}
	}
	return r, nil
}

// Rule grants Role to every certificate identity that matches Match, a
// path.Match pattern ("*" matches within one "/"-separated segment), e.g.
// "spiffe://example.org/agent/*" or "admin-*".
type Rule struct {
	Match string
	Role  Role
}

// ParseRule parses "PATTERN=ROLE", the form of the --authz flag.
func ParseRule(s string) (Rule, error) {
	pat, role, ok := strings.Cut(s, "=")
	if !ok || pat == "" {
		return Rule{}, fmt.Errorf("%w: rule %q is not PATTERN=ROLE", ErrConfig, s)
	}
	r, err := ParseRole(role)
	if err != nil {
		return Rule{}, err
	}
	if _, err := path.Match(pat, ""); err != nil {
		return Rule{}, fmt.Errorf("%w: rule %q: %w", ErrConfig, s, err)
	}
	return Rule{Match: pat, Role: r}, nil
}

// Identity is an authenticated caller.
type Identity struct {
	// Name is the certificate's first URI SAN, else its first DNS SAN,
	// else its subject common name; "local" for a plaintext loopback
	// caller.
	Name string
	// NodeID is the node id an agent with this identity may use: the last
	// "/"-separated segment of Name.
	NodeID string
	// Labels are the node-label values the certificate binds (its
	// node-label URI SANs, nodelabel.FromCertURIs), per key.
	Labels map[nodelabel.Key][]string
	// Local is a plaintext loopback caller (the quickstart).
	Local bool
	Roles []Role
}

// MayRead reports whether the identity holds a role that may read (reader
// or admin), as the read methods of the table require.
func (id Identity) MayRead() bool {
	return slices.ContainsFunc(readers, id.Has)
}

// Has reports whether the identity holds role r.
func (id Identity) Has(r Role) bool {
	for _, x := range id.Roles {
		if x == r {
			return true
		}
	}
	return false
}

// Options configure an Authorizer.
type Options struct {
	// Rules map certificate identities to roles. An identity matching no
	// rule holds no role. Zero: no certificate holds a role.
	Rules []Rule
	// NodeLabels grants node-label values to certificate identities, in
	// addition to those their certificates carry: a node-bound request
	// whose labels claim a value neither its certificate nor a matching
	// rule binds is refused (ErrWrongLabels). Zero: only the certificates'
	// labels (a certificate without node-label URI SANs may claim none).
	NodeLabels []LabelRule
	// LocalPlaintext grants every role to callers on loopback connections
	// that present no client certificate, over plaintext or server-only
	// TLS (the single-machine quickstart), with self-asserted node labels.
	// Zero: they are refused.
	LocalPlaintext bool
	// Logger receives one line per refusal (method, identity, reason; no
	// request content). Nil discards.
	Logger *slog.Logger
	// Registerer receives mcpready_controlplane_rpc_refused_total. Nil
	// records nothing.
	Registerer prometheus.Registerer
}

// Authorizer checks RPCs against the method table.
type Authorizer struct {
	o       Options
	log     *slog.Logger
	refused *prometheus.CounterVec
}

// New returns an Authorizer.
func New(o Options) (*Authorizer, error) {
	for _, r := range o.Rules {
		if _, err := ParseRole(string(r.Role)); err != nil {
			return nil, err
		}
		if _, err := path.Match(r.Match, ""); err != nil {
			return nil, fmt.Errorf("%w: rule %q: %w", ErrConfig, r.Match, err)
		}
	}
	a := &Authorizer{o: o, log: o.Logger}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	a.refused = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "mcpready_controlplane_rpc_refused_total",
		Help: "RPCs refused by authentication or authorisation, by method and reason."}, []string{"method", "reason"})
	if o.Registerer != nil {
		if err := o.Registerer.Register(a.refused); err != nil {
			return nil, fmt.Errorf("%w: metrics: %w", ErrConfig, err)
		}
	}
	return a, nil
}

// Identify returns the caller's identity from the gRPC peer of ctx.
func (a *Authorizer) Identify(ctx context.Context) (Identity, error) {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return Identity{}, ErrUnauthenticated
	}
	var state *tls.ConnectionState
	if ti, ok := p.AuthInfo.(credentials.TLSInfo); ok {
		state = &ti.State
	}
	return a.IdentifyConn(state, p.Addr)
}

// IdentifyConn is Identify for a connection outside gRPC (the console's
// HTTP requests): its TLS state (nil for plaintext) and remote address,
// under the same rules.
func (a *Authorizer) IdentifyConn(state *tls.ConnectionState, addr net.Addr) (Identity, error) {
	if state != nil && len(state.VerifiedChains) > 0 && len(state.VerifiedChains[0]) > 0 {
		leaf := state.VerifiedChains[0][0]
		name := certName(leaf)
		if name == "" {
			return Identity{}, fmt.Errorf("%w: client certificate names no identity", ErrUnauthenticated)
		}
		uris := make([]string, len(leaf.URIs))
		for i, u := range leaf.URIs {
			uris[i] = u.String()
		}
		labels, err := nodelabel.FromCertURIs(uris)
		if err != nil {
			return Identity{Name: name}, fmt.Errorf("%w: client certificate: %w", ErrUnauthenticated, err)
		}
		id := Identity{Name: name, NodeID: name[strings.LastIndexByte(name, '/')+1:], Labels: labels}
		for _, r := range a.o.Rules {
			if ok, _ := path.Match(r.Match, name); ok && !id.Has(r.Role) {
				id.Roles = append(id.Roles, r.Role)
			}
		}
		return id, nil
	}
	if a.o.LocalPlaintext && isLoopback(addr) {
		return Identity{Name: "local", Local: true, Roles: []Role{RoleAdmin, RoleAgent, RoleReader}}, nil
	}
	return Identity{}, fmt.Errorf("%w: caller %s presented no verified client certificate", ErrUnauthenticated, addr)
}

// certName is the certificate's first URI SAN that is not a node-label
// URI, else its first DNS SAN, else its subject common name.
func certName(c *x509.Certificate) string {
	for _, u := range c.URIs {
		if s := u.String(); !nodelabel.IsCertURI(s) {
			return s
		}
	}
	if len(c.DNSNames) > 0 {
		return c.DNSNames[0]
	}
	return c.Subject.CommonName
}

func isLoopback(addr net.Addr) bool {
	switch a := addr.(type) {
	case *net.TCPAddr:
		return a.IP.IsLoopback()
	case *net.UnixAddr:
		return true
	}
	return false
}

// admit decides whether id may call method; it returns the rule that
// applies so streams can keep checking node ids.
func (a *Authorizer) admit(id Identity, method string) (rule, error) {
	r, ok := methods[method]
	if !ok {
		return rule{}, fmt.Errorf("%w: %s is not in the method table", ErrForbidden, method)
	}
	for _, role := range r.roles {
		if id.Has(role) {
			return r, nil
		}
	}
	if len(r.roles) == 0 {
		return r, nil
	}
	return rule{}, fmt.Errorf("%w: %s needs %s; %q holds %v", ErrForbidden, method, rolesText(r.roles), id.Name, id.Roles)
}

func rolesText(rs []Role) string {
	s := make([]string, len(rs))
	for i, r := range rs {
		s[i] = string(r)
	}
	return strings.Join(s, " or ")
}

// checkLabels refuses node labels that are not bound to id: by its
// certificate or by a node-label rule. A local (quickstart) caller's
// labels are self-asserted.
func (a *Authorizer) checkLabels(id Identity, n *mcpreadyv1.Node) error {
	if id.Local {
		return nil
	}
	claimed := nodelabel.ValuesOf(n.GetLabels())
	for i, key := range nodelabel.Dimensions {
		for _, v := range claimed[i] {
			// host = the certificate's own node id is bound by the identity
			granted := slices.Contains(id.Labels[key], v) || (key == nodelabel.Host && v == id.NodeID)
			for _, lr := range a.o.NodeLabels {
				if ok, _ := path.Match(lr.Match, id.Name); ok && slices.Contains(lr.Labels[key], v) {
					granted = true
				}
			}
			if !granted {
				return fmt.Errorf("%w: %s=%s is bound to %q neither by its certificate (node-label URI SANs) nor by a node-label rule", ErrWrongLabels, key, v, id.Name)
			}
		}
	}
	return nil
}

// checkNode enforces the node binding of agent methods on one message:
// its node id, and its labels (checkLabels).
func (a *Authorizer) checkNode(id Identity, r rule, msg any, first bool) error {
	if !r.nodeBound || id.Local {
		return nil
	}
	n, ok := msg.(interface{ GetNode() *mcpreadyv1.Node })
	if !ok {
		return nil
	}
	got := n.GetNode().GetId()
	if got == "" && !first {
		return nil // xDS: later requests may omit the node
	}
	if got != id.NodeID {
		return fmt.Errorf("%w: request names node %q, certificate is %q", ErrWrongNode, got, id.NodeID)
	}
	return a.checkLabels(id, n.GetNode())
}

func (a *Authorizer) refuse(method string, id Identity, err error) error {
	reason, code := "forbidden", codes.PermissionDenied
	switch {
	case errors.Is(err, ErrUnauthenticated):
		reason, code = "unauthenticated", codes.Unauthenticated
	case errors.Is(err, ErrWrongNode):
		reason = "wrong-node"
	case errors.Is(err, ErrWrongLabels):
		reason = "wrong-labels"
	}
	a.refused.WithLabelValues(method, reason).Inc()
	a.log.Warn("rpc refused", "method", method, "identity", id.Name, "reason", reason, "error", err)
	return status.Error(code, err.Error())
}

// UnaryInterceptor checks unary RPCs.
func (a *Authorizer) UnaryInterceptor() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		id, err := a.Identify(ctx)
		if err != nil {
			return nil, a.refuse(info.FullMethod, id, err)
		}
		r, err := a.admit(id, info.FullMethod)
		if err == nil {
			err = a.checkNode(id, r, req, true)
		}
		if err != nil {
			return nil, a.refuse(info.FullMethod, id, err)
		}
		return h(ctx, req)
	}
}

// StreamInterceptor checks streaming RPCs, and every message an agent
// sends on a node-bound stream.
func (a *Authorizer) StreamInterceptor() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		id, err := a.Identify(ss.Context())
		if err != nil {
			return a.refuse(info.FullMethod, id, err)
		}
		r, err := a.admit(id, info.FullMethod)
		if err != nil {
			return a.refuse(info.FullMethod, id, err)
		}
		return h(srv, &checkedStream{ServerStream: ss, a: a, id: id, r: r, method: info.FullMethod, first: true})
	}
}

type checkedStream struct {
	grpc.ServerStream
	a      *Authorizer
	id     Identity
	r      rule
	method string
	first  bool
}

func (s *checkedStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	first := s.first
	s.first = false
	if err := s.a.checkNode(s.id, s.r, m, first); err != nil {
		return s.a.refuse(s.method, s.id, err)
	}
	return nil
}

// RefusedCounter is mcpready_controlplane_rpc_refused_total, by method and
// reason (unauthenticated, forbidden, wrong-node, wrong-labels).
func (a *Authorizer) RefusedCounter() *prometheus.CounterVec { return a.refused }
