package front

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpready/mcpready/internal/jsonwire"
)

// MaxRequestBytes bounds one HTTP request body from an AI agent.
const MaxRequestBytes = mcp.DefaultMaxRequestBodyBytes

// knownMethods are the client-to-server methods the front serves.
var knownMethods = map[string]bool{
	"initialize": true, "ping": true, "server/discover": true, "subscriptions/listen": true,
	"tools/list": true, "tools/call": true,
	"resources/list": true, "resources/templates/list": true, "resources/read": true,
	"resources/subscribe": true, "resources/unsubscribe": true,
	"prompts/list": true, "prompts/get": true, "completion/complete": true, "logging/setLevel": true,
}

// precheck answers malformed, oversized and unknown-method requests with a
// precise JSON-RPC error before they reach the go-sdk handler (which would
// answer plain-text HTTP errors that make some clients drop the session).
// It returns false when it has answered, and otherwise the decoded message
// of a POST carrying a single one (nil for other requests) and the body it
// read (nil when it read none): r.Body is then consumed, and whatever
// serves r other than the fast path needs restoreBody first.
//
// The body must arrive within bodyTimeout (a client trickling it is cut
// off, and slow is called); zero is no limit.
func precheck(w http.ResponseWriter, r *http.Request, bodyTimeout time.Duration, slow func()) (*envelope, []byte, bool) {
	if r.Method != http.MethodPost || r.Body == nil {
		return nil, nil, true
	}
	rc := http.NewResponseController(w)
	if bodyTimeout > 0 && rc.SetReadDeadline(time.Now().Add(bodyTimeout)) == nil {
		defer rc.SetReadDeadline(time.Time{}) //nolint:errcheck // cleared for the response stream
	}
	body, err := readBody(r)
	r.Body.Close()
	if errors.Is(err, os.ErrDeadlineExceeded) {
		slow()
		writeRPCError(w, http.StatusRequestTimeout, nil, int(jsonrpc.CodeParseError), fmt.Sprintf("request body not received within %s", bodyTimeout))
		return nil, nil, false
	}
	if err != nil {
		writeRPCError(w, http.StatusBadRequest, nil, int(jsonrpc.CodeParseError), "reading request: "+err.Error())
		return nil, nil, false
	}
	if len(body) > MaxRequestBytes {
		writeRPCError(w, http.StatusRequestEntityTooLarge, nil, int(jsonrpc.CodeInvalidRequest), fmt.Sprintf("request larger than %d bytes", MaxRequestBytes))
		return nil, nil, false
	}
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) > 0 && trimmed[0] == '[' {
		return nil, body, true // batches: the SDK answers per message
	}
	env := new(envelope)
	if err := jsonwire.UnmarshalShared(body, env); err != nil { // body is kept, never changed
		writeRPCError(w, http.StatusBadRequest, nil, int(jsonrpc.CodeParseError), "parse error: "+err.Error())
		return nil, nil, false
	}
	if env.JSONRPC != "2.0" {
		writeRPCError(w, http.StatusBadRequest, env.ID, int(jsonrpc.CodeInvalidRequest), `invalid request: "jsonrpc" must be "2.0"`)
		return nil, nil, false
	}
	isCall := len(env.ID) > 0 && string(env.ID) != "null"
	if env.Method != nil && isCall && !knownMethods[*env.Method] {
		status := http.StatusOK
		if r.Header.Get(protocolHeader) >= statelessProtocol {
			status = http.StatusNotFound // SEP-2575: an unknown method is HTTP 404
		}
		writeRPCError(w, status, env.ID, int(jsonrpc.CodeMethodNotFound), fmt.Sprintf("method %q not found", *env.Method))
		return nil, nil, false
	}
	return env, body, true
}

// readBody reads r's body, at most MaxRequestBytes+1 bytes: in one
// buffer of its declared length when it has one within the bound.
func readBody(r *http.Request) ([]byte, error) {
	n := r.ContentLength
	if n < 0 || n > MaxRequestBytes {
		return io.ReadAll(io.LimitReader(r.Body, MaxRequestBytes+1))
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r.Body, body); err != nil {
		return nil, err
	}
	return body, nil
}

// restoreBody gives r back the body precheck read (nil: it read none).
func restoreBody(r *http.Request, body []byte) {
	if body != nil {
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
}

// envelope is one JSON-RPC message as precheck decodes it.
type envelope struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  *string         `json:"method"`
	Params  json.RawMessage `json:"params"`
}

func writeRPCError(w http.ResponseWriter, status int, id json.RawMessage, code int, msg string) {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	b, _ := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}{JSONRPC: "2.0", ID: id, Error: struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}{code, msg}})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}
