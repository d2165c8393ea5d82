package front

// The tools/call fast path on the front: a POST carrying one tools/call on
// an established stateful (2025-era) session is answered here, through the
// very same callTool pipeline (decide → approval → invoke → validate → one
// receipt), without the go-sdk server's per-message decoding and dispatch.
// Its answer is the one JSON-RPC response the go-sdk handler would send,
// framed as that handler frames it in its JSON-response mode: an
// application/json body rather than an event stream. A call answered with
// one message needs no stream, and the transport requires every client to
// accept both; a client reads one body instead of running an event-stream
// parser (BenchmarkProxyOverhead measured the difference). Anything the go-sdk
// session would have to take part in is left to it: another method, a
// batch, a progress token, protocol metadata in _meta, a client that can be
// asked to elicit or sample, a session with a log level set, or a session
// whose go-sdk idle timer has not been refreshed lately. (A roots/list an
// upstream sends during a fast call reaches the client on its standalone
// stream rather than on the call's stream.)

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpready/mcpready/agent/config"
	"github.com/mcpready/mcpready/agent/pipeline"
	"github.com/mcpready/mcpready/internal/jsonwire"
)

// sdkRefresh is how long after the go-sdk last saw a request of a session
// the fast path may still answer for it: well inside the handler's
// SessionTimeout (a sixth of it, at most 5 minutes), so that a session used
// only for tool calls never idles out.
func (f *Front) sdkRefresh() time.Duration {
	return min(5*time.Minute, f.opts.SessionIdleTimeout/6)
}

// fastState is what a session records for the fast path.
type fastState struct {
	id          string    // the go-sdk session id
	protocol    string    // negotiated protocol version
	initialized bool      // notifications/initialized seen
	logging     bool      // logging/setLevel seen: logs may travel on call streams
	lastSDK     time.Time // last request the go-sdk handled
	calls       map[string]context.CancelFunc
}

// noteSDK records a message the go-sdk session handled (under s.mu).
func (s *session) noteSDK(method string, now time.Time) {
	s.fast.lastSDK = now
	switch method {
	case "notifications/initialized":
		s.fast.initialized = true
	case "logging/setLevel":
		s.fast.logging = true
	}
}

// startFast registers a fast call of request id on s, in one step: for
// notifications/cancelled (cancel) and as in flight (relayed messages of
// its upstream reach its ctx); false when a call of that id is in flight.
func (s *session) startFast(ctx context.Context, id string, cancel context.CancelFunc) (*inflight, bool) {
	in := &inflight{ctx: ctx}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, dup := s.fast.calls[id]; dup {
		return nil, false
	}
	if s.fast.calls == nil {
		s.fast.calls = map[string]context.CancelFunc{}
	}
	s.fast.calls[id] = cancel
	s.inflight = append(s.inflight, in)
	return in, true
}

// endFast undoes startFast once the call has its answer.
func (s *session) endFast(id string, in *inflight) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.fast.calls, id)
	s.untrack(in)
}

// cancelFast cancels a fast-path call named by notifications/cancelled.
func (s *session) cancelFast(p mcp.Params) {
	cp, ok := p.(*mcp.CancelledParams)
	if !ok || cp == nil {
		return
	}
	s.mu.Lock()
	cancel := s.fast.calls[fmt.Sprint(cp.RequestID)]
	s.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// fastCall is one parsed fast-path request.
type fastCall struct {
	id     json.RawMessage
	params mcp.CallToolParamsRaw
}

// parseFastCall returns the call in env, or false when the go-sdk must handle it.
func parseFastCall(env *envelope) (fastCall, bool) {
	if env.JSONRPC != "2.0" || env.Method == nil || *env.Method != "tools/call" || len(env.ID) == 0 || !(env.ID[0] == '"' || env.ID[0] == '-' || env.ID[0] >= '0' && env.ID[0] <= '9') {
		return fastCall{}, false
	}
	var c fastCall
	c.id = env.ID
	// The arguments share the request body's bytes, as env does: the body
	// is never changed, and is kept while the call runs.
	if jsonwire.UnmarshalShared(env.Params, &c.params) != nil || c.params.Name == "" || c.params.InputResponses != nil || c.params.RequestState != "" {
		return fastCall{}, false
	}
	if a := bytes.TrimSpace(c.params.Arguments); len(a) > 0 && a[0] != '{' {
		return fastCall{}, false
	}
	for k := range c.params.Meta {
		if k == "progressToken" || strings.HasPrefix(k, "io.modelcontextprotocol/") {
			return fastCall{}, false
		}
	}
	return c, true
}

// accepts reports whether an Accept header list names both JSON and SSE
// (media types compared case-insensitively, parameters ignored), without
// allocating.
func accepts(values []string) bool {
	var js, sse bool
	for _, v := range values {
		for v != "" {
			var part string
			part, v, _ = strings.Cut(v, ",")
			mt, _, _ := strings.Cut(part, ";")
			mt = strings.TrimSpace(mt)
			js = js || strings.EqualFold(mt, "application/json")
			sse = sse || strings.EqualFold(mt, "text/event-stream")
		}
	}
	return js && sse
}

// isJSON reports whether a Content-Type is application/json (any parameters).
func isJSON(contentType string) bool {
	mt, _, _ := strings.Cut(contentType, ";")
	return strings.EqualFold(strings.TrimSpace(mt), "application/json")
}

// fastSession returns the session r may be answered for by the fast path.
func (v *view) fastSession(r *http.Request, now time.Time) (*session, *mcp.ServerSession) {
	sid := r.Header.Get("Mcp-Session-Id")
	if r.Method != http.MethodPost || sid == "" {
		return nil, nil
	}
	if !isJSON(r.Header.Get("Content-Type")) || !accepts(r.Header.Values("Accept")) {
		return nil, nil
	}
	v.mu.Lock()
	s := v.bySID[sid]
	v.mu.Unlock()
	if s == nil {
		return nil, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := s.ss
	if ss == nil || !s.fast.initialized || s.fast.logging || s.fast.protocol == "" ||
		r.Header.Get(protocolHeader) != s.fast.protocol || now.Sub(s.fast.lastSDK) > v.f.sdkRefresh() {
		return nil, nil
	}
	if ip := ss.InitializeParams(); ip == nil || ip.Capabilities != nil &&
		(ip.Capabilities.Elicitation != nil || ip.Capabilities.Sampling != nil) {
		return nil, nil
	}
	return s, ss
}

// serveFastCall answers r, whose message precheck decoded as env and
// whose principal ServeHTTP authenticated as id, when it is a fast-path
// tools/call and reports whether it did; otherwise r (and its body) is
// left for the go-sdk.
func (v *view) serveFastCall(w http.ResponseWriter, r *http.Request, env *envelope, id config.Identity) bool {
	s, ss := v.fastSession(r, time.Now())
	if s == nil {
		return false
	}
	c, ok := parseFastCall(env)
	if !ok {
		return false
	}
	key := string(c.id)
	if c.id[0] == '"' {
		var str string
		if json.Unmarshal(c.id, &str) != nil {
			return false
		}
		key = str
	}
	ff := &fastFlight{call: c}
	later := &ff.later // receipt work for after the answer (AnswerBeforeReceipt)
	defer later.Run()  // also when the answer could not be sent
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	if v.f.opts.AnswerBeforeReceipt {
		ctx = pipeline.WithLater(ctx, later)
	}
	in, ok := s.startFast(ctx, key, cancel)
	if !ok {
		writeRPCError(w, http.StatusBadRequest, c.id, int(jsonrpc.CodeInvalidRequest), fmt.Sprintf("duplicate in-flight request ID %s", c.id))
		return true
	}
	ff.extra.Header = r.Header
	req := &ff.req
	req.Session, req.Params, req.Extra = ss, &ff.call.params, &ff.extra
	res, err := v.callTool(ctx, s, req, &id) // authenticated once per request
	s.endFast(key, in)
	// The response message, encoded in place.
	out := answerBuffers.Get().(*bytes.Buffer)
	defer putAnswerBuffer(out)
	out.Reset()
	if err := encodeResponse(out, c.id, res, err); err != nil {
		out.Reset()
		_ = encodeResponse(out, c.id, nil, fmt.Errorf("encoding result: %w", err))
	}
	if r.Context().Err() != nil {
		return true // the client is gone, as with the go-sdk
	}
	h := w.Header()
	h["Cache-Control"], h["Content-Type"] = noCache, jsonContentType
	if later.Pending() { // flushed below, before the handler returns: framed by this length still
		h["Content-Length"] = []string{strconv.Itoa(out.Len())}
	}
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(out.Bytes()) // one write: net/http frames it with a Content-Length
	if later.Pending() {
		_ = http.NewResponseController(w).Flush() // the answer goes now; the receipt work after it
	}
	return true
}

// fastFlight is what a fast call keeps while it runs, allocated together
// instead of one by one: its parsed call, the request callTool takes (which
// points into it) and the receipt work left for after the answer.
type fastFlight struct {
	call  fastCall
	req   mcp.CallToolRequest
	extra mcp.RequestExtra
	later pipeline.Later
}

// answerBuffers hold fast answers while they are encoded and written (the
// response writer copies them): reused, as an answer's bytes are done
// with once written.
var answerBuffers = sync.Pool{New: func() any { return bytes.NewBuffer(make([]byte, 0, 512)) }}

// maxPooledAnswer is the largest buffer kept for reuse: one that grew for
// a large answer is left to the collector rather than held.
const maxPooledAnswer = 64 << 10

func putAnswerBuffer(b *bytes.Buffer) {
	if b.Cap() <= maxPooledAnswer {
		answerBuffers.Put(b)
	}
}

// encodeResponse writes the JSON-RPC response to id (the message alone, as
// the go-sdk writes it, with no newline after it): res, or callErr as an
// internal error. A result is written as its own
// MarshalJSON gives it (encoding/json would only check and compact those
// bytes once more); id is the request's, as decoded from it.
func encodeResponse(out *bytes.Buffer, id json.RawMessage, res *mcp.CallToolResult, callErr error) error {
	if callErr == nil && res != nil {
		out.WriteString(`{"jsonrpc":"2.0","id":`)
		out.Write(id)
		out.WriteString(`,"result":`)
		if ok, err := appendResult(out, res); err != nil {
			return err
		} else if !ok {
			b, err := res.MarshalJSON()
			if err != nil {
				return err
			}
			out.Write(b)
		}
		out.WriteByte('}')
		return nil
	}
	msg := struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Result  any             `json:"result,omitempty"`
		Error   *jsonrpc.Error  `json:"error,omitempty"`
	}{JSONRPC: "2.0", ID: id, Result: res}
	if callErr != nil {
		msg.Result, msg.Error = nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: callErr.Error()}
	}
	b, err := json.Marshal(msg)
	out.Write(b)
	return err
}

// The fast path's response headers, as the go-sdk handler writes them in
// its JSON-response mode (the value slices are shared, never modified).
var (
	noCache         = []string{"no-cache, no-transform"}
	jsonContentType = []string{"application/json"}
)
