package upstream

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// maxIdleLeases bounds the idle leasable sessions kept per server and
// capability set.
const maxIdleLeases = 16

// RequestFunc answers one server-to-client request ("sampling/createMessage",
// "elicitation/create", "roots/list").
type RequestFunc func(ctx context.Context, method string, params mcp.Params) (mcp.Result, error)

// Lease is a session of one upstream used by one call at a time, so that the
// server-to-client requests it receives belong to that call: they go to the
// RequestFunc given to Pool.Lease. It serves callers whose client cannot be
// reached over a session (2026-07-28 stateless clients) when the upstream
// asks for input with session-era server-to-client requests.
type Lease struct {
	*Session
	key     string
	handler *atomic.Pointer[RequestFunc]
	once    sync.Once
}

// leaseIdle is a Pool's set of idle leases. Its zero value is empty.
type leaseIdle struct {
	mu   sync.Mutex
	idle map[string][]*Lease // server|endpoint|capabilities -> idle leases
}

// Lease returns a session of target t advertising caps (normally the
// elicitation, sampling and roots capabilities of the client the requests
// are for), reusing an idle one when possible. Server-to-client requests go
// to fn until Release; notifications are dropped. The caller must Release it.
func (p *Pool) Lease(ctx context.Context, t Target, caps *mcp.ClientCapabilities, fn RequestFunc) (*Lease, error) {
	if caps == nil {
		caps = &mcp.ClientCapabilities{}
	}
	c := &mcp.ClientCapabilities{Elicitation: caps.Elicitation, Sampling: caps.Sampling, RootsV2: caps.RootsV2}
	key := t.Server + "|" + t.Endpoint + "|" + capsKey(c)
	li := &p.leases
	li.mu.Lock()
	for list := li.idle[key]; len(list) > 0; list = li.idle[key] {
		l := list[len(list)-1]
		li.idle[key] = list[:len(list)-1]
		if !l.Broken() {
			li.mu.Unlock()
			l.handler.Store(&fn)
			return &Lease{Session: l.Session, key: l.key, handler: l.handler}, nil // a Release of its own
		}
		_ = l.Close()
	}
	li.mu.Unlock()
	handler := &atomic.Pointer[RequestFunc]{}
	handler.Store(&fn)
	s, err := p.connect(ctx, t, &Relay{Capabilities: c,
		Request: func(ctx context.Context, method string, params mcp.Params) (mcp.Result, error) {
			h := handler.Load()
			if h == nil {
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: method + " outside a call"}
			}
			return (*h)(ctx, method, params)
		}})
	if err != nil {
		return nil, err
	}
	return &Lease{Session: s, key: key, handler: handler}, nil
}

// Release ends the lease: the session goes back to the idle set (or is
// closed when broken or the set is full). Later calls of Release do nothing.
func (l *Lease) Release() {
	p := l.pool
	l.once.Do(func() {
		l.handler.Store(nil)
		if l.Broken() {
			_ = l.Close()
			return
		}
		li := &p.leases
		li.mu.Lock()
		p.mu.Lock()
		closed := p.closed
		p.mu.Unlock()
		if !closed && len(li.idle[l.key]) < maxIdleLeases {
			if li.idle == nil {
				li.idle = map[string][]*Lease{}
			}
			li.idle[l.key] = append(li.idle[l.key], l)
			l = nil
		}
		li.mu.Unlock()
		if l != nil {
			_ = l.Close()
		}
	})
}

// closeLeases closes the idle leased sessions of p.
func (p *Pool) closeLeases() {
	li := &p.leases
	li.mu.Lock()
	idle := li.idle
	li.idle = nil
	li.mu.Unlock()
	closeAll(idle)
}

// capsKey names the capability set of a leased session.
func capsKey(c *mcp.ClientCapabilities) string {
	k := []byte("---")
	if c.Elicitation != nil {
		k[0] = 'e'
	}
	if c.Sampling != nil {
		k[1] = 's'
	}
	if c.RootsV2 != nil {
		k[2] = 'r'
	}
	return string(k)
}
