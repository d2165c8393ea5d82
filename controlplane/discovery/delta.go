package discovery

import (
	"google.golang.org/grpc"

	"github.com/mcpready/mcpready/artifact"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
)

// deltaSub is one subscribed type on an incremental stream.
type deltaSub struct {
	s         *Server
	stream    grpc.ServerStream
	ns        *nodeScope
	kind      artifact.Kind
	ver       string            // snapshot version last considered
	held      map[string]string // name -> version the agent holds (or was sent)
	lastNonce string
}

func (sub *deltaSub) nonce() string   { return sub.lastNonce }
func (sub *deltaSub) version() string { return sub.ver }

func (sub *deltaSub) push() error {
	sn := sub.s.snapshot(sub.kind)
	if sn == nil || sn.version == sub.ver {
		return nil
	}
	sub.ver = sn.version
	res := sn.filter(sub.ns, nil)
	resp := &mcpreadyv1.DeltaResourcesResponse{SystemVersionInfo: sn.version, TypeUrl: sub.kind.TypeURL()}
	live := make(map[string]bool, len(res))
	for _, r := range res {
		live[r.Name] = true
		if sub.held[r.Name] != r.Version {
			resp.Resources = append(resp.Resources, r)
		}
	}
	var scopedOut []string
	for name := range sub.held {
		if live[name] {
			continue
		}
		if r := sn.resource(name); r != nil {
			// Still stored, but its newer signed version is scoped away
			// from this node: that version tells the agent, which drops
			// the one it holds (a bare removal it would refuse). It is
			// then no longer held, so later versions are not sent.
			if sub.held[name] != r.pb.Version {
				resp.Resources = append(resp.Resources, r.pb)
				scopedOut = append(scopedOut, name)
			}
			continue
		}
		resp.RemovedResources = append(resp.RemovedResources, name)
		if t := sn.tombstone(name); t != nil {
			resp.Tombstones = append(resp.Tombstones, t)
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
	for _, name := range scopedOut {
		delete(sub.held, name)
	}
	sub.lastNonce = sub.s.nextNonce()
	resp.Nonce = sub.lastNonce
	return sub.s.send(sub.stream, resp, sub.kind.TypeURL(), sn.built)
}

// DeltaResources implements the incremental variant. The agent's
// initial_resource_versions seed what it holds, so a reconnect resends
// nothing it already has; what is sent is then assumed held (a NACK does
// not cause a resend). A held name now scoped away from the agent counts
// only when the version named was in its scope (Server.entitled).
func (s *Server) DeltaResources(stream mcpreadyv1.DiscoveryService_DeltaResourcesServer) error {
	return serve(s, stream, stream.Recv, func(stream grpc.ServerStream, ns *nodeScope, k artifact.Kind, req *mcpreadyv1.DeltaResourcesRequest) (subscription, error) {
		held, err := s.entitled(stream.Context(), k, ns, req.GetInitialResourceVersions())
		if err != nil {
			return nil, err
		}
		sub := &deltaSub{s: s, stream: stream, ns: ns, kind: k, held: held}
		return sub, sub.push()
	})
}
