package controlplane

import (
	"context"
	"log/slog"

	"github.com/mcpready/mcpready/artifact"
	"github.com/mcpready/mcpready/controlplane/aggregate"
	"github.com/mcpready/mcpready/controlplane/store"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
	"github.com/mcpready/mcpready/sign"
)

// registrySubjects is the aggregator's view of the registry: every stored
// RegistryEntry's identity (the store holds only verified bundles), kept
// current from the store's watch after an initial listing.
type registrySubjects struct {
	st  *store.Store
	idx *aggregate.RegistrySubjects
	rev int64 // revision of the initial listing
	log *slog.Logger
}

// loadSubjects lists the registry once, so aggregation starts with it.
func loadSubjects(ctx context.Context, st *store.Store, log *slog.Logger) (*registrySubjects, error) {
	rs := &registrySubjects{st: st, idx: aggregate.NewRegistrySubjects(), log: log}
	recs, rev, err := st.List(ctx, artifact.KindRegistryEntry)
	if err != nil {
		return nil, err
	}
	for _, r := range recs {
		rs.apply(r)
	}
	rs.rev = rev
	return rs, nil
}

// watch keeps the view current until ctx ends.
func (rs *registrySubjects) watch(ctx context.Context) {
	rs.st.WatchRecords(ctx, artifact.KindRegistryEntry, rs.rev, rs.apply)
}

func (rs *registrySubjects) apply(r store.Record) {
	if r.Deleted {
		rs.idx.Remove(r.Name)
		return
	}
	obj, err := sign.Peek(r.Bundle)
	if err != nil {
		rs.log.Error("registry entry unreadable for aggregation", "name", r.Name, "err", err)
		return
	}
	if e, ok := obj.Spec.(*mcpreadyv1.RegistryEntry); ok {
		rs.idx.Set(r.Name, e)
	}
}
