package front

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpready/mcpready/agent/access"
	"github.com/mcpready/mcpready/agent/pipeline"
	"github.com/mcpready/mcpready/agent/upstream"
	"github.com/mcpready/mcpready/agent/validate"
)

// session is the state of one stateful front session: its dedicated
// upstream session (transparent view) and the front requests in flight, to
// which upstream notifications and server-to-client requests are routed.
type session struct {
	v   *view
	srv *mcp.Server

	mu     sync.Mutex
	ss     *mcp.ServerSession
	ups    map[upstream.Target]*upstream.Session // dedicated sessions, one per endpoint of the view's server
	slots  map[upstream.Target]func()            // releases each dedicated session's cap slot
	opener pipeline.Caller                       // who opened the session: its cap slots, and whose client its upstream asks
	slot   *sessionSlot                          // its front session cap slot, nil for none
	// last is when a request presenting the session last arrived (unix
	// nanoseconds); busy counts its requests in progress (an open GET
	// stream included). An idle session is the one a principal at its
	// session cap gives up first (evictIdle).
	last     atomic.Int64
	busy     atomic.Int32
	access   access.Principal // whose upstream tokens its dedicated sessions present
	inflight []*inflight
	fast     fastState
}

type inflight struct {
	ctx   context.Context
	token any // progress token, nil if none
}

// newServer builds the go-sdk server of one front session (s != nil) or of
// the stateless handler (s == nil).
func (v *view) newServer(s *session) *mcp.Server {
	opts := &mcp.ServerOptions{Logger: v.f.opts.Logger}
	if v.server != "" {
		opts.SubscribeHandler = func(ctx context.Context, req *mcp.SubscribeRequest) error {
			return v.relayErr(ctx, s, func(ctx context.Context, cs *mcp.ClientSession) error {
				return cs.Subscribe(ctx, forUpstream(req.Params))
			})
		}
		opts.UnsubscribeHandler = func(ctx context.Context, req *mcp.UnsubscribeRequest) error {
			return v.relayErr(ctx, s, func(ctx context.Context, cs *mcp.ClientSession) error {
				return cs.Unsubscribe(ctx, forUpstream(req.Params))
			})
		}
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "mcpready-agent", Version: v.f.opts.Builder.EmitterVersion}, opts)
	if s != nil {
		s.srv = srv
	}
	srv.AddReceivingMiddleware(v.middleware(s))
	return srv
}

// errUpstreamUnavailable is returned (as a JSON-RPC error) for relayed
// methods when the upstream cannot be reached.
var errUpstreamUnavailable = errors.New("upstream unavailable")

// unavailable is err from reaching an upstream session, as answered: a
// refusal at a session cap as it is (refused by the agent, nothing sent),
// anything else as errUpstreamUnavailable.
func unavailable(err error) error {
	if errors.Is(err, errTooManySessions) {
		return err
	}
	return fmt.Errorf("%w: %w", errUpstreamUnavailable, err)
}

func (v *view) middleware(s *session) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if s != nil {
				s.mu.Lock()
				if ss, ok := req.GetSession().(*mcp.ServerSession); ok {
					s.ss = ss
				}
				s.noteSDK(method, time.Now())
				s.mu.Unlock()
				if method == "notifications/cancelled" {
					s.cancelFast(req.GetParams())
				}
			}
			switch method {
			case "initialize", "server/discover":
				if v.server == "" {
					return v.serve(ctx, s, method, req, func(ctx context.Context) (mcp.Result, error) { return v.initialize(ctx, s, method, req, next) })
				}
				return v.initialize(ctx, s, method, req, next) // decided and traced by the pipeline
			case "tools/list":
				return v.serve(ctx, s, method, req, func(ctx context.Context) (mcp.Result, error) { return v.listTools(ctx, s, req.(*mcp.ListToolsRequest)) })
			case "tools/call":
				r := req.(*mcp.CallToolRequest)
				ctx, done := s.track(ctx, r.Params.GetProgressToken())
				defer done()
				ctx, err := v.beginRound(ctx, s, r)
				if err != nil {
					return nil, err
				}
				defer endRound(ctx)
				return v.callTool(ctx, s, r, nil)
			}
			sdk := func(ctx context.Context) (mcp.Result, error) { return next(ctx, method, req) }
			if v.server == "" {
				return v.serve(ctx, s, method, req, sdk)
			}
			switch method {
			case "logging/setLevel":
				return v.method(ctx, s, method, req, func(ctx context.Context) (mcp.Result, error) {
					res, err := next(ctx, method, req)
					if err == nil {
						p := req.GetParams().(*mcp.SetLoggingLevelParams)
						err = v.relayErr(ctx, s, func(ctx context.Context, cs *mcp.ClientSession) error { return cs.SetLoggingLevel(ctx, forUpstream(p)) })
					}
					return res, err
				})
			case "resources/list", "resources/templates/list", "resources/read", "prompts/list", "prompts/get", "completion/complete":
				ctx, done := s.track(ctx, progressToken(req.GetParams()))
				defer done()
				return v.method(ctx, s, method, req, func(ctx context.Context) (mcp.Result, error) {
					return v.relay(ctx, s, method, req.GetParams())
				})
			case "resources/subscribe", "resources/unsubscribe":
				return v.method(ctx, s, method, req, sdk)
			}
			return v.serve(ctx, s, method, req, sdk)
		}
	}
}

func progressToken(p mcp.Params) any {
	return metaOf(p)["progressToken"]
}

// forUpstream drops the per-request protocol metadata of the AI agent's
// era (SEP-2575 "io.modelcontextprotocol/..." keys) from p's _meta: the
// upstream session speaks its own negotiated version. p's original map is
// left untouched.
func forUpstream[P mcp.Params](p P) P {
	m := metaOf(p)
	if len(m) == 0 {
		return p
	}
	clean := make(map[string]any, len(m))
	for k, v := range m {
		if !strings.HasPrefix(k, "io.modelcontextprotocol/") {
			clean[k] = v
		}
	}
	p.SetMeta(clean)
	return p
}

// metaOf returns p's _meta; nil for absent (or typed-nil) params.
func metaOf(p mcp.Params) map[string]any {
	if p == nil {
		return nil
	}
	if v := reflect.ValueOf(p); v.Kind() == reflect.Pointer && v.IsNil() {
		return nil
	}
	return p.GetMeta()
}

// track registers a front request as in flight (nil-safe on s).
func (s *session) track(ctx context.Context, token any) (context.Context, func()) {
	if s == nil {
		return ctx, func() {}
	}
	in := &inflight{ctx: ctx, token: token}
	s.mu.Lock()
	s.inflight = append(s.inflight, in)
	s.mu.Unlock()
	return ctx, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.untrack(in)
	}
}

// untrack removes in from the requests in flight (under s.mu).
func (s *session) untrack(in *inflight) {
	for i, x := range s.inflight {
		if x == in {
			s.inflight = append(s.inflight[:i], s.inflight[i+1:]...)
			return
		}
	}
}

// frontCtx picks the front request a relayed message belongs to: the one
// with the same progress token, else the latest in flight, else none.
func (s *session) frontCtx(token any) context.Context {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := len(s.inflight) - 1; i >= 0; i-- {
		if token != nil && fmt.Sprint(s.inflight[i].token) == fmt.Sprint(token) {
			return s.inflight[i].ctx
		}
	}
	if n := len(s.inflight); n > 0 {
		return s.inflight[n-1].ctx
	}
	return context.Background()
}

// upstream returns the upstream session a front session uses for target
// t: its dedicated session for t (reopened if it broke) on the view of t's
// server, else the shared session of t.
func (v *view) upstream(ctx context.Context, s *session, t upstream.Target) (*upstream.Session, error) {
	if s == nil || v.server == "" || t.Server != v.server {
		up, err := v.f.pool.Shared(ctx, t)
		if errors.Is(err, upstream.ErrOwnerSessions) {
			v.f.metrics.sessionsRefused.WithLabelValues("owners").Inc()
			return nil, refusal(fmt.Errorf("%w: %w", errTooManySessions, err))
		}
		return up, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.ups[t]
	if old != nil && !old.Broken() {
		return old, nil
	}
	if old != nil {
		_ = old.Close()
		s.slots[t]()
	}
	release, err := v.f.caps.acquire(s.opener.Name)
	if err != nil {
		return nil, refusal(err)
	}
	var caps *mcp.ClientCapabilities
	if s.ss != nil && s.ss.InitializeParams() != nil {
		caps = s.ss.InitializeParams().Capabilities
	}
	up, err := v.f.pool.Open(s.accessContext(ctx), t, s.relay(caps, t.Server))
	if err != nil {
		release()
		return nil, err
	}
	if s.ups == nil {
		s.ups, s.slots = map[upstream.Target]*upstream.Session{}, map[upstream.Target]func(){}
	}
	s.ups[t], s.slots[t] = up, release
	if s.ss != nil {
		go func(ss *mcp.ServerSession, up *upstream.Session) { _ = ss.Wait(); _ = up.Close(); release() }(s.ss, up)
	}
	return up, nil
}

// relay is what the dedicated upstream session of server sends towards
// the client.
func (s *session) relay(caps *mcp.ClientCapabilities, server string) *upstream.Relay {
	if caps == nil {
		caps = &mcp.ClientCapabilities{}
	}
	return &upstream.Relay{
		Capabilities: caps,
		Request: func(_ context.Context, method string, params mcp.Params) (mcp.Result, error) {
			s.mu.Lock()
			ss, opener := s.ss, s.opener
			s.mu.Unlock()
			ctx := s.frontCtx(nil)
			if ss == nil {
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "client session gone"}
			}
			if clientMethod(params) == "" {
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: method + " not relayed"}
			}
			return s.v.askClient(ctx, ss, server, opener, params)
		},
		Notify: func(_ context.Context, method string, params mcp.Params) {
			s.mu.Lock()
			ss, srv := s.ss, s.srv
			s.mu.Unlock()
			if ss == nil {
				return
			}
			switch method {
			case "notifications/progress":
				p := params.(*mcp.ProgressNotificationParams)
				_ = ss.NotifyProgress(s.frontCtx(p.ProgressToken), p)
			case "notifications/message":
				_ = ss.Log(s.frontCtx(nil), params.(*mcp.LoggingMessageParams))
			case "notifications/resources/updated":
				_ = srv.ResourceUpdated(context.Background(), params.(*mcp.ResourceUpdatedNotificationParams))
			case "notifications/resources/list_changed":
				srv.AddResource(&mcp.Resource{URI: sentinelURI, Name: "x"}, nil)
				srv.RemoveResources(sentinelURI)
			case "notifications/prompts/list_changed":
				srv.AddPrompt(&mcp.Prompt{Name: sentinelName}, nil)
				srv.RemovePrompts(sentinelName)
			}
		},
	}
}

// Sentinels registered and removed at once to make the go-sdk server emit a
// list_changed notification to its (single) session; never listed, because
// lists are answered by the middleware.
const (
	sentinelName = "mcpready.sentinel"
	sentinelURI  = "mcpready-sentinel:///x"
)

// notifyToolsChanged makes every live front session of the view re-list tools.
func (s *session) notifyToolsChanged() {
	s.mu.Lock()
	srv := s.srv
	s.mu.Unlock()
	if srv == nil {
		return
	}
	srv.AddTool(&mcp.Tool{Name: sentinelName, InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return nil, errors.New("unreachable")
		})
	srv.RemoveTools(sentinelName)
}

// relayErr runs fn on the view's upstream session.
func (v *view) relayErr(ctx context.Context, s *session, fn func(context.Context, *mcp.ClientSession) error) error {
	up, err := v.upstream(ctx, s, upstream.Target{Server: v.server})
	if err != nil {
		return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("%v: %v", errUpstreamUnavailable, err)}
	}
	if err := up.Do(ctx, fn); err != nil {
		var f *validate.Outcome
		if errors.As(err, &f) && f.JSONRPCError {
			return &jsonrpc.Error{Code: int64(f.JSONRPCCode), Message: f.Detail}
		}
		return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()}
	}
	return nil
}

// relay forwards one non-tool method to the upstream unchanged; its error
// is the upstream's own, for the pipeline to classify.
func (v *view) relay(ctx context.Context, s *session, method string, params mcp.Params) (mcp.Result, error) {
	var res mcp.Result
	up, err := v.upstream(ctx, s, upstream.Target{Server: v.server})
	if err != nil {
		return nil, unavailable(err)
	}
	t := v.f.opts.Telemetry
	err = up.Do(ctx, func(ctx context.Context, cs *mcp.ClientSession) error {
		var err error
		switch method {
		case "resources/list":
			res, err = cs.ListResources(ctx, traceMeta(ctx, t, forUpstream(params.(*mcp.ListResourcesParams))))
		case "resources/templates/list":
			res, err = cs.ListResourceTemplates(ctx, traceMeta(ctx, t, forUpstream(params.(*mcp.ListResourceTemplatesParams))))
		case "resources/read":
			res, err = cs.ReadResource(ctx, traceMeta(ctx, t, forUpstream(params.(*mcp.ReadResourceParams))))
		case "prompts/list":
			res, err = cs.ListPrompts(ctx, traceMeta(ctx, t, forUpstream(params.(*mcp.ListPromptsParams))))
		case "prompts/get":
			res, err = cs.GetPrompt(ctx, traceMeta(ctx, t, forUpstream(params.(*mcp.GetPromptParams))))
		case "completion/complete":
			res, err = cs.Complete(ctx, traceMeta(ctx, t, forUpstream(params.(*mcp.CompleteParams))))
		}
		return err
	})
	return res, err
}

// initialize lets the go-sdk negotiate the front session, then presents the
// upstream's capabilities (transparent view) or the aggregate's (tools only).
// On a transparent view it is decided and receipted like the view's other
// non-tool methods (pipeline.Method): when it is refused (a principal
// admitted to no tool of the server: method_not_permitted; or no usable
// configuration on the host: no_policy, configuration_stale, ...) the
// refusal is receipted, no upstream session is opened for it, and the
// session is served by the agent alone (tools only), so that each of its
// calls is refused with its own reason.
func (v *view) initialize(ctx context.Context, s *session, method string, req mcp.Request, next mcp.MethodHandler) (mcp.Result, error) {
	if v.server == "" {
		return v.present(ctx, s, method, req, next, false)
	}
	var capped error // a session cap refusal: answered as such, not as an upstream failure
	res, err := v.decideMethod(ctx, s, method, req, func(ctx context.Context) (mcp.Result, error) {
		res, err := v.present(ctx, s, method, req, next, true)
		if errors.Is(err, errTooManySessions) {
			capped = err
		}
		return res, err
	})
	var me *pipeline.MethodError
	switch {
	case capped != nil:
		return nil, &jsonrpc.Error{Code: codeRefused, Message: capped.Error()}
	case errors.As(err, &me) && me.Code != "":
		return v.present(ctx, s, method, req, next, false)
	}
	return rpcError(res, err)
}

// checkedInstructions is the upstream's instructions for the client, or
// none when they trip the injection tripwire: they reach the client's
// model like a tool's description, and a tool whose description trips it
// is withheld too (pins.observe). Logged by rule and counted, never quoted.
func (v *view) checkedInstructions(ins string) string {
	hit, poisoned := validate.Scan(ins)
	if !poisoned {
		return ins
	}
	v.f.metrics.instructionsWithheld.WithLabelValues(v.server).Inc()
	v.f.opts.Logger.Warn("upstream instructions withheld: injection tripwire", "server", v.server, "rule", hit.Rule)
	return ""
}

// present is initialize after the decision: with the upstream's
// capabilities when withUpstream, else tools only.
func (v *view) present(ctx context.Context, s *session, method string, req mcp.Request, next mcp.MethodHandler, withUpstream bool) (mcp.Result, error) {
	res, err := next(ctx, method, req)
	if err != nil {
		return nil, err
	}
	if s != nil {
		if id, err := v.f.authenticate(headerOf(req)); err == nil {
			s.mu.Lock()
			s.opener = pipeline.Caller{Name: id.Name, Principal: id.PrincipalClass, Tenant: id.TenantClass}
			s.access = access.Principal{Name: id.Name, SubjectToken: v.f.subjectToken(headerOf(req), id)}
			s.mu.Unlock()
		}
		if ss, ok := req.GetSession().(*mcp.ServerSession); ok {
			if ir, ok := res.(*mcp.InitializeResult); ok {
				s.mu.Lock()
				s.fast.id, s.fast.protocol = ss.ID(), ir.ProtocolVersion
				s.mu.Unlock()
			}
			v.mu.Lock()
			v.sessions[s] = struct{}{}
			if id := ss.ID(); id != "" {
				v.bySID[id] = s
			}
			v.mu.Unlock()
			claimed := s.slot.claim()
			s.last.Store(v.f.opts.Now().UnixNano())
			go func() {
				_ = ss.Wait()
				if claimed {
					s.slot.release()
				}
				v.mu.Lock()
				delete(v.sessions, s)
				if v.bySID[ss.ID()] == s {
					delete(v.bySID, ss.ID())
				}
				v.mu.Unlock()
			}()
		}
	}
	caps := &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true}}
	var info *mcp.Implementation
	var instructions string
	if withUpstream {
		up, err := v.upstream(ctx, s, upstream.Target{Server: v.server})
		if err != nil {
			return nil, unavailable(err) // a refusal at a cap is receipted as such
		}
		if ir := up.Initialize(); ir != nil {
			if ir.Capabilities != nil {
				c := *ir.Capabilities
				caps = &c
			}
			info, instructions = ir.ServerInfo, v.checkedInstructions(ir.Instructions)
		}
	}
	switch r := res.(type) {
	case *mcp.InitializeResult:
		r.Capabilities = caps
		if info != nil {
			r.ServerInfo = info
		}
		r.Instructions = instructions
	case *mcp.DiscoverResult:
		r.Capabilities = caps
		r.Instructions = instructions
	}
	return res, nil
}
