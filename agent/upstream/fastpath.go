package upstream

// The tools/call fast path: on an established Streamable HTTP session, one
// call is one plain HTTP POST of the JSON-RPC request carrying the session
// id, and the answer (application/json or an SSE stream) is read with a
// small decoder instead of the go-sdk client's connection machinery, whose
// JSON decoder allocates a 32 KiB buffer per message. Everything the go-sdk
// client would do for the call still happens here: notifications on the
// response stream are relayed, server-to-client requests are answered (by
// the Relay, or refused), a cancelled call sends notifications/cancelled,
// and failures are classified exactly like the SDK path's (same exchange
// recording, same classify).

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpready/mcpready/internal/jsonwire"
	"github.com/mcpready/mcpready/internal/sse"
)

// maxEventSize bounds one SSE event or JSON body, as the go-sdk client does.
const maxEventSize = mcp.DefaultMaxEventSize

// fastCallIDs numbers fast-path requests. String ids never collide with the
// go-sdk client's integer ids on the same upstream session.
var fastCallIDs atomic.Uint64

// errMalformed is an upstream answer that is not a JSON-RPC response.
var errMalformed = errors.New("malformed response")

// errStreamLost is a response stream that broke before the response came.
var errStreamLost = errors.New("response stream lost")

// httpSession is what the fast path needs of a Streamable HTTP session.
type httpSession struct {
	url *url.URL // the endpoint, parsed once; copied per request (newRequest), never modified
	// sessionID and version are the session's id and protocol version as
	// header values, fixed once connected; requests share them (never
	// written to: Header.Set replaces them).
	sessionID, version []string
	client             *http.Client
	rt                 *roundTripper // client's transport (nil: send through client)
	relay              *Relay
	onTools            func()
}

// fastOK reports whether params can take the fast path on s: an HTTP
// session with a session id in the session era. Progress notifications on
// the response stream are relayed in order, before the result returns.
func (s *Session) fastOK() bool {
	if s.http == nil || s.http.sessionID[0] == "" {
		return false
	}
	pv := s.http.version[0]
	return pv != "" && pv < "2026-07-28"
}

type wireMessage struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *jsonrpc.Error  `json:"error"`
}

// callFast performs one tools/call over a plain POST.
func (s *Session) callFast(ctx context.Context, params *mcp.CallToolParams) (Result, error) {
	id := "mcpready-" + strconv.FormatUint(fastCallIDs.Add(1), 10)
	body, err := callRequest(id, params)
	if err != nil {
		return Result{}, fmt.Errorf("encoding tools/call: %w", err)
	}
	resp, err := s.post(ctx, body)
	if err != nil {
		if ctx.Err() != nil { // abandoned before the upstream's first byte: it may be running the call
			s.cancelUpstream(id)
		}
		return Result{}, err
	}
	defer finishLater(resp.Body)
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		return Result{}, fmt.Errorf("tools/call: HTTP %s", resp.Status)
	}
	msg, err := s.readResponse(ctx, resp, id)
	if err != nil {
		if ctx.Err() != nil {
			s.cancelUpstream(id)
			return Result{}, ctx.Err()
		}
		return Result{}, err
	}
	if msg.Error != nil {
		return Result{}, msg.Error
	}
	res, value, structured, err := decodeCallResult(msg.Result)
	if err != nil {
		return Result{}, err
	}
	return Result{CallToolResult: res, JSON: msg.Result, Structured: structured, Value: value}, nil
}

// callRequest encodes the tools/call request id (a plain ASCII string) for
// params. The common call (raw JSON arguments, a plain tool name, no _meta,
// no input responses) is written directly, its arguments copied as they
// are once checked to be JSON; any other goes through encoding/json.
func callRequest(id string, params *mcp.CallToolParams) ([]byte, error) {
	args, raw := params.Arguments.(json.RawMessage)
	if !raw || len(args) == 0 || len(params.Meta) > 0 || params.InputResponses != nil || params.RequestState != "" ||
		!plainString(params.Name) || !json.Valid(args) {
		return json.Marshal(struct {
			JSONRPC string              `json:"jsonrpc"`
			ID      string              `json:"id"`
			Method  string              `json:"method"`
			Params  *mcp.CallToolParams `json:"params"`
		}{"2.0", id, "tools/call", params})
	}
	b := make([]byte, 0, len(`{"jsonrpc":"2.0","id":"","method":"tools/call","params":{"name":"","arguments":}}`)+len(id)+len(params.Name)+len(args))
	b = append(b, `{"jsonrpc":"2.0","id":"`...)
	b = append(b, id...)
	b = append(b, `","method":"tools/call","params":{"name":"`...)
	b = append(b, params.Name...)
	b = append(b, `","arguments":`...)
	b = append(b, args...)
	return append(b, "}}"...), nil
}

// plainString reports whether s is printable ASCII that JSON quotes as it
// is (no quote, backslash, or character encoding/json would escape).
func plainString(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}

// post sends one JSON-RPC message on the session: straight through the
// session's roundTripper (credentials, headers, exchange, redirects
// refused), as its http.Client would send it, without the client's copy
// of the request. A URL with user info goes through the client, which
// turns it into basic authentication.
func (s *Session) post(ctx context.Context, body []byte) (*http.Response, error) {
	// The shared value slices are never written to: Set replaces them.
	req := s.http.newRequest(ctx, http.MethodPost, http.Header{"Content-Type": postContentType, "Accept": postAccept,
		"Mcp-Session-Id": s.http.sessionID, "Mcp-Protocol-Version": s.http.version}, body)
	if s.http.rt == nil || req.URL.User != nil {
		return s.http.client.Do(req)
	}
	resp, err := s.http.rt.send(req)
	if err != nil {
		return nil, &url.Error{Op: "Post", URL: s.http.url.Redacted(), Err: err}
	}
	return resp, nil
}

// newRequest is the request http.NewRequestWithContext makes to the
// session's endpoint with header and body (empty: none), built directly:
// the URL is parsed once per session, not per request, and its copy and
// the body's reader come in one allocation.
func (h *httpSession) newRequest(ctx context.Context, method string, header http.Header, body []byte) *http.Request {
	r := &requestParts{url: *h.url}
	req := &http.Request{Method: method, URL: &r.url, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Header: header, Host: r.url.Host}
	if len(body) > 0 {
		r.body.Reset(body)
		req.Body, req.ContentLength = &r.body, int64(len(body))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	}
	return req.WithContext(ctx)
}

// requestParts are what newRequest's request points to.
type requestParts struct {
	url  url.URL
	body requestBody
}

// requestBody is a request's body: its bytes, closed as io.NopCloser's
// (which would be an allocation of its own).
type requestBody struct{ bytes.Reader }

func (*requestBody) Close() error { return nil }

var (
	postContentType = []string{"application/json"}
	postAccept      = []string{"application/json, text/event-stream"}
)

// drainWait bounds how long finish waits for the end of a response stream.
const drainWait = 100 * time.Millisecond

// finish reads the rest of a response body (an SSE stream normally ends
// right after the response) so that its connection is reused, and closes it.
// A stream that stays open longer than drainWait is closed: over the
// agent's own transport by a read deadline on the connection (no timer of
// its own; release clears the deadline), else by a timer. A body already
// read to its end (a fast call's often is: the end of the stream came in
// the same read as the answer) costs nothing more.
func finish(body io.ReadCloser) {
	db, direct := body.(*directBody)
	if direct && db.ended() {
		return
	}
	if direct && db.bound(drainWait) {
		drain(body)
		return
	}
	t := time.AfterFunc(drainWait, func() { body.Close() })
	drain(body)
	t.Stop()
}

// finishLater is finish without waiting: the answer has been read, and the
// end of the stream (which the upstream writes once its handler returns)
// is awaited in the background, as the go-sdk's own client does, rather
// than on the call's path. The body is detached from the call's context
// first, so that the call ending does not close a connection that is about
// to be reused. A body that cannot be detached is finished at once.
func finishLater(body io.ReadCloser) {
	if db, ok := body.(*directBody); ok && db.detach(drainWait) {
		go drain(body)
		return
	}
	finish(body)
}

// drain reads body to its end (at most maxEventSize more) and closes it.
func drain(body io.ReadCloser) {
	_, _ = io.Copy(io.Discard, io.LimitReader(body, maxEventSize))
	body.Close()
}

// sseReaders are the buffered readers of response streams, reused.
var sseReaders = sync.Pool{New: func() any { return bufio.NewReader(nil) }}

// readResponse reads the answer to request id, relaying what comes before it.
func (s *Session) readResponse(ctx context.Context, resp *http.Response, id string) (*wireMessage, error) {
	ct := mediaType(resp.Header.Get("Content-Type"))
	switch ct {
	case "application/json":
		b, err := io.ReadAll(io.LimitReader(resp.Body, maxEventSize+1))
		if err != nil {
			return nil, err
		}
		if len(b) > maxEventSize {
			return nil, fmt.Errorf("%w: body over %d bytes", errMalformed, maxEventSize)
		}
		return s.handle(ctx, b, id)
	case "text/event-stream":
		r := sseReaders.Get().(*bufio.Reader)
		r.Reset(resp.Body)
		defer func() { r.Reset(nil); sseReaders.Put(r) }() // events are copied out of its buffer
		st := &stream{body: resp.Body}
		defer st.close()
		for {
			data, err := sse.ReadEventMeta(r, maxEventSize, &st.meta)
			if err != nil {
				if errors.Is(err, sse.ErrTooLarge) {
					return nil, fmt.Errorf("%w: %w", errMalformed, err)
				}
				if s.resume(ctx, st) {
					r.Reset(st.body)
					continue
				}
				return nil, fmt.Errorf("%w: %w", errStreamLost, err)
			}
			if len(data) == 0 {
				continue
			}
			msg, err := s.handle(ctx, data, id)
			if msg != nil || err != nil {
				return msg, err
			}
		}
	}
	return nil, fmt.Errorf("%w: content-type %q", errMalformed, ct)
}

// handle processes one message: the response to id is returned; anything
// else is relayed and (nil, nil) returned.
func (s *Session) handle(ctx context.Context, data []byte, id string) (*wireMessage, error) {
	var m wireMessage
	if err := jsonwire.UnmarshalShared(data, &m); err != nil { // data is this message's own copy
		return nil, fmt.Errorf("%w: %w", errMalformed, err)
	}
	switch {
	case m.Method == "" && len(m.ID) > 0:
		if !isID(m.ID, id) {
			return nil, fmt.Errorf("%w: response to an unknown request", errMalformed)
		}
		if m.Error == nil && len(m.Result) == 0 {
			return nil, fmt.Errorf("%w: neither result nor error", errMalformed)
		}
		return &m, nil
	case m.Method != "" && len(m.ID) > 0:
		s.answer(ctx, &m)
	case m.Method != "":
		s.notify(ctx, &m)
	default:
		return nil, fmt.Errorf("%w: not a JSON-RPC message", errMalformed)
	}
	return nil, nil
}

// isID reports whether the JSON value raw is the string id: compared as
// written when it is written plainly, else decoded.
func isID(raw json.RawMessage, id string) bool {
	if len(raw) == len(id)+2 && raw[0] == '"' && raw[len(raw)-1] == '"' && string(raw[1:len(raw)-1]) == id {
		return true
	}
	var got string
	return json.Unmarshal(raw, &got) == nil && got == id
}

// mediaType is the lower-cased media type of a Content-Type value, without
// parameters.
func mediaType(contentType string) string {
	mt, _, _ := strings.Cut(contentType, ";")
	mt = strings.TrimSpace(mt)
	for i := 0; i < len(mt); i++ {
		if c := mt[i]; c >= 'A' && c <= 'Z' {
			return strings.ToLower(mt)
		}
	}
	return mt
}

// serverRequestParams are the server-to-client requests a Relay answers.
var serverRequestParams = map[string]func() mcp.Params{
	"sampling/createMessage": func() mcp.Params { return &mcp.CreateMessageWithToolsParams{} },
	"elicitation/create":     func() mcp.Params { return &mcp.ElicitParams{} },
	"roots/list":             func() mcp.Params { return &mcp.ListRootsParams{} },
}

// answer replies to a server-to-client request through the Relay (or
// refuses it, as the go-sdk client does for a capability it lacks).
func (s *Session) answer(ctx context.Context, m *wireMessage) {
	reply := struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Result  mcp.Result      `json:"result,omitempty"`
		Error   *jsonrpc.Error  `json:"error,omitempty"`
	}{JSONRPC: "2.0", ID: m.ID}
	newParams, known := serverRequestParams[m.Method]
	switch {
	case !known || s.http.relay == nil || s.http.relay.Request == nil:
		reply.Error = &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: m.Method + " not supported"}
	default:
		p := newParams()
		if len(m.Params) > 0 {
			if err := json.Unmarshal(m.Params, p); err != nil {
				reply.Error = &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: err.Error()}
				break
			}
		}
		res, err := s.http.relay.Request(ctx, m.Method, p)
		var rpcErr *jsonrpc.Error
		switch {
		case errors.As(err, &rpcErr):
			reply.Error = rpcErr
		case err != nil:
			reply.Error = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()}
		default:
			reply.Result = res
		}
	}
	b, err := json.Marshal(reply)
	if err != nil {
		return
	}
	// Not recorded in the call's exchange: that describes the tools/call POST.
	if resp, err := s.post(context.WithValue(ctx, exchangeKey{}, (*exchange)(nil)), b); err == nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
	}
}

// notificationParams are the notifications relayed to a Relay.
var notificationParams = map[string]func() mcp.Params{
	"notifications/progress":               func() mcp.Params { return &mcp.ProgressNotificationParams{} },
	"notifications/message":                func() mcp.Params { return &mcp.LoggingMessageParams{} },
	"notifications/resources/updated":      func() mcp.Params { return &mcp.ResourceUpdatedNotificationParams{} },
	"notifications/resources/list_changed": func() mcp.Params { return &mcp.ResourceListChangedParams{} },
	"notifications/prompts/list_changed":   func() mcp.Params { return &mcp.PromptListChangedParams{} },
	"notifications/tools/list_changed":     func() mcp.Params { return &mcp.ToolListChangedParams{} },
}

func (s *Session) notify(ctx context.Context, m *wireMessage) {
	if m.Method == "notifications/tools/list_changed" && s.http.onTools != nil {
		s.http.onTools()
	}
	r := s.http.relay
	newParams, known := notificationParams[m.Method]
	if r == nil || r.Notify == nil || !known {
		return
	}
	p := newParams()
	if len(m.Params) > 0 && json.Unmarshal(m.Params, p) != nil {
		return
	}
	r.Notify(ctx, m.Method, p)
}

// cancelUpstream tells the upstream that request id was abandoned.
func (s *Session) cancelUpstream(id string) {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": "notifications/cancelled",
		"params": map[string]any{"requestId": id, "reason": "cancelled by the caller"}})
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), s.pool.opts.ConnectTimeout)
		defer cancel()
		if resp, err := s.post(ctx, b); err == nil {
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
		}
	}()
}

// decodeCallResult decodes a CallToolResult, and returns its
// structuredContent decoded exactly (decodeExact; the same tree as the
// result's when its numbers allow, see floatInts) and as received, when it
// decoded that itself: as part of raw, not a copy (raw, a message's own
// bytes, must not change while the result is in use). Results whose
// content is only text (the common case) are built directly; others go
// through the go-sdk's own decoding of content types.
func decodeCallResult(raw json.RawMessage) (*mcp.CallToolResult, any, json.RawMessage, error) {
	var wire struct {
		Meta              mcp.Meta        `json:"_meta"`
		Content           []textContent   `json:"content"`
		StructuredContent json.RawMessage `json:"structuredContent"`
		IsError           bool            `json:"isError"`
		ResultType        string          `json:"resultType"`
		one               [1]textContent  // Content's room for the usual single item: no slice of its own
	}
	wire.Content = wire.one[:0] // the decoder appends in place
	if err := jsonwire.UnmarshalShared(raw, &wire); err != nil {
		return nil, nil, nil, fmt.Errorf("%w: tools/call result: %w", errMalformed, err)
	}
	res, texts := newTextResult(len(wire.Content))
	res.Meta, res.IsError = wire.Meta, wire.IsError
	for i, c := range wire.Content {
		if c.Type != "text" || c.Text == nil || wire.ResultType != "" {
			res = &mcp.CallToolResult{}
			if err := res.UnmarshalJSON(raw); err != nil {
				return nil, nil, nil, fmt.Errorf("%w: tools/call result: %w", errMalformed, err)
			}
			return res, nil, nil, nil
		}
		texts[i] = mcp.TextContent{Text: *c.Text, Meta: c.Meta, Annotations: c.Annotations}
		res.Content = append(res.Content, &texts[i])
	}
	if len(wire.StructuredContent) == 0 || string(wire.StructuredContent) == "null" {
		return res, nil, nil, nil
	}
	exact, err := decodeExact(wire.StructuredContent)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%w: structuredContent: %w", errMalformed, err)
	}
	if floatInts(exact) { // decoded once: the same tree is answered and checked
		res.StructuredContent = exact
		return res, exact, wire.StructuredContent, nil
	}
	if err := jsonwire.Unmarshal(wire.StructuredContent, &res.StructuredContent); err != nil {
		return nil, nil, nil, fmt.Errorf("%w: structuredContent: %w", errMalformed, err)
	}
	return res, exact, wire.StructuredContent, nil
}

// newTextResult is a result with room for n text contents, made in one
// piece for the usual single one (result, content and text: one
// allocation where there would be three).
func newTextResult(n int) (*mcp.CallToolResult, []mcp.TextContent) {
	if n == 1 {
		r := &textResult{}
		r.res.Content = r.content[:0]
		return &r.res, r.text[:]
	}
	return &mcp.CallToolResult{Content: make([]mcp.Content, 0, n)}, make([]mcp.TextContent, n)
}

// textResult is a result of one text content.
type textResult struct {
	res     mcp.CallToolResult
	content [1]mcp.Content
	text    [1]mcp.TextContent
}

// decodeExact decodes one JSON value with its numbers as json.Number (as
// the output schema check needs them: exact), refusing trailing data.
func decodeExact(raw json.RawMessage) (any, error) {
	var v any
	if err := jsonwire.UnmarshalNumber(raw, &v); err != nil {
		return nil, err
	}
	return v, nil
}

// maxExactInt is the largest integer every smaller one of which float64 holds exactly.
const maxExactInt = 1 << 53

// floatInts reports whether every number in v (decoded by decodeExact) is
// an integer literal, written as encoding/json writes a float64 and within
// ±2^53, and if so turns each into that float64 in place. Such a tree is
// what encoding/json decodes into any, and encodes to the same bytes, and
// its numbers are exact, so it serves the answer and the check alike.
// Otherwise v is left as it was (partly converted numbers stay exact).
func floatInts(v any) bool {
	switch x := v.(type) {
	case json.Number:
		return false // a bare number: converted by its container
	case []any:
		for i, e := range x {
			f, ok := floatElem(e)
			if !ok {
				return false
			}
			x[i] = f
		}
	case map[string]any:
		for k, e := range x {
			f, ok := floatElem(e)
			if !ok {
				return false
			}
			x[k] = f
		}
	}
	return true
}

// floatElem is e as floatInts leaves it in its container: a json.Number
// integer as its float64, any other value checked (and converted) in place.
func floatElem(e any) (any, bool) {
	if n, ok := e.(json.Number); ok {
		f, ok := plainInt(n)
		return f, ok
	}
	return e, floatInts(e)
}

// plainInt is n as a float64 when n is an integer written as encoding/json
// writes that float64 (no sign but '-', no leading zero, no fraction or
// exponent, not -0) and within ±2^53.
func plainInt(n json.Number) (float64, bool) {
	s := string(n)
	neg := strings.HasPrefix(s, "-")
	d := strings.TrimPrefix(s, "-")
	if d == "" || len(d) > 16 || (d[0] == '0' && (len(d) > 1 || neg)) {
		return 0, false
	}
	var u int64
	for i := 0; i < len(d); i++ {
		if d[i] < '0' || d[i] > '9' {
			return 0, false
		}
		u = u*10 + int64(d[i]-'0')
	}
	if u > maxExactInt {
		return 0, false
	}
	if neg {
		u = -u
	}
	return float64(u), true
}

type textContent struct {
	Type        string           `json:"type"`
	Text        *string          `json:"text"`
	Meta        mcp.Meta         `json:"_meta"`
	Annotations *mcp.Annotations `json:"annotations"`
}
