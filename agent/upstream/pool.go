// Package upstream holds the host agent's connections to upstream MCP
// servers (Streamable HTTP and stdio), each with its own credentials, and
// classifies every failure precisely (access not ready, billing, rate
// limited with Retry-After, server error, reset, hang/ambiguous, JSON-RPC
// error inside HTTP 200, malformed answer).
//
// An upstream is a Target: a server and the endpoint a verified entry pins
// for it, so a call is sent to the admitted route's endpoint and nowhere
// else: redirects are never followed, and one to another origin fails as a
// network-identity failure (validate.ErrNetworkIdentity, caused by a
// RedirectError naming the target) before the request, its body or its
// credentials are sent again; a TLS certificate must verify for the pinned
// endpoint's host. A stdio server gets only the environment its
// configuration names (config.Upstream.ChildEnv), runs as the configured
// user and in the configured directory, and its stderr is logged line by
// line, bounded, with the values of that environment redacted (stderr.go).
// It keeps one warm shared session per target for calls that need no
// session state, and opens dedicated sessions that relay server-to-client
// requests and notifications for front sessions that need them. It makes no
// policy decisions and never logs credentials, arguments or the upstream's
// error text (a JSON-RPC error is classified by its code; its message is
// kept only in Outcome.UpstreamMessage, for the client that asked); a stdio
// child's stderr is the child's own text, logged with its configured
// values redacted.
//
// It never fulfils a multi round-trip input request (SEP-2322) itself: a
// tools/call result that needs input (CallToolResult.NeedsInput) is returned
// to the caller as is, because only the front knows which client must answer
// it; the caller repeats the call with InputResponses and RequestState.
package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpready/mcpready/agent/access"
	"github.com/mcpready/mcpready/agent/config"
	"github.com/mcpready/mcpready/agent/pin"
	"github.com/mcpready/mcpready/agent/telemetry"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/readiness"
)

// ErrUnknownUpstream is returned for a target with no known endpoint.
var ErrUnknownUpstream = errors.New("unknown upstream")

// Target is one upstream the pool connects to: a server, and the endpoint
// a verified registry entry pins for it. An empty Endpoint means the
// server's own endpoint as the agent configuration (or Options.Resolve)
// names it; a call admitted for a route always names the route's endpoint,
// so it is never sent to another endpoint of the same server.
type Target struct {
	Server, Endpoint string
}

// Options configures a Pool. Zero values are documented per field.
type Options struct {
	// Resolve returns how to reach a target. Required.
	Resolve func(t Target) (config.Upstream, bool)
	// Logger; nil discards.
	Logger *slog.Logger
	// Transport is the base HTTP transport; nil uses a pooled keep-alive transport.
	Transport http.RoundTripper
	// ConnectTimeout bounds connecting and initializing a session; zero means 10s.
	ConnectTimeout time.Duration
	// OnToolsChanged is called (asynchronously) when an upstream announces
	// that its tool list changed. May be nil.
	OnToolsChanged func(t Target)
	// ClientInfo names the agent to upstreams; nil uses "mcpready-agent".
	ClientInfo *mcp.Implementation
	// Telemetry propagates trace context in HTTP headers; nil is off.
	Telemetry *telemetry.Telemetry
	// Access presents OAuth tokens to upstreams configured with oauth; nil
	// refuses to connect to them.
	Access *access.Client
	// MaxOwnerSessions bounds the shared sessions opened with a principal's
	// own token (token exchange, authorization code: one per principal and
	// target), over all principals. Beyond it a new principal's session is
	// refused with ErrOwnerSessions once the sessions unused for
	// OwnerSessionIdle are closed. Zero means 1024.
	MaxOwnerSessions int
	// OwnerSessionIdle is how long a principal's shared session may go
	// unused before it is closed to make room for another; zero means 5m.
	OwnerSessionIdle time.Duration
	// now is the clock of the idle check; nil is time.Now (tests set it).
	now func() time.Time
}

// Pool owns upstream sessions. It is safe for concurrent use.
type Pool struct {
	opts   Options
	mu     sync.Mutex
	shared map[sharedKey]*sharedSlot
	owners int // entries of shared with an owner
	closed bool
	leases leaseIdle
}

// sharedKey names a shared session: its target and whose token it
// presents (access.Owner: "" for the agent's own or none).
type sharedKey struct {
	Target
	owner string
}

type sharedSlot struct {
	mu   sync.Mutex
	sess *Session
	// used is when a principal's slot was last handed out (UnixNano);
	// evicted is set, under mu, once it left the pool's map.
	used    atomic.Int64
	evicted bool
}

// ErrOwnerSessions refuses a principal's own shared session when
// Options.MaxOwnerSessions of them are open and none has been idle for
// Options.OwnerSessionIdle.
var ErrOwnerSessions = errors.New("too many upstream sessions opened with principals' own tokens")

// NewPool returns an empty pool; sessions connect lazily.
func NewPool(opts Options) *Pool {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Transport == nil {
		opts.Transport = newDirectTransport()
	}
	opts.Transport = opts.Telemetry.HTTPTransport(opts.Transport)
	if opts.ConnectTimeout == 0 {
		opts.ConnectTimeout = 10 * time.Second
	}
	if opts.ClientInfo == nil {
		opts.ClientInfo = &mcp.Implementation{Name: "mcpready-agent", Version: "1"}
	}
	if opts.MaxOwnerSessions == 0 {
		opts.MaxOwnerSessions = 1024
	}
	if opts.OwnerSessionIdle == 0 {
		opts.OwnerSessionIdle = 5 * time.Minute
	}
	if opts.now == nil {
		opts.now = time.Now
	}
	return &Pool{opts: opts, shared: map[sharedKey]*sharedSlot{}}
}

// Relay receives what a dedicated upstream session sends towards its client.
type Relay struct {
	// Capabilities advertised to the upstream (normally the front client's).
	// Nil advertises none.
	Capabilities *mcp.ClientCapabilities
	// Request answers server-to-client requests: "sampling/createMessage",
	// "elicitation/create" and "roots/list". Nil refuses them.
	Request func(ctx context.Context, method string, params mcp.Params) (mcp.Result, error)
	// Notify receives every notification from the upstream. May be nil.
	Notify func(ctx context.Context, method string, params mcp.Params)
}

// Session is one initialized upstream session.
type Session struct {
	// Server is the upstream's configured name.
	Server string
	// Target is what the session was connected for.
	Target Target
	// endpoint is the URL or "stdio:<program>" the session reached.
	endpoint string
	cs       *mcp.ClientSession
	http     *httpSession // nil unless Streamable HTTP: enables the tools/call fast path
	broken   atomic.Bool
	pool     *Pool
}

// Shared returns the warm shared session of t, connecting (again) when
// there is none or the previous one broke. Where t's upstream presents the
// token of the access principal of ctx (token exchange, authorization
// code), the session is that principal's own, shared among its requests
// only: the upstream binds a session to the user whose token opened it.
// A principal's sessions are bounded (Options.MaxOwnerSessions): room
// is made by closing those unused for Options.OwnerSessionIdle.
func (p *Pool) Shared(ctx context.Context, t Target) (*Session, error) {
	k := sharedKey{Target: t, owner: p.owner(ctx, t)}
	for {
		slot, err := p.slot(k)
		if err != nil {
			return nil, err
		}
		slot.mu.Lock()
		if slot.evicted { // closed for room after it was looked up
			slot.mu.Unlock()
			continue
		}
		s, err := p.sharedIn(ctx, t, slot)
		slot.mu.Unlock()
		return s, err
	}
}

// slot returns k's slot, making one (and room for it, for an owner's).
func (p *Pool) slot(k sharedKey) (*sharedSlot, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, ErrClosed
	}
	slot := p.shared[k]
	var idle []*sharedSlot
	if slot == nil {
		if k.owner != "" && p.owners >= p.opts.MaxOwnerSessions {
			idle = p.evictIdle()
		}
		if k.owner != "" && p.owners >= p.opts.MaxOwnerSessions {
			p.mu.Unlock()
			closeSlots(idle)
			return nil, fmt.Errorf("%w (%d open)", ErrOwnerSessions, p.opts.MaxOwnerSessions)
		}
		slot = &sharedSlot{}
		p.shared[k] = slot
		if k.owner != "" {
			p.owners++
		}
	}
	if k.owner != "" {
		slot.used.Store(p.opts.now().UnixNano())
	}
	p.mu.Unlock()
	closeSlots(idle)
	return slot, nil
}

// evictIdle takes the principals' slots unused for OwnerSessionIdle out
// of the map and returns them to be closed. p.mu must be held.
func (p *Pool) evictIdle() []*sharedSlot {
	before := p.opts.now().Add(-p.opts.OwnerSessionIdle).UnixNano()
	var out []*sharedSlot
	for k, slot := range p.shared {
		if k.owner != "" && slot.used.Load() < before {
			delete(p.shared, k)
			p.owners--
			out = append(out, slot)
		}
	}
	return out
}

// closeSlots closes the sessions of slots taken out of the pool's map.
func closeSlots(slots []*sharedSlot) {
	for _, slot := range slots {
		slot.mu.Lock()
		slot.evicted = true
		if slot.sess != nil {
			_ = slot.sess.cs.Close()
			slot.sess = nil
		}
		slot.mu.Unlock()
	}
}

// sharedIn returns slot's warm session, connecting (again) when there is
// none or it broke. slot.mu must be held.
func (p *Pool) sharedIn(ctx context.Context, t Target, slot *sharedSlot) (*Session, error) {
	if s := slot.sess; s != nil && !s.broken.Load() {
		return s, nil
	}
	if slot.sess != nil {
		_ = slot.sess.cs.Close()
	}
	s, err := p.connect(ctx, t, nil)
	if err != nil {
		return nil, err
	}
	slot.sess = s
	return s, nil
}

// ErrClosed refuses a session of a closed pool.
var ErrClosed = errors.New("upstream pool closed")

// Open connects a dedicated session for one front session. The caller
// closes it. After Close it is refused (ErrClosed), and a session that
// connected while Close ran is closed at once: no stdio child or upstream
// session outlives the pool's shutdown.
func (p *Pool) Open(ctx context.Context, t Target, relay *Relay) (*Session, error) {
	if relay == nil {
		relay = &Relay{}
	}
	if p.isClosed() {
		return nil, ErrClosed
	}
	s, err := p.connect(ctx, t, relay)
	if err == nil && p.isClosed() {
		_ = s.Close()
		return nil, ErrClosed
	}
	return s, err
}

func (p *Pool) isClosed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}

// Known reports whether t has an endpoint.
func (p *Pool) Known(t Target) bool {
	_, ok := p.opts.Resolve(t)
	return ok
}

// Close closes every shared session and every idle leased one.
func (p *Pool) Close() {
	p.mu.Lock()
	p.closed = true
	slots := p.shared
	p.shared = map[sharedKey]*sharedSlot{}
	p.owners = 0
	p.mu.Unlock()
	p.closeLeases()
	targets := make([]sharedKey, 0, len(slots))
	for k := range slots {
		targets = append(targets, k)
	}
	sort.Slice(targets, func(i, j int) bool {
		a, b := targets[i], targets[j]
		if a.Server != b.Server {
			return a.Server < b.Server
		}
		if a.Endpoint != b.Endpoint {
			return a.Endpoint < b.Endpoint
		}
		return a.owner < b.owner
	})
	for _, t := range targets {
		slot := slots[t]
		slot.mu.Lock()
		if slot.sess != nil {
			_ = slot.sess.cs.Close()
		}
		slot.mu.Unlock()
	}
}

func (p *Pool) connect(ctx context.Context, t Target, relay *Relay) (*Session, error) {
	server := t.Server
	up, ok := p.opts.Resolve(t)
	if !ok {
		return nil, fmt.Errorf("%w %q", ErrUnknownUpstream, server)
	}
	s := &Session{Server: server, Target: t, endpoint: endpointOf(up), pool: p}
	var transport mcp.Transport
	switch {
	case up.URL != "":
		base, err := p.credentialed(server, up)
		if err != nil {
			return nil, err
		}
		rt := &roundTripper{base: base, token: up.Token, headers: up.Headers}
		hc := &http.Client{Transport: rt, CheckRedirect: refuseRedirect}
		transport = &mcp.StreamableClientTransport{
			Endpoint:   up.URL,
			HTTPClient: hc,
			MaxRetries: 2,
		}
		u, err := url.Parse(up.URL)
		if err != nil {
			return nil, fmt.Errorf("%w %q: %w", ErrUnknownUpstream, server, err)
		}
		s.http = &httpSession{url: u, client: hc, rt: rt, relay: relay, onTools: func() {
			if p.opts.OnToolsChanged != nil {
				go p.opts.OnToolsChanged(t)
			}
		}}
	case len(up.Command) > 0:
		env, err := up.ChildEnv()
		if err != nil {
			return nil, fmt.Errorf("%w %q: %w", ErrUnknownUpstream, server, err)
		}
		cmd := exec.Command(up.Command[0], up.Command[1:]...)
		cmd.Env = env // only what the configuration names: never the agent's whole environment
		cmd.Dir = up.Dir
		if err := runAs(cmd, up.RunAs); err != nil {
			return nil, fmt.Errorf("%w %q: %w", ErrUnknownUpstream, server, err)
		}
		cmd.Stderr = newStderrLog(p.opts.Logger, up, env)
		cmd.WaitDelay = 2 * time.Second // a grandchild holding stderr open does not hold up Close
		transport = &mcp.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second}
	default:
		return nil, fmt.Errorf("%w %q: no url or command", ErrUnknownUpstream, server)
	}
	copts := &mcp.ClientOptions{
		Logger:       p.opts.Logger,
		Capabilities: &mcp.ClientCapabilities{},
		// Input-required results go back to the front (see the package doc):
		// the go-sdk client would otherwise answer them with this client's
		// own (absent) handlers and repeat the call itself.
		MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true},
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			if p.opts.OnToolsChanged != nil {
				go p.opts.OnToolsChanged(t)
			}
		},
	}
	if relay != nil {
		if relay.Capabilities != nil {
			copts.Capabilities = relay.Capabilities
		}
		if relay.Notify != nil {
			copts.ResourceUpdatedHandler = func(context.Context, *mcp.ResourceUpdatedNotificationRequest) {}
			copts.PromptListChangedHandler = func(context.Context, *mcp.PromptListChangedRequest) {}
			copts.ResourceListChangedHandler = func(context.Context, *mcp.ResourceListChangedRequest) {}
		}
	}
	client := mcp.NewClient(p.opts.ClientInfo, copts)
	if relay != nil {
		client.AddReceivingMiddleware(relayMiddleware(relay))
	}
	ictx := isolate(ctx)
	cctx, cancel := context.WithTimeout(ictx, p.opts.ConnectTimeout)
	defer cancel()
	cctx, x := withExchange(cctx)
	cs, err := client.Connect(cctx, transport, nil)
	if err != nil {
		f := classify(err, x, cctx.Err())
		f.Detail = "connecting: " + f.Detail
		if f.Layer == mcpreadyv1.ReadinessLayer_READINESS_LAYER_INVOCATION {
			f.Layer = mcpreadyv1.ReadinessLayer_READINESS_LAYER_REACHABILITY
		}
		return nil, f
	}
	s.cs = cs
	if s.http != nil {
		s.http.sessionID, s.http.version = []string{cs.ID()}, []string{s.ProtocolVersion()}
	}
	go func() {
		_ = cs.Wait()
		s.broken.Store(true)
	}()
	p.opts.Logger.Debug("upstream session connected", "server", server, "protocol", cs.InitializeResult().ProtocolVersion)
	return s, nil
}

func relayMiddleware(r *Relay) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			switch method {
			case readiness.ClientSampling, readiness.ClientElicitation, readiness.ClientRoots:
				if r.Request == nil {
					return next(ctx, method, req)
				}
				return r.Request(ctx, method, req.GetParams())
			}
			if strings.HasPrefix(method, "notifications/") && r.Notify != nil {
				r.Notify(ctx, method, req.GetParams())
			}
			return next(ctx, method, req)
		}
	}
}

// Client is the underlying go-sdk session, for relaying methods other than tools/call.
func (s *Session) Client() *mcp.ClientSession { return s.cs }

// Initialize is what the upstream answered to initialize (or server/discover).
func (s *Session) Initialize() *mcp.InitializeResult { return s.cs.InitializeResult() }

// ProtocolVersion is the protocol version actually negotiated.
func (s *Session) ProtocolVersion() string {
	if r := s.cs.InitializeResult(); r != nil {
		return r.ProtocolVersion
	}
	return ""
}

// ServerVersion is the upstream's self-reported version ("" if unknown).
func (s *Session) ServerVersion() string {
	if r := s.cs.InitializeResult(); r != nil && r.ServerInfo != nil {
		return r.ServerInfo.Version
	}
	return ""
}

// Broken reports that the session failed and must not be reused.
func (s *Session) Broken() bool { return s.broken.Load() }

// Close closes the session.
func (s *Session) Close() error {
	s.broken.Store(true)
	return s.cs.Close()
}

// Do runs fn against the upstream session and classifies its error as a
// *validate.Outcome. A transport-level failure marks the session broken.
func (s *Session) Do(ctx context.Context, fn func(ctx context.Context, cs *mcp.ClientSession) error) error {
	telemetry.Upstream(ctx, s.endpoint, s.cs.ID(), s.ProtocolVersion()) // on the attempt's CLIENT span, if any
	cctx := &callContext{isolated: isolate(ctx), header: headersOf(ctx), observe: observerOf(ctx)}
	x := &cctx.x
	err := fn(cctx, s.cs)
	if err == nil {
		return nil
	}
	ctxErr := cctx.Err()
	if ctxErr != nil && ctx.Err() != nil {
		ctxErr = ctx.Err() // deadline vs cancellation as the caller saw it
	}
	f := classify(err, x, ctxErr)
	if !f.JSONRPCError || f.JSONRPCCode == jsonrpc.CodeParseError {
		s.broken.Store(true)
	}
	return f
}

// CallTool calls one tool. The error, if any, is a *validate.Outcome; a result with
// isError is returned as a result, not an error.
func (s *Session) CallTool(ctx context.Context, params *mcp.CallToolParams) (*mcp.CallToolResult, error) {
	res, err := s.Call(ctx, params)
	return res.CallToolResult, err
}

// Result is a tools/call result and the JSON the upstream sent for it, when
// the agent decoded it itself (nil when the go-sdk client did).
type Result struct {
	*mcp.CallToolResult
	JSON json.RawMessage
	// Structured is the JSON of the result's structuredContent as received
	// (part of JSON's bytes), when the agent decoded it itself (nil
	// otherwise, or when absent).
	Structured json.RawMessage
	// Value is Structured decoded with exact numbers (json.Number, or
	// float64 integers within ±2^53), for the output schema check; it may
	// share its maps with StructuredContent and must not be modified.
	Value any
}

// Call is CallTool that also returns the result's JSON as received, so that
// callers need not encode the result again to measure or digest it.
func (s *Session) Call(ctx context.Context, params *mcp.CallToolParams) (Result, error) {
	var res Result
	err := s.Do(ctx, func(ctx context.Context, cs *mcp.ClientSession) error {
		var err error
		if s.fastOK() {
			res, err = s.callFast(ctx, params)
		} else {
			res.CallToolResult, err = cs.CallTool(ctx, params)
		}
		return err
	})
	return res, err
}

// ListTools lists every tool of the upstream, following pagination.
func (s *Session) ListTools(ctx context.Context) ([]*mcp.Tool, error) {
	var tools []*mcp.Tool
	err := s.Do(ctx, func(ctx context.Context, cs *mcp.ClientSession) error {
		var cursor string
		for range 1000 {
			res, err := cs.ListTools(ctx, &mcp.ListToolsParams{Cursor: cursor})
			if err != nil {
				return err
			}
			tools = append(tools, res.Tools...)
			if res.NextCursor == "" {
				return nil
			}
			cursor = res.NextCursor
		}
		return errors.New("tools/list pagination did not end")
	})
	return tools, err
}

// PinTool converts a go-sdk tool definition to the pinned form of package pin.
func PinTool(t *mcp.Tool) (pin.Tool, error) {
	raw := func(v any) (json.RawMessage, error) {
		if v == nil {
			return nil, nil
		}
		return json.Marshal(v)
	}
	in, err := raw(t.InputSchema)
	if err != nil {
		return pin.Tool{}, err
	}
	var out, ann json.RawMessage
	if t.OutputSchema != nil {
		if out, err = raw(t.OutputSchema); err != nil {
			return pin.Tool{}, err
		}
	}
	if t.Annotations != nil {
		if ann, err = raw(t.Annotations); err != nil {
			return pin.Tool{}, err
		}
	}
	return pin.Tool{Name: t.Name, Description: t.Description, InputSchema: in, OutputSchema: out, Annotations: ann}, nil
}

// Endpoint is the endpoint the pool uses for t: its URL, or
// "stdio:<program>" for a command ("" when unknown).
func (p *Pool) Endpoint(t Target) string {
	up, ok := p.opts.Resolve(t)
	if !ok {
		return ""
	}
	return endpointOf(up)
}

// Endpoint is the endpoint the session reached (see Pool.Endpoint).
func (s *Session) Endpoint() string { return s.endpoint }

// endpointOf names how up is reached: its URL, or "stdio:<program>".
func endpointOf(up config.Upstream) string {
	switch {
	case up.URL != "":
		return up.URL
	case len(up.Command) > 0:
		return "stdio:" + up.Command[0]
	}
	return ""
}

// isolate returns a context with ctx's deadline and cancellation but none of
// its values: values of an incoming front request (such as the protocol
// version the AI agent speaks) must not leak into upstream requests. The
// exceptions are the trace context and the access principal
// (carryPrincipal). It is ctx's own cancellation, seen through a view with
// values of its own: no timer, goroutine or cancel function of its own
// (whatever it starts ends when ctx does, which for a call is when the
// call ends).
func isolate(ctx context.Context) isolated {
	values := telemetry.Carry(ctx, context.Background())              // the trace context continues upstream
	return isolated{parent: ctx, values: carryPrincipal(ctx, values)} // and the access principal
}

// isolated is its parent's deadline and cancellation with only the values
// of values. More values go into values, not on top of the isolated
// context: a value context over it would hide its AfterFunc, and every
// context derived from that (the transport's watch of each request) would
// wait on the parent with a goroutine of its own.
type isolated struct{ parent, values context.Context }

func (c isolated) Deadline() (time.Time, bool) { return c.parent.Deadline() }
func (c isolated) Done() <-chan struct{}       { return c.parent.Done() }
func (c isolated) Err() error                  { return c.parent.Err() }
func (c isolated) Value(key any) any           { return c.values.Value(key) }

// AfterFunc lets contexts derived from c wait on the parent's cancellation
// without a goroutine of their own (the context package looks for it).
func (c isolated) AfterFunc(f func()) func() bool { return context.AfterFunc(c.parent, f) }

// callContext is the context of one call (Session.Do): isolated, with the
// caller's headers (WithHeader) and response observer (WithResponseHeaders)
// kept and the call's exchange, all in one allocation rather than a value
// context each over the isolated values.
type callContext struct {
	isolated
	header  http.Header
	observe func(http.Header)
	x       exchange
}

func (c *callContext) Value(key any) any {
	switch key.(type) {
	case exchangeKey:
		return &c.x
	case headerKey:
		if c.header != nil {
			return c.header
		}
	case responseKey:
		if c.observe != nil {
			return c.observe
		}
	}
	return c.isolated.Value(key)
}
