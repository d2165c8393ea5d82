package front

// Held calls: a stateless (2026-07-28) client calling a session-era
// upstream that asks for input with a server-to-client request
// (elicitation/create, sampling/createMessage, roots/list) during the call.
// The client has no channel for that request, so the agent runs the call on
// a leased upstream session (upstream.Pool.Lease), keeps it open, and hands
// the request to the client as an input request; the retry's answer is
// delivered to the waiting upstream request and the call goes on.

import (
	"context"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpready/mcpready/agent/upstream"
)

// heldCall is one upstream call kept open across rounds.
type heldCall struct {
	cancel context.CancelFunc
	asks   chan *heldAsk   // server-to-client requests of the call
	done   chan heldResult // the call's end (buffered)
	quit   chan struct{}   // closed when the call ended

	seq    int
	open   *heldAsk // the request the next round answers
	openID string
}

type heldAsk struct {
	params mcp.Params
	reply  chan heldReply // buffered
}

type heldReply struct {
	res mcp.Result
	err error
}

type heldResult struct {
	res *mcp.CallToolResult
	err error
}

// relayable reports whether caps declare some input a session-era upstream
// may ask for with a server-to-client request.
func relayable(caps *mcp.ClientCapabilities) bool {
	return caps != nil && (caps.Elicitation != nil || caps.Sampling != nil || caps.RootsV2 != nil)
}

// startHeld starts params on a leased session of target t advertising caps,
// for principal. The call outlives the round that started it (at most
// roundTTL). Past the caps on held calls it is refused (errTooManyHeld).
func (v *view) startHeld(ctx context.Context, t upstream.Target, principal string, caps *mcp.ClientCapabilities, params *mcp.CallToolParams) (*heldCall, error) {
	release, err := v.f.rounds().held.acquire(principal)
	if err != nil {
		return nil, refusal(err)
	}
	h := &heldCall{asks: make(chan *heldAsk), done: make(chan heldResult, 1), quit: make(chan struct{})}
	lease, err := v.f.pool.Lease(ctx, t, caps, func(ctx context.Context, _ string, p mcp.Params) (mcp.Result, error) {
		a := &heldAsk{params: p, reply: make(chan heldReply, 1)}
		select {
		case h.asks <- a:
		case <-h.quit:
			return nil, errors.New("call ended")
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		select {
		case r := <-a.reply:
			return r.res, r.err
		case <-h.quit:
			return nil, errors.New("call ended")
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	})
	if err != nil {
		release()
		return nil, err
	}
	cctx, cancel := context.WithTimeout(context.Background(), roundTTL)
	h.cancel = cancel
	go func() {
		res, err := lease.CallTool(cctx, params)
		cancel()
		close(h.quit)
		lease.Release()
		release()
		h.done <- heldResult{res, err}
	}()
	return h, nil
}

// wait waits for the call's end or its next server-to-client request,
// which it returns as an input request (needsInput). A ctx that ends first
// aborts the call.
func (h *heldCall) wait(ctx context.Context) (upstream.Result, *needsInput, error) {
	for {
		select {
		case r := <-h.done:
			return upstream.Result{CallToolResult: r.res}, nil, r.err
		case a := <-h.asks:
			ir, ok := a.params.(mcp.InputRequest)
			if !ok {
				a.reply <- heldReply{err: &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: fmt.Sprintf("%T not relayed", a.params)}}
				continue
			}
			h.seq++
			h.open, h.openID = a, fmt.Sprintf("mcpready.dev/upstream-%d", h.seq)
			return upstream.Result{}, &needsInput{res: &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{h.openID: ir}}, held: h}, nil
		case <-ctx.Done():
			h.abort()
			return upstream.Result{}, nil, ctx.Err()
		}
	}
}

// answer delivers the client's answer to the open request.
func (h *heldCall) answer(responses mcp.InputResponseMap) {
	if h.open == nil {
		return
	}
	r := heldReply{err: &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "the client gave no answer"}}
	if res, ok := responses[h.openID].(mcp.Result); ok {
		r = heldReply{res: res}
	}
	h.open.reply <- r
	h.open = nil
}

// abort ends the call (its open request, if any, is refused).
func (h *heldCall) abort() {
	if h.open != nil {
		h.open.reply <- heldReply{err: &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the call was abandoned"}}
		h.open = nil
	}
	h.cancel()
}

// resumeHeld continues the held call a stateless retry resumes (at most
// once per round), or reports that there is none.
func (rd *round) resumeHeld() *heldCall {
	if rd == nil || rd.prior == nil || rd.prior.held == nil {
		return nil
	}
	rd.mu.Lock()
	defer rd.mu.Unlock()
	if rd.heldUsed {
		return nil
	}
	rd.heldUsed = true
	return rd.prior.held
}

// endRound aborts a held call the round resumed but never continued (the
// retry was refused or failed before reaching the upstream).
func endRound(ctx context.Context) {
	if h := roundOf(ctx).resumeHeld(); h != nil {
		h.abort()
	}
}

// heldFor starts a held call when a stateless client that can answer input
// calls a session-era upstream; nil otherwise.
func (v *view) heldFor(ctx context.Context, rd *round, up *upstream.Session, params *mcp.CallToolParams) (*heldCall, error) {
	if rd == nil || !rd.stateless || !relayable(rd.caps) || up.ProtocolVersion() >= statelessProtocol {
		return nil, nil
	}
	return v.startHeld(ctx, up.Target, rd.callKey().principal, rd.caps, params)
}
