package front

import (
	"context"
	"errors"
	"net/http"
	"reflect"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpready/mcpready/agent/telemetry"
)

// headerRequestID carries the JSON-RPC id of a request from ServeHTTP to
// the go-sdk handlers, for its trace: a stateful session's handlers run
// under the session's context (its initialize request's), not their own
// HTTP request's, but the go-sdk hands them their request's headers. A
// client's own value is always dropped.
const headerRequestID = "Mcpready-Trace-Jsonrpc-Id"

// withRequestID returns r carrying the JSON-RPC id of env (nil: none) in
// its context (telemetry.WithRequestID) and in headerRequestID.
func withRequestID(t *telemetry.Telemetry, r *http.Request, env *envelope) *http.Request {
	if env == nil && r.Header.Get(headerRequestID) == "" {
		return r
	}
	ctx := r.Context()
	if env != nil {
		ctx = t.WithRequestID(ctx, env.ID)
	}
	out := r.WithContext(ctx)
	out.Header = r.Header.Clone()
	out.Header.Del(headerRequestID)
	if env != nil && len(env.ID) > 0 {
		out.Header.Set(headerRequestID, string(env.ID))
	}
	return out
}

// incoming is what the front knows of req for its trace: the HTTP
// headers (trace context), the session, the JSON-RPC id and, for
// initialize, the protocol version it asks for. The id is the one of
// req's own HTTP request (headerRequestID) before the context's: the
// go-sdk runs a stateful session's handlers under the context of the
// session's initialize request, whose id that context holds.
func incoming(ctx context.Context, req mcp.Request) telemetry.Incoming {
	var in telemetry.Incoming
	if ex := req.GetExtra(); ex != nil {
		in.Header = ex.Header
		in.RequestID = ex.Header.Get(headerRequestID)
	}
	if in.RequestID == "" {
		in.RequestID = telemetry.RequestID(ctx)
	}
	if ss := req.GetSession(); ss != nil {
		in.Session = ss.ID()
	}
	if ip, ok := req.GetParams().(*mcp.InitializeParams); ok && ip != nil {
		in.Requested = ip.ProtocolVersion
	}
	return in
}

// serve runs fn, a request the pipeline does not see (tools/list, the
// aggregate view's initialize, ping, ...), in a SERVER span when
// telemetry is on. Notifications get none.
func (v *view) serve(ctx context.Context, s *session, method string, req mcp.Request, fn func(context.Context) (mcp.Result, error)) (mcp.Result, error) {
	t := v.f.opts.Telemetry
	if t == nil || strings.HasPrefix(method, "notifications/") {
		return fn(ctx)
	}
	ctx, sp := t.Server(ctx, telemetry.Request{Method: method, Protocol: protocolOf(req, s), Meta: metaOf(req.GetParams()), Incoming: incoming(ctx, req)})
	res, err := fn(ctx)
	if ir, ok := res.(*mcp.InitializeResult); ok {
		sp = sp.Negotiated(ir.ProtocolVersion)
	}
	code := 0
	var je *jsonrpc.Error
	switch {
	case errors.As(err, &je):
		code = int(je.Code)
	case err != nil:
		code = int(jsonrpc.CodeInternalError)
	}
	sp.End(nil, false, code)
	return res, err
}

// traceMeta returns p with the trace context of the CLIENT span in ctx in
// its _meta (telemetry.Inject), for a request relayed upstream; p as it
// is when telemetry is off or p is absent.
func traceMeta[P mcp.Params](ctx context.Context, t *telemetry.Telemetry, p P) P {
	if t == nil {
		return p
	}
	if rv := reflect.ValueOf(p); !rv.IsValid() || rv.Kind() == reflect.Pointer && rv.IsNil() {
		return p
	}
	p.SetMeta(t.Inject(ctx, p.GetMeta()))
	return p
}
