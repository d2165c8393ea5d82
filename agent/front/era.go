package front

// What the 2026-07-28 era asks of a server, on the tools/call path of a
// stateless caller: the upstream sees the caller's own client capabilities
// (SEP-2575 per-request _meta), an upstream's refusal for a capability the
// caller did not declare reaches the caller as that JSON-RPC error, and
// progress of the upstream call reaches the caller on the call's stream.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpready/mcpready/agent/upstream"
)

// withClientCaps returns params declaring to a stateless upstream the
// input capabilities of the caller (elicitation, sampling, roots: what the
// agent relays) instead of the agent's own, so that the upstream asks only
// for input the caller can give and refuses what needs more. params is
// left untouched.
func withClientCaps(params *mcp.CallToolParams, caps *mcp.ClientCapabilities) *mcp.CallToolParams {
	declared := map[string]any{}
	if caps != nil {
		if caps.Elicitation != nil {
			declared["elicitation"] = caps.Elicitation
		}
		if caps.Sampling != nil {
			declared["sampling"] = caps.Sampling
		}
		if caps.RootsV2 != nil {
			declared["roots"] = caps.RootsV2
		}
	}
	p := *params
	p.Meta = maps.Clone(params.Meta)
	if p.Meta == nil {
		p.Meta = map[string]any{}
	}
	p.Meta[mcp.MetaKeyClientCapabilities] = declared
	return &p
}

// call is up.Call; from a stateless upstream it also notes a refusal for
// an undeclared client capability (nil-safe on rd).
func (rd *round) call(ctx context.Context, up *upstream.Session, params *mcp.CallToolParams) (upstream.Result, error) {
	if rd == nil || up.ProtocolVersion() < statelessProtocol {
		return up.Call(ctx, params)
	}
	var res upstream.Result
	err := up.Do(ctx, func(ctx context.Context, cs *mcp.ClientSession) error {
		var err error
		res.CallToolResult, err = cs.CallTool(ctx, params)
		var je *jsonrpc.Error
		var d mcp.MissingRequiredClientCapabilityData
		if errors.As(err, &je) && je.Code == mcp.CodeMissingRequiredClientCapabilities &&
			json.Unmarshal(je.Data, &d) == nil && d.RequiredCapabilities != nil {
			rd.mu.Lock()
			rd.missing = d.RequiredCapabilities
			rd.mu.Unlock()
		}
		return err
	})
	return res, err
}

// missingCapability is the SEP-2575 error of a stateless call an upstream
// refused for a client capability the caller did not declare: the
// capabilities named (only the kinds the agent relays; no upstream text)
// and the receipt of the refusal.
func (rd *round) missingCapability(receiptID string) *jsonrpc.Error {
	if rd == nil || !rd.stateless {
		return nil
	}
	rd.mu.Lock()
	need := rd.missing
	rd.mu.Unlock()
	if need == nil {
		return nil
	}
	data, _ := json.Marshal(mcp.MissingRequiredClientCapabilityData{RequiredCapabilities: &mcp.ClientCapabilities{
		Elicitation: need.Elicitation, Sampling: need.Sampling, RootsV2: need.RootsV2}})
	return &jsonrpc.Error{Code: mcp.CodeMissingRequiredClientCapabilities, Data: data,
		Message: fmt.Sprintf("the upstream requires a client capability this request did not declare (receipt %s)", receiptID)}
}

// callSessions are the upstream sessions one stateless call opened for
// itself: a call that asks for progress runs on a session of its own, whose
// progress notifications go to the caller's stream.
type callSessions struct {
	v         *view
	principal string
	notify    func(*mcp.ProgressNotificationParams)

	mu      sync.Mutex // attempts may run concurrently (hedging)
	closers []func()
}

// open connects a session of t for this call (counted against the
// dedicated-session caps).
func (cs *callSessions) open(ctx context.Context, t upstream.Target) (*upstream.Session, error) {
	release, err := cs.v.f.caps.acquire(cs.principal)
	if err != nil {
		return nil, refusal(err)
	}
	up, err := cs.v.f.pool.Open(ctx, t, &upstream.Relay{Notify: func(_ context.Context, method string, params mcp.Params) {
		if p, ok := params.(*mcp.ProgressNotificationParams); ok && method == "notifications/progress" {
			cs.notify(p)
		}
	}})
	if err != nil {
		release()
		return nil, err
	}
	cs.mu.Lock()
	cs.closers = append(cs.closers, func() { _ = up.Close(); release() })
	cs.mu.Unlock()
	return up, nil
}

// close closes every session of the call.
func (cs *callSessions) close() {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	for _, c := range cs.closers {
		c()
	}
}
