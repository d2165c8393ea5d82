// Package discovery implements the DiscoveryService: xDS-style distribution
// of signed artifacts to host agents.
//
// Resources are the stored bundles byte-for-byte, addressed by type URL
// (artifact.Kind.TypeURL) and name; a resource's version is its store
// revision and a type's version_info is the highest etcd mod revision of
// that kind, so every replica on the same etcd computes the same versions.
// Responses carry a nonce; an agent ACKs by echoing it, or NACKs with
// error_detail and keeps its previous version. A NACK never causes a resend:
// only a new version of the type is pushed afterwards. The incremental
// variant tracks the versions each agent holds (seeded from
// initial_resource_versions) and sends only what differs.
//
// Changes arrive from the store's etcd watch, are debounced, and rebuilt
// into one immutable snapshot per kind; each stream is woken without
// blocking and filters the snapshot by its node's scoping labels. Encoding
// a push is bounded by a semaphore; a slow agent only delays itself.
//
// The package must not verify, alter or write bundles (agents verify them;
// only package writer writes), and must not decide what a label key is
// (package nodelabel names them).
package discovery

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/mcpready/mcpready/artifact"
	"github.com/mcpready/mcpready/controlplane/store"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
)

// Options configures a Server. The zero value is usable.
type Options struct {
	// Debounce is how long changes are gathered before a push; 0 means 100ms.
	Debounce time.Duration
	// MaxConcurrentPushes bounds concurrent encodes; 0 means 4×GOMAXPROCS.
	MaxConcurrentPushes int
	// Metrics, if non-nil, is updated.
	Metrics *Metrics
	// Logger; nil discards.
	Logger *slog.Logger
}

// Server serves DiscoveryService from a store. Call Run to load and watch.
type Server struct {
	mcpreadyv1.UnimplementedDiscoveryServiceServer
	st    *store.Store
	o     Options
	sem   chan struct{}
	ready chan struct{}
	nonce atomic.Uint64

	mu    sync.RWMutex
	snaps map[artifact.Kind]*snapshot
	conns map[*conn]struct{}
	nodes map[string]int // open streams per node id
}

// New returns a Server over st.
func New(st *store.Store, o Options) *Server {
	if o.Debounce <= 0 {
		o.Debounce = 100 * time.Millisecond
	}
	if o.MaxConcurrentPushes <= 0 {
		o.MaxConcurrentPushes = 4 * runtime.GOMAXPROCS(0)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Server{st: st, o: o, sem: make(chan struct{}, o.MaxConcurrentPushes), ready: make(chan struct{}),
		snaps: map[artifact.Kind]*snapshot{}, conns: map[*conn]struct{}{}, nodes: map[string]int{}}
}

// Run loads every distributed kind, then follows the store's watch until
// ctx ends. It retries the initial load while etcd is unavailable.
func (s *Server) Run(ctx context.Context) error {
	var rev int64
	for {
		var err error
		rev, err = s.st.CurrentRevision(ctx)
		if err == nil {
			err = s.rebuild(ctx, distributed)
		}
		if err == nil {
			break
		}
		s.o.Logger.Warn("discovery: initial load failed; retrying", "err", err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
	close(s.ready)

	changed := make(chan []artifact.Kind, 64)
	go s.st.Watch(ctx, rev, func(k []artifact.Kind) {
		select {
		case changed <- k:
		case <-ctx.Done():
		}
	})
	pending := map[artifact.Kind]bool{}
	var timer <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return nil
		case ks := <-changed:
			for _, k := range ks {
				pending[k] = true
			}
			if timer == nil {
				timer = time.After(s.o.Debounce)
			}
		case <-timer:
			timer = nil
			var kinds []artifact.Kind
			for _, k := range distributed {
				if pending[k] {
					kinds = append(kinds, k)
				}
			}
			clear(pending)
			if err := s.rebuild(ctx, kinds); err != nil {
				s.o.Logger.Warn("discovery: rebuild failed; retrying", "err", err)
				for _, k := range kinds {
					pending[k] = true
				}
				timer = time.After(time.Second)
			}
		}
	}
}

// rebuild relists kinds, swaps their snapshots and wakes every stream.
func (s *Server) rebuild(ctx context.Context, kinds []artifact.Kind) error {
	if len(kinds) == 0 {
		return nil
	}
	fresh := map[artifact.Kind]*snapshot{}
	for _, k := range kinds {
		recs, _, err := s.st.List(ctx, k)
		if err != nil {
			return err
		}
		fresh[k] = buildSnapshot(k, recs, time.Now())
	}
	s.mu.Lock()
	for k, sn := range fresh {
		if old := s.snaps[k]; old != nil && old.version == sn.version {
			continue
		}
		s.snaps[k] = sn
	}
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.wake()
	}
	return nil
}

func (s *Server) snapshot(k artifact.Kind) *snapshot {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.snaps[k]
}

func (s *Server) nextNonce() string { return strconv.FormatUint(s.nonce.Add(1), 36) }

// conn is one agent stream's shared bookkeeping.
type conn struct {
	wakeCh chan struct{}
	node   string // set once by identify, read under Server.mu
	since  time.Time
	types  map[string]*TypeStatus // by type URL, under Server.mu
}

// Agent is one open agent stream: its node id, when it connected and what
// it answered to each type pushed to it.
type Agent struct {
	NodeID string       `json:"nodeId"`
	Since  time.Time    `json:"since"`
	Types  []TypeStatus `json:"types"`
}

// TypeStatus is an agent's last answer for one resource type: the version
// it last ACKed and, if it refused a later one, that version and the
// reason its NACK gave.
type TypeStatus struct {
	TypeURL    string    `json:"typeUrl"`
	Acked      string    `json:"acked,omitempty"`
	Nacked     string    `json:"nacked,omitempty"`
	NackReason string    `json:"nackReason,omitempty"`
	At         time.Time `json:"at"`
}

// Agents returns the open agent streams that named their node, sorted by
// node id (a node with two streams appears twice). Safe for concurrent use.
func (s *Server) Agents() []Agent {
	s.mu.RLock()
	out := make([]Agent, 0, len(s.conns))
	for c := range s.conns {
		if c.node == "" {
			continue
		}
		a := Agent{NodeID: c.node, Since: c.since}
		for _, ts := range c.types {
			a.Types = append(a.Types, *ts)
		}
		slices.SortFunc(a.Types, func(x, y TypeStatus) int { return strings.Compare(x.TypeURL, y.TypeURL) })
		out = append(out, a)
	}
	s.mu.RUnlock()
	slices.SortFunc(out, func(x, y Agent) int { return cmp.Or(strings.Compare(x.NodeID, y.NodeID), x.Since.Compare(y.Since)) })
	return out
}

// answered records c's ACK (reason "") or NACK of version for typeURL.
func (s *Server) answered(c *conn, typeURL, version, reason string, nack bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ts := c.types[typeURL]
	if ts == nil {
		ts = &TypeStatus{TypeURL: typeURL}
		c.types[typeURL] = ts
	}
	ts.At = time.Now()
	if nack {
		ts.Nacked, ts.NackReason = version, reason
		return
	}
	ts.Acked, ts.Nacked, ts.NackReason = version, "", ""
}

func (c *conn) wake() {
	select {
	case c.wakeCh <- struct{}{}:
	default:
	}
}

func (s *Server) register() (*conn, func()) {
	c := &conn{wakeCh: make(chan struct{}, 1), since: time.Now(), types: map[string]*TypeStatus{}}
	s.mu.Lock()
	s.conns[c] = struct{}{}
	s.mu.Unlock()
	s.o.Metrics.connected(1)
	return c, func() {
		s.mu.Lock()
		delete(s.conns, c)
		if c.node != "" {
			if s.nodes[c.node]--; s.nodes[c.node] <= 0 {
				delete(s.nodes, c.node)
			}
		}
		n := len(s.nodes)
		s.mu.Unlock()
		s.o.Metrics.connected(-1)
		s.o.Metrics.agents(n)
	}
}

// identify records the node id of c's stream, once.
func (s *Server) identify(c *conn, node string) {
	s.mu.Lock()
	c.node = node
	s.nodes[node]++
	n := len(s.nodes)
	s.mu.Unlock()
	s.o.Metrics.agents(n)
}

// kindOf resolves a requested type URL to a distributed kind.
func kindOf(typeURL string) (artifact.Kind, error) {
	k, err := artifact.KindFromTypeURL(typeURL)
	if err != nil {
		return "", status.Errorf(codes.InvalidArgument, "unknown type URL %q", typeURL)
	}
	for _, d := range distributed {
		if d == k {
			return k, nil
		}
	}
	return "", status.Errorf(codes.InvalidArgument, "type %q is not distributed", typeURL)
}

// send encodes msg under the push semaphore, then sends it.
func (s *Server) send(stream grpc.ServerStream, msg any, typeURL string, built time.Time) error {
	var pm grpc.PreparedMsg
	s.sem <- struct{}{}
	err := pm.Encode(stream, msg)
	<-s.sem
	if err != nil {
		return err
	}
	if err := stream.SendMsg(&pm); err != nil {
		return err
	}
	s.o.Metrics.pushed(typeURL, time.Since(built))
	return nil
}

func streamEnd(err error) error {
	if err == nil || errors.Is(err, context.Canceled) || status.Code(err) == codes.Canceled {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	return status.Error(codes.Internal, fmt.Sprint(err))
}

func (s *Server) waitReady(ctx context.Context) error {
	select {
	case <-s.ready:
		return nil
	case <-ctx.Done():
		return status.Error(codes.Unavailable, "discovery not ready")
	}
}
