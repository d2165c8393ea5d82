package discovery

import (
	"slices"

	"google.golang.org/grpc"

	"github.com/mcpready/mcpready/artifact"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
)

// sotwSub is one subscribed type on a state-of-the-world stream.
type sotwSub struct {
	s         *Server
	stream    grpc.ServerStream
	ns        *nodeScope
	kind      artifact.Kind
	names     []string
	ver       string // version_info last sent, or the one the agent held on subscribe
	lastNonce string
	sentNames map[string]string
	// gone are names the agent may still hold whose current version is
	// scoped away from it: each push carries that version (the agent
	// verifies it and drops the one it holds) until the agent ACKs one.
	gone map[string]bool
}

func (sub *sotwSub) nonce() string { return sub.lastNonce }

// rename takes a later request answering the last push: an ACK means the
// agent dropped what was scoped away (gone); when the resource names
// changed, the agent gets the resources it now subscribes to (nothing if
// the set it holds is still right).
func (sub *sotwSub) rename(req *mcpreadyv1.StreamResourcesRequest) error {
	if req.GetErrorDetail() == nil {
		clear(sub.gone)
	}
	if slices.Equal(req.GetResourceNames(), sub.names) {
		return nil
	}
	sub.names = slices.Clone(req.GetResourceNames())
	sub.ver = "" // re-filter the current snapshot
	return sub.push()
}
func (sub *sotwSub) version() string { return sub.ver }

func (sub *sotwSub) push() error {
	sn := sub.s.snapshot(sub.kind)
	if sn == nil || sn.version == sub.ver {
		return nil
	}
	res := sn.filter(sub.ns, sub.names)
	for name := range sub.sentNames {
		if r := sn.resource(name); r != nil && !r.visibleTo(sub.ns) {
			sub.gone[name] = true
		}
	}
	out := res
	for name := range sub.gone {
		// deleted: its tombstone tells the agent; back in scope: in res
		if r := sn.resource(name); r != nil && !r.visibleTo(sub.ns) {
			out = append(out, r.pb)
			continue
		}
		delete(sub.gone, name)
	}
	if sub.lastNonce != "" && len(out) == len(res) && sameSet(sub.sentNames, res) {
		sub.ver = sn.version // nothing this node sees changed
		return nil
	}
	sub.ver, sub.lastNonce = sn.version, sub.s.nextNonce()
	sub.sentNames = make(map[string]string, len(res))
	for _, r := range res {
		sub.sentNames[r.Name] = r.Version
	}
	return sub.s.send(sub.stream, &mcpreadyv1.StreamResourcesResponse{VersionInfo: sn.version, TypeUrl: sub.kind.TypeURL(), Nonce: sub.lastNonce, Resources: out, Tombstones: sn.tombstones}, sub.kind.TypeURL(), sn.built)
}

// StreamResources implements the state-of-the-world variant. A
// subscription that presents the current version_info gets nothing until
// the version changes. The full set omits what is out of the agent's
// scope, except the current version of a resource the agent may hold that
// moved out of it (sent before on this stream, or named in
// held_resource_versions at a version that was in its scope).
func (s *Server) StreamResources(stream mcpreadyv1.DiscoveryService_StreamResourcesServer) error {
	return serve(s, stream, stream.Recv, func(stream grpc.ServerStream, ns *nodeScope, k artifact.Kind, req *mcpreadyv1.StreamResourcesRequest) (subscription, error) {
		held, err := s.entitled(stream.Context(), k, ns, req.GetHeldResourceVersions())
		if err != nil {
			return nil, err
		}
		// ver "" never equals a snapshot version, so a fresh agent always
		// gets one push. What the agent holds counts as sent: a later
		// snapshot that scopes it away sends it.
		sub := &sotwSub{s: s, stream: stream, ns: ns, kind: k, names: req.GetResourceNames(), ver: req.GetVersionInfo(), sentNames: held, gone: map[string]bool{}}
		sn := s.snapshot(k)
		for name := range held {
			if r := sn.resource(name); r != nil && !r.visibleTo(ns) {
				sub.ver = "" // the agent holds something it must drop now
			}
		}
		return sub, sub.push()
	})
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
