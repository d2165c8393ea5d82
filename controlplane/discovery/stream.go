package discovery

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/mcpready/mcpready/artifact"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
)

// request is what both stream variants' requests have in common.
type request interface {
	GetNode() *mcpreadyv1.Node
	GetTypeUrl() string
	GetResponseNonce() string
	GetErrorDetail() *mcpreadyv1.ErrorDetail
}

// subscription is one subscribed type on one stream.
type subscription interface {
	// push sends what the agent lacks of the current snapshot, if anything.
	push() error
	// nonce is the nonce of the last response sent ("" before any).
	nonce() string
	// version is the version last considered, for logs.
	version() string
}

// renamer is a subscription whose resource names a later request may
// change (state of the world: each request carries the full list).
type renamer[Req request] interface {
	rename(req Req) error
}

// subscribeFunc creates the subscription for the first request of a type
// (kind already validated) and pushes what the agent lacks.
type subscribeFunc[Req request] func(stream grpc.ServerStream, ns *nodeScope, kind artifact.Kind, first Req) (subscription, error)

// serve runs one agent stream: requests subscribe, ACK or NACK; snapshot
// changes wake the stream, which pushes each subscription. A NACK is
// counted and logged, and never causes a resend.
func serve[Req request](s *Server, stream grpc.ServerStream, recv func() (Req, error), subscribe subscribeFunc[Req]) error {
	ctx := stream.Context()
	if err := s.waitReady(ctx); err != nil {
		return err
	}
	c, done := s.register()
	defer done()
	reqs := make(chan Req, 8)
	errc := make(chan error, 1)
	go recvLoop(ctx, recv, reqs, errc)

	var ns *nodeScope
	var nodeID string
	subs := map[string]subscription{}
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-errc:
			return streamEnd(err)
		case <-c.wakeCh:
			for _, sub := range subs {
				if err := sub.push(); err != nil {
					return streamEnd(err)
				}
			}
		case req := <-reqs:
			if ns == nil {
				if req.GetNode().GetId() == "" {
					return status.Error(codes.InvalidArgument, "the first request must carry node.id")
				}
				sc := scopeOf(req.GetNode())
				ns, nodeID = &sc, req.GetNode().GetId()
				s.identify(c, nodeID)
			}
			sub, ok := subs[req.GetTypeUrl()]
			if !ok {
				k, err := kindOf(req.GetTypeUrl())
				if err != nil {
					return err
				}
				if subs[req.GetTypeUrl()], err = subscribe(stream, ns, k, req); err != nil {
					return streamEnd(err)
				}
				continue
			}
			if req.GetResponseNonce() == "" || req.GetResponseNonce() != sub.nonce() {
				continue // the answer to an older push
			}
			nack := req.GetErrorDetail() != nil
			s.o.Metrics.acked(req.GetTypeUrl(), !nack)
			s.answered(c, req.GetTypeUrl(), sub.version(), req.GetErrorDetail().GetMessage(), nack)
			if nack {
				s.o.Logger.Warn("discovery: NACK; keeping the agent's previous version", "node", nodeID, "type", req.GetTypeUrl(), "version", sub.version(), "error", req.GetErrorDetail().GetMessage())
			}
			if r, ok := sub.(renamer[Req]); ok {
				if err := r.rename(req); err != nil {
					return streamEnd(err)
				}
			}
		}
	}
}

// recvLoop forwards requests from recv until it fails.
func recvLoop[T any](ctx context.Context, recv func() (T, error), out chan<- T, errc chan<- error) {
	for {
		m, err := recv()
		if err != nil {
			errc <- err
			return
		}
		select {
		case out <- m:
		case <-ctx.Done():
			return
		}
	}
}
