package discovery

import (
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/mcpready/mcpready/artifact"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
)

// deltaSub is one subscribed type on an incremental stream.
type deltaSub struct {
	kind    artifact.Kind
	version string            // snapshot version last considered
	held    map[string]string // name -> version the agent holds (or was sent)
	nonce   string
}

// DeltaResources implements the incremental variant.
func (s *Server) DeltaResources(stream mcpreadyv1.DiscoveryService_DeltaResourcesServer) error {
	ctx := stream.Context()
	if err := s.waitReady(ctx); err != nil {
		return err
	}
	c, done := s.register()
	defer done()
	reqs := make(chan *mcpreadyv1.DeltaResourcesRequest, 8)
	errc := make(chan error, 1)
	go recvLoop(ctx, stream.Recv, reqs, errc)

	var ns *nodeScope
	var nodeID string
	subs := map[string]*deltaSub{}
	push := func(sub *deltaSub) error {
		sn := s.snapshot(sub.kind)
		if sn == nil || sn.version == sub.version {
			return nil
		}
		sub.version = sn.version
		res := sn.filter(ns, nil)
		resp := &mcpreadyv1.DeltaResourcesResponse{SystemVersionInfo: sn.version, TypeUrl: sub.kind.TypeURL()}
		live := make(map[string]bool, len(res))
		for _, r := range res {
			live[r.Name] = true
			if sub.held[r.Name] != r.Version {
				resp.Resources = append(resp.Resources, r)
			}
		}
		for name := range sub.held {
			if !live[name] {
				resp.RemovedResources = append(resp.RemovedResources, name)
			}
		}
		if len(resp.Resources) == 0 && len(resp.RemovedResources) == 0 {
			return nil
		}
		for _, r := range resp.Resources {
			sub.held[r.Name] = r.Version
		}
		for _, name := range resp.RemovedResources {
			delete(sub.held, name)
		}
		sub.nonce = s.nextNonce()
		resp.Nonce = sub.nonce
		return s.send(stream, resp, sub.kind.TypeURL(), sn.built)
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-errc:
			return streamEnd(err)
		case <-c.wakeCh:
			for _, sub := range subs {
				if err := push(sub); err != nil {
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
			}
			sub, ok := subs[req.GetTypeUrl()]
			if !ok {
				k, err := kindOf(req.GetTypeUrl())
				if err != nil {
					return err
				}
				held := make(map[string]string, len(req.GetInitialResourceVersions()))
				for n, v := range req.GetInitialResourceVersions() {
					held[n] = v
				}
				sub = &deltaSub{kind: k, held: held}
				subs[req.GetTypeUrl()] = sub
				if err := push(sub); err != nil {
					return streamEnd(err)
				}
				continue
			}
			if req.GetResponseNonce() == "" || req.GetResponseNonce() != sub.nonce {
				continue
			}
			if req.GetErrorDetail() != nil {
				s.o.Metrics.acked(req.GetTypeUrl(), false)
				s.o.Logger.Warn("discovery: delta NACK", "node", nodeID, "type", req.GetTypeUrl(), "version", sub.version, "error", req.GetErrorDetail().GetMessage())
				continue
			}
			s.o.Metrics.acked(req.GetTypeUrl(), true)
		}
	}
}
