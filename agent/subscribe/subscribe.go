// Package subscribe is the host agent's Discovery client. It subscribes to the
// control plane's xDS-style stream (incremental DeltaResources by default,
// state-of-the-world StreamResources supported), identifies with the node id
// and labels, and verifies every resource bundle against the pinned root key
// and the TrustPolicy before use. It ACKs by echoing the nonce, NACKs with
// the reason and keeps its previous version, keeps the last known good
// verified configuration on disk (re-verified when loaded) and reconnects
// with jittered backoff, presenting the versions it holds.
//
// Rollback and freeze protection: a resource whose signed
// provenance.version is not newer than the highest installed for its kind
// and name, or whose provenance.expiresAt has passed, is NACKed with the
// reason (artifact.ReasonRollback, artifact.ReasonExpired) and the
// previous version is kept. Every NACK is logged and counted by type and
// reason (mcpready_agent_discovery_nacks_total). The high-water marks are persisted beside the
// last known good configuration and only ever raised (see highwater.go).
// A held TrustPolicy, Policy or Declaration stops being used the moment
// its expiresAt passes (expiry.go), not when a newer version arrives.
//
// At install it logs, once per installed version, every artifact that sets
// fields mcpready does not enforce (artifact.Unenforced); Snapshot.Warnings
// lists them. Such an artifact is still installed: a warning, not a NACK.
//
// It never trusts the control plane for integrity and never makes routing
// decisions: it only publishes verified snapshots.
package subscribe

import (
	"context"
	"crypto"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	"github.com/mcpready/mcpready/artifact"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/nodelabel"
	"github.com/mcpready/mcpready/sign"
)

// Sentinel errors; rejection errors wrap one of them.
var (
	// ErrNoTrust: a resource arrived before any TrustPolicy verified.
	ErrNoTrust = errors.New("no verified trust policy")
	// ErrRejected: a resource failed verification.
	ErrRejected = errors.New("resource rejected")
	// ErrUnsignedRemoval: a removal of a Policy or a Declaration (delta
	// removal, or a full set that omits it) without a signed tombstone
	// naming the exact version held; it is kept.
	ErrUnsignedRemoval = errors.New("unsigned-removal")
	// ErrOutOfScope: a resource's signed node-label scope does not include
	// this agent; it is not installed.
	ErrOutOfScope = errors.New("out-of-scope")
)

// Mode selects the Discovery variant.
type Mode int

const (
	// ModeDelta uses DeltaResources (incremental). The default.
	ModeDelta Mode = iota
	// ModeStateOfTheWorld uses StreamResources.
	ModeStateOfTheWorld
)

// DefaultKinds are subscribed (after TrustPolicy) when Options.Kinds is empty.
var DefaultKinds = []artifact.Kind{artifact.KindPolicy, artifact.KindRegistryEntry, artifact.KindDeclaration, artifact.KindEvidence}

// Options configures a Client. Zero values are documented per field.
type Options struct {
	// Conn is the control plane connection; required by Run.
	Conn grpc.ClientConnInterface
	// Root is the pinned root public key. Required.
	Root crypto.PublicKey
	// Node identifies the agent: its id and scoping labels, keyed as in
	// package nodelabel. Required.
	Node *mcpreadyv1.Node
	// LKGPath is where the last known good configuration is kept; "" keeps none.
	LKGPath string
	// HighWaterPath is where the high-water marks of signed versions are
	// kept; "" means LKGPath + ".versions" (none when LKGPath is "" too).
	HighWaterPath string
	// Kinds to subscribe besides TrustPolicy; nil means DefaultKinds.
	Kinds []artifact.Kind
	// Mode selects incremental (default) or state-of-the-world.
	Mode Mode
	// Logger; nil discards.
	Logger *slog.Logger
	// Now; nil means time.Now.
	Now func() time.Time
	// Until fires once Now's clock reaches t (Run's expiry timer,
	// expiry.go); nil means a timer for t minus Now(). Taking the instant
	// rather than a duration keeps reading the clock and arming the timer
	// one step, so a clock that moves between the two cannot make it late.
	Until func(t time.Time) <-chan time.Time
	// MinBackoff and MaxBackoff bound reconnect delays; zero means 200ms and 30s.
	MinBackoff, MaxBackoff time.Duration
	// MaxParked bounds, per kind, the resources kept because they do not
	// verify yet (until a TrustPolicy arrives that verifies them); zero
	// means DefaultMaxParked. Beyond it they are dropped.
	MaxParked int
	// Registerer receives mcpready_agent_discovery_nacks_total; nil
	// records nothing.
	Registerer prometheus.Registerer
}

// DefaultMaxParked is Options.MaxParked's zero value.
const DefaultMaxParked = 1024

// Client holds the current verified snapshot. It is safe for concurrent use.
type Client struct {
	opts      Options
	node      nodelabel.Values // this agent's scoping values
	cur       atomic.Pointer[Snapshot]
	connected atomic.Bool

	mu      sync.Mutex // serialises state changes and LKG writes
	changed chan struct{}
	parked  map[artifact.Kind]map[string]*mcpreadyv1.Resource // received, not (yet) verifiable
	sotw    map[artifact.Kind]string                          // accepted version_info per type
	marks   marks                                             // highest signed version installed per artifact
	picked  map[string]trustPick                              // verified chain per offered TrustPolicy set (trustmemo.go)
	loading bool                                              // Load is installing the LKG file: do not rewrite it
	nacks   *prometheus.CounterVec                            // NACKs by type and reason
}

// New returns a client holding an empty snapshot. Call Load to start from the
// last known good configuration, then Run.
func New(opts Options) (*Client, error) {
	if opts.Root == nil {
		return nil, errors.New("sync: root public key is required")
	}
	if opts.Node == nil || opts.Node.GetId() == "" {
		return nil, errors.New("sync: node id is required")
	}
	if opts.Kinds == nil {
		opts.Kinds = DefaultKinds
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Until == nil {
		now := opts.Now
		opts.Until = func(t time.Time) <-chan time.Time { return time.After(t.Sub(now())) }
	}
	if opts.MinBackoff <= 0 {
		opts.MinBackoff = 200 * time.Millisecond
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = 30 * time.Second
	}
	if opts.MaxParked <= 0 {
		opts.MaxParked = DefaultMaxParked
	}
	nacks, err := newNacks(opts.Registerer)
	if err != nil {
		return nil, fmt.Errorf("sync: metrics: %w", err)
	}
	c := &Client{opts: opts, node: nodelabel.ValuesOf(opts.Node.GetLabels()), changed: make(chan struct{}), parked: map[artifact.Kind]map[string]*mcpreadyv1.Resource{},
		sotw: map[artifact.Kind]string{}, marks: marks{}, picked: map[string]trustPick{}, nacks: nacks}
	c.cur.Store(&Snapshot{resources: map[artifact.Kind]map[string]*Resource{}})
	return c, nil
}

// Snapshot returns the current verified snapshot (never nil).
func (c *Client) Snapshot() *Snapshot { return c.cur.Load() }

// Changed returns a channel closed when the snapshot after the current one is
// installed. Read Snapshot after receiving from it.
func (c *Client) Changed() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.changed
}

// Connected reports whether a Discovery stream is currently established.
func (c *Client) Connected() bool { return c.connected.Load() }

func (c *Client) kinds() []artifact.Kind {
	return append([]artifact.Kind{artifact.KindTrustPolicy}, c.opts.Kinds...)
}

// install raises the high-water marks to res (and marks deleted the held
// resources a signed tombstone removed), then publishes it as the new
// snapshot; nothing is published when the marks cannot be persisted.
// c.mu must be held.
func (c *Client) install(trust *sign.Trust, res map[artifact.Kind]map[string]*Resource, deleted ...*Resource) error {
	if err := c.raiseMarks(res, deleted); err != nil {
		c.opts.Logger.Error("sync: not installing", "err", err)
		return err
	}
	old := c.cur.Load()
	next := &Snapshot{Generation: old.Generation + 1, Trust: trust, resources: res}
	next.withhold(c.opts.Now(), c.marks)
	c.cur.Store(next)
	for _, w := range next.newWarnings(old) {
		c.opts.Logger.Warn("sync: artifact sets fields that are not enforced", "kind", w.Kind, "name", w.Name, "version", w.Version, "fields", w.Fields)
	}
	for k, m := range next.withheld {
		for n, why := range m {
			if old.Withheld(k, n) == "" {
				c.opts.Logger.Error("sync: not using an expired resource until a newer signed version arrives", "kind", k, "name", n, "reason", why)
			}
		}
	}
	close(c.changed)
	c.changed = make(chan struct{})
	if c.loading {
		return nil
	}
	if err := c.saveLKG(); err != nil {
		c.opts.Logger.Error("sync: writing last known good configuration", "err", err)
	}
	return nil
}

// verify checks one bundle of kind k named name under trust.
func verify(trust *sign.Trust, k artifact.Kind, r *mcpreadyv1.Resource, now time.Time) (*Resource, error) {
	if trust == nil {
		return nil, fmt.Errorf("%w: %s %q", ErrNoTrust, k, r.GetName())
	}
	v, err := trust.Verify(r.GetBundle(), now)
	if err != nil {
		return nil, fmt.Errorf("%w: %s %q: %w", ErrRejected, k, r.GetName(), err)
	}
	if v.Object.Kind != k || v.Object.Metadata.Name != r.GetName() {
		return nil, fmt.Errorf("%w: %s %q: bundle holds %s %q", ErrRejected, k, r.GetName(), v.Object.Kind, v.Object.Metadata.Name)
	}
	return newResource(r.GetName(), k, r.GetVersion(), r.GetBundle(), v), nil
}

// pickTrust applies the trust chain rule (sign/chain.go) to the offered
// TrustPolicies: the highest signed version that verifies against the
// root, which must succeed the held one (the highest TrustPolicy mark,
// whatever its name). Store revisions and names play no part. c.mu must
// be held.
func (c *Client) pickTrust(rs map[string]*mcpreadyv1.Resource) (*sign.Trust, *Resource, error) {
	byDigest := make(map[string]*mcpreadyv1.Resource, len(rs))
	for _, r := range rs {
		byDigest[artifact.Digest(r.GetBundle())] = r
	}
	key := trustKey(rs)
	p, ok := c.picked[key]
	if !ok {
		bundles := make([][]byte, 0, len(rs))
		for _, r := range rs {
			bundles = append(bundles, r.GetBundle())
		}
		t, ref, err := sign.PickTrust(bundles, c.opts.Root, c.opts.Now())
		if err != nil {
			return nil, nil, fmt.Errorf("%w: TrustPolicy %q: %w", ErrRejected, ref.Name, err)
		}
		if len(c.picked) >= maxTrustMemo {
			clear(c.picked)
		}
		p = trustPick{trust: t, ref: ref}
		c.picked[key] = p
	}
	t, ref := p.trust, p.ref
	best := byDigest[ref.Digest]
	if best.GetName() != ref.Name {
		return nil, nil, fmt.Errorf("%w: TrustPolicy %q: bundle holds %q", ErrRejected, best.GetName(), ref.Name)
	}
	head, ok := c.marks.head(artifact.KindTrustPolicy)
	if err := sign.CheckSuccessor(head, ok, t, false); err != nil {
		return nil, nil, fmt.Errorf("%w: %w", ErrRejected, err)
	}
	return t, newResource(best.GetName(), artifact.KindTrustPolicy, best.GetVersion(), best.GetBundle(), t.Policy()), nil
}

// Apply applies one response for kind k: upserts and removals (incremental),
// or the whole set when full is true. Nothing is applied unless every
// offered resource verifies and is newer than its high-water mark; the
// returned error is the NACK reason. An expired resource, or one whose
// signed version is not a version (e.g. stored before versions were
// checked), is the exception: it is left out (a held version of it is
// kept, except in a full set, where only a Policy or a Declaration is kept
// unless a signed tombstone removes it) and named in the returned error while the
// others apply, since the control plane keeps such artifacts and a whole
// set must not be refused for one that aged out. So is one whose signed
// node-label scope does not include this agent (ErrOutOfScope), except
// that when this agent holds a version of it, the held one is removed
// without an error: the newer signed version moves it out of scope (how
// the control plane tells an agent, on either variant, that what it holds
// is no longer for it; the agent never falls back to another resource).
//
// A removal of a Policy or a Declaration (in removed, or a held one a
// full set omits or offers only expired) is honoured only with one of
// tombstones naming its exact version and digest (artifact.CheckTombstone);
// otherwise it is kept and the error wraps ErrUnsignedRemoval or
// artifact.ErrTombstone. A TrustPolicy is
// never removed: only a newer one in the chain replaces it.
func (c *Client) Apply(k artifact.Kind, upserts []*mcpreadyv1.Resource, removed []string, full bool, tombstones ...*mcpreadyv1.Resource) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	snap := c.cur.Load()
	now := c.opts.Now()
	res := snap.clone()
	if k == artifact.KindTrustPolicy {
		offered := map[string]*mcpreadyv1.Resource{}
		if !full {
			for n, r := range res[k] {
				offered[n] = &mcpreadyv1.Resource{Name: n, TypeUrl: k.TypeURL(), Version: r.Version, Bundle: r.Bundle}
			}
			for _, n := range removed {
				delete(offered, n)
			}
		}
		for _, r := range upserts {
			offered[r.GetName()] = r
		}
		trust, tr, err := c.pickTrust(offered)
		if err != nil {
			return err
		}
		if err := c.fresh(tr, now); err != nil {
			return err
		}
		res[k] = map[string]*Resource{tr.Name: tr}
		c.reverify(trust, res, now)
		return c.install(trust, res)
	}
	verified := make([]*Resource, 0, len(upserts))
	var firstErr, leftOut error
	var outOfScope []string
	for _, r := range upserts {
		v, err := verify(snap.Trust, k, r, now)
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			c.park(k, r)
			continue
		}
		if err := c.fresh(v, now); err != nil {
			if errors.Is(err, artifact.ErrExpired) || errors.Is(err, artifact.ErrBadVersion) {
				leftOut = errors.Join(leftOut, err) // the rest still applies
			} else if firstErr == nil {
				firstErr = err
			}
			continue
		}
		if err := c.inScope(v); err != nil {
			// Left out. A held version goes, as this newer signed one
			// moves the artifact out of this agent's scope: a signed
			// change, not a refusal. One this agent does not hold is
			// mis-scoped: named in the error.
			outOfScope = append(outOfScope, v.Name)
			if res[k][v.Name] == nil {
				leftOut = errors.Join(leftOut, err)
			} else {
				c.opts.Logger.Info("sync: dropping a resource whose newer signed version is scoped away from this agent", "kind", k, "name", v.Name, "version", v.Version)
			}
			continue
		}
		verified = append(verified, v)
	}
	if firstErr != nil {
		return firstErr
	}
	if res[k] == nil {
		res[k] = map[string]*Resource{}
	}
	if full {
		delete(c.parked, k)
		offered := make(map[string]bool, len(upserts))
		for _, r := range upserts {
			offered[r.GetName()] = true
		}
		replaced := make(map[string]bool, len(verified)+len(outOfScope))
		for _, v := range verified {
			replaced[v.Name] = true
		}
		for _, n := range outOfScope {
			replaced[n] = true
		}
		for n := range res[k] {
			if !offered[n] || (!replaced[n] && tombstoned[k]) {
				removed = append(removed, n) // a Policy or Declaration left out (expired) is a removal too
			} else {
				delete(res[k], n) // offered: replaced below, or left out (expired)
			}
		}
	}
	var refused error
	var deleted []*Resource // removed with a signed tombstone: never again at that version
	for _, n := range removed {
		delete(c.parked[k], n)
		if h := res[k][n]; h != nil {
			err := checkRemoval(snap.Trust, h, tombstones, now)
			if err != nil && tombstoned[k] {
				refused = errors.Join(refused, err)
				continue
			}
			if err == nil {
				deleted = append(deleted, h)
			}
		}
		delete(res[k], n)
	}
	for _, n := range outOfScope {
		delete(res[k], n)
		delete(c.parked[k], n)
	}
	for _, v := range verified {
		res[k][v.Name] = v
		delete(c.parked[k], v.Name)
	}
	if err := c.install(snap.Trust, res, deleted...); err != nil {
		return err
	}
	return errors.Join(refused, leftOut)
}

// park keeps r, which does not verify yet, for reverify; at most
// Options.MaxParked per kind. c.mu must be held.
func (c *Client) park(k artifact.Kind, r *mcpreadyv1.Resource) {
	if c.parked[k] == nil {
		c.parked[k] = map[string]*mcpreadyv1.Resource{}
	}
	if _, ok := c.parked[k][r.GetName()]; !ok && len(c.parked[k]) >= c.opts.MaxParked {
		c.opts.Logger.Warn("sync: not keeping an unverifiable resource: the limit is reached", "kind", k, "name", r.GetName(), "limit", c.opts.MaxParked)
		return
	}
	c.parked[k][r.GetName()] = r
}

// inScope refuses a resource whose signed node-label scope
// (metadata.labels, nodelabel.ScopeOf) does not include this agent.
func (c *Client) inScope(r *Resource) error {
	s := nodelabel.ScopeOf(r.Verified.Object.Metadata.Labels)
	if s.Includes(&c.node) {
		return nil
	}
	return fmt.Errorf("%w: %s %q is scoped to %v, not to this agent (%v)", ErrOutOfScope, r.Kind, r.Name, r.Verified.Object.Metadata.Labels, c.opts.Node.GetLabels())
}

// tombstoned lists the kinds an agent removes only on a signed tombstone
// naming the exact version it holds (a TrustPolicy is never removed): a
// Policy, whose removal would leave calls to fall back, and a Declaration,
// whose removal would leave its server's registry entries unconstrained.
var tombstoned = map[artifact.Kind]bool{artifact.KindPolicy: true, artifact.KindDeclaration: true}

// checkRemoval checks that one of tombstones is a tombstone, verified
// under trust and unexpired, naming held's exact version and digest.
func checkRemoval(trust *sign.Trust, held *Resource, tombstones []*mcpreadyv1.Resource, now time.Time) error {
	var last error = fmt.Errorf("%w: %s %q: the removal carries no signed tombstone; kept", ErrUnsignedRemoval, held.Kind, held.Name)
	for _, t := range tombstones {
		if t.GetName() != held.Name {
			continue
		}
		v, err := trust.Verify(t.GetBundle(), now)
		if err != nil {
			last = fmt.Errorf("%w: tombstone for %s %q: %w", ErrRejected, held.Kind, held.Name, err)
			continue
		}
		ts, ok := v.Object.Spec.(*mcpreadyv1.Tombstone)
		if !ok {
			last = fmt.Errorf("%w: tombstone for %s %q holds a %s", ErrRejected, held.Kind, held.Name, v.Object.Kind)
			continue
		}
		if err := artifact.CheckExpiry(v.Object, now); err != nil {
			last = fmt.Errorf("%w: %w", ErrRejected, err)
			continue
		}
		if err := artifact.CheckTombstone(ts, held.Kind, held.Name, held.Verified.Object.Version(), artifact.Digest(held.Bundle)); err != nil {
			last = fmt.Errorf("%w: %w; kept", ErrRejected, err)
			continue
		}
		return nil
	}
	return last
}

// reverify re-checks every held and parked resource under a new trust:
// resources that no longer verify are dropped; parked ones that now verify
// are accepted. c.mu must be held.
func (c *Client) reverify(trust *sign.Trust, res map[artifact.Kind]map[string]*Resource, now time.Time) {
	for k, m := range res {
		if k == artifact.KindTrustPolicy {
			continue
		}
		for n, r := range m {
			if _, err := verify(trust, k, &mcpreadyv1.Resource{Name: n, Version: r.Version, Bundle: r.Bundle}, now); err != nil {
				c.opts.Logger.Warn("sync: dropping resource that no longer verifies", "kind", k, "name", n, "err", err)
				delete(m, n)
			}
		}
	}
	for k, m := range c.parked {
		for n, r := range m {
			v, err := verify(trust, k, r, now)
			if err != nil {
				continue
			}
			if err := errors.Join(c.fresh(v, now), c.inScope(v)); err != nil {
				c.opts.Logger.Warn("sync: dropping parked resource", "kind", k, "name", n, "err", err)
				delete(m, n)
				continue
			}
			if res[k] == nil {
				res[k] = map[string]*Resource{}
			}
			res[k][n] = v
			delete(m, n)
		}
	}
}

// Run keeps a Discovery stream open until ctx ends, reconnecting with
// jittered exponential backoff. It returns ctx's error.
func (c *Client) Run(ctx context.Context) error {
	if c.opts.Conn == nil {
		return errors.New("sync: no control plane connection")
	}
	watching := make(chan struct{})
	go func() { c.watchExpiry(ctx.Done()); close(watching) }()
	defer func() { <-watching }() // Run returns only when ctx ends, and so does the watch
	backoff := c.opts.MinBackoff
	for {
		received, err := c.runStream(ctx)
		c.connected.Store(false)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if received {
			backoff = c.opts.MinBackoff
		}
		d := backoff/2 + rand.N(backoff/2+1)
		c.opts.Logger.Warn("sync: discovery stream ended; reconnecting", "err", err, "in", d)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(d):
		}
		backoff = min(backoff*2, c.opts.MaxBackoff)
	}
}

func nack(err error) *mcpreadyv1.ErrorDetail {
	code := codes.InvalidArgument
	if errors.Is(err, artifact.ErrRollback) || errors.Is(err, artifact.ErrExpired) {
		code = codes.FailedPrecondition // the message names the reason
	}
	return &mcpreadyv1.ErrorDetail{Code: int32(code), Message: err.Error()}
}

func (c *Client) runStream(ctx context.Context) (received bool, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	dc := mcpreadyv1.NewDiscoveryServiceClient(c.opts.Conn)
	if c.opts.Mode == ModeStateOfTheWorld {
		return c.runSotW(ctx, dc)
	}
	stream, err := dc.DeltaResources(ctx)
	if err != nil {
		return false, err
	}
	snap := c.Snapshot()
	for _, k := range c.kinds() {
		req := &mcpreadyv1.DeltaResourcesRequest{Node: c.opts.Node, TypeUrl: k.TypeURL(), InitialResourceVersions: snap.Versions(k)}
		if err := stream.Send(req); err != nil {
			return false, err
		}
	}
	for {
		resp, err := stream.Recv()
		if err != nil {
			return received, err
		}
		received = true
		c.connected.Store(true)
		ack := &mcpreadyv1.DeltaResourcesRequest{TypeUrl: resp.GetTypeUrl(), ResponseNonce: resp.GetNonce()}
		if _, err := c.applyResponse(resp.GetTypeUrl(), resp.GetResources(), resp.GetRemovedResources(), resp.GetTombstones(), false); err != nil {
			ack.ErrorDetail = nack(err)
		}
		if err := stream.Send(ack); err != nil {
			return received, err
		}
	}
}

// applyResponse verifies and applies one pushed response of either
// variant; a non-nil error is the reason to NACK it.
func (c *Client) applyResponse(typeURL string, res []*mcpreadyv1.Resource, removed []string, tombstones []*mcpreadyv1.Resource, sotw bool) (artifact.Kind, error) {
	k, err := artifact.KindFromTypeURL(typeURL)
	label := "unknown" // what a control plane names: known types only
	if err == nil {
		label = typeURL
		err = c.Apply(k, res, removed, sotw, tombstones...)
	}
	if err != nil {
		reason := nackReason(err)
		c.nacks.WithLabelValues(label, reason).Inc()
		c.opts.Logger.Warn("sync: NACK", "type", typeURL, "reason", reason, "err", err)
	}
	return k, err
}

func (c *Client) runSotW(ctx context.Context, dc mcpreadyv1.DiscoveryServiceClient) (bool, error) {
	stream, err := dc.StreamResources(ctx)
	if err != nil {
		return false, err
	}
	c.mu.Lock()
	versions := make(map[artifact.Kind]string, len(c.sotw))
	for k, v := range c.sotw {
		versions[k] = v
	}
	c.mu.Unlock()
	for _, k := range c.kinds() {
		// held_resource_versions: so that what moved out of this agent's
		// scope while it was away is sent, and dropped
		if err := stream.Send(&mcpreadyv1.StreamResourcesRequest{Node: c.opts.Node, TypeUrl: k.TypeURL(), VersionInfo: versions[k], HeldResourceVersions: c.Snapshot().Versions(k)}); err != nil {
			return false, err
		}
	}
	received := false
	for {
		resp, err := stream.Recv()
		if err != nil {
			return received, err
		}
		received = true
		c.connected.Store(true)
		ack := &mcpreadyv1.StreamResourcesRequest{TypeUrl: resp.GetTypeUrl(), ResponseNonce: resp.GetNonce()}
		k, kerr := c.applyResponse(resp.GetTypeUrl(), resp.GetResources(), nil, resp.GetTombstones(), true)
		c.mu.Lock()
		if kerr != nil {
			ack.ErrorDetail = nack(kerr)
			ack.VersionInfo = c.sotw[k]
		} else {
			c.sotw[k] = resp.GetVersionInfo()
			ack.VersionInfo = resp.GetVersionInfo()
		}
		c.mu.Unlock()
		if err := stream.Send(ack); err != nil {
			return received, err
		}
	}
}
