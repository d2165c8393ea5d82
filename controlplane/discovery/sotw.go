package discovery

import (
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/mcpready/mcpready/artifact"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
)

// sotwSub is one subscribed type on a state-of-the-world stream.
type sotwSub struct {
	kind      artifact.Kind
	names     []string
	version   string // version_info last sent, or the one the agent held on subscribe
	nonce     string // nonce last sent
	sentNames map[string]string
}

// StreamResources implements the state-of-the-world variant.
func (s *Server) StreamResources(stream mcpreadyv1.DiscoveryService_StreamResourcesServer) error {
	ctx := stream.Context()
	if err := s.waitReady(ctx); err != nil {
		return err
	}
	c, done := s.register()
	defer done()
	reqs := make(chan *mcpreadyv1.StreamResourcesRequest, 8)
	errc := make(chan error, 1)
	go recvLoop(ctx, stream.Recv, reqs, errc)

	var ns *nodeScope
	var nodeID string
	subs := map[string]*sotwSub{}
	push := func(sub *sotwSub, force bool) error {
		sn := s.snapshot(sub.kind)
		if sn == nil || (sn.version == sub.version && !force) {
			return nil
		}
		res := sn.filter(ns, sub.names)
		if sub.nonce != "" && sameSet(sub.sentNames, res) {
			sub.version = sn.version // nothing this node sees changed
			return nil
		}
		sub.version, sub.nonce = sn.version, s.nextNonce()
		sub.sentNames = make(map[string]string, len(res))
		for _, r := range res {
			sub.sentNames[r.Name] = r.Version
		}
		return s.send(stream, &mcpreadyv1.StreamResourcesResponse{VersionInfo: sn.version, TypeUrl: sub.kind.TypeURL(), Nonce: sub.nonce, Resources: res}, sub.kind.TypeURL(), sn.built)
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-errc:
			return streamEnd(err)
		case <-c.wakeCh:
			for _, sub := range subs {
				if err := push(sub, false); err != nil {
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
				// A reconnecting agent that already holds the current version gets nothing.
				sub = &sotwSub{kind: k, names: req.GetResourceNames(), version: req.GetVersionInfo()}
				subs[req.GetTypeUrl()] = sub
				if err := push(sub, req.GetVersionInfo() == ""); err != nil {
					return streamEnd(err)
				}
				continue
			}
			if req.GetResponseNonce() == "" || req.GetResponseNonce() != sub.nonce {
				continue // a stale nonce: the answer to an older push
			}
			if req.GetErrorDetail() != nil {
				s.o.Metrics.acked(req.GetTypeUrl(), false)
				s.o.Logger.Warn("discovery: NACK", "node", nodeID, "type", req.GetTypeUrl(), "version", sub.version, "error", req.GetErrorDetail().GetMessage())
				continue // keep serving; only a new version is pushed
			}
			s.o.Metrics.acked(req.GetTypeUrl(), true)
		}
	}
}

func sameSet(held map[string]string, res []*mcpreadyv1.Resource) bool {
	if len(held) != len(res) {
		return false
	}
	for _, r := range res {
		if v, ok := held[r.Name]; !ok || v != r.Version {
			return false
		}
	}
	return true
}
