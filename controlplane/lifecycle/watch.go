package lifecycle

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/mcpready/mcpready/artifact"
	"github.com/mcpready/mcpready/controlplane/store"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
)

// handle records the state of an organisation revision of a registry
// entry, once per revision: revisions written by the lifecycle itself,
// deletions and revisions already handled (or older than one handled) are
// ignored. A revision is claimed in etcd before its event is recorded, so
// replicas handling the same revision at once record it once.
//
// Every path that records events for an entry marks its handled stream
// first (handle; a new candidate's creation marks revision 0). So an entry
// with events and nothing marked was handled when it was applied, by a
// control plane that recorded applies synchronously: rec is marked handled
// without an event, so a suspension recorded since is never undone.
func (m *Manager) handle(ctx context.Context, rec store.Record) error {
	if rec.Kind != artifact.KindRegistryEntry || rec.Deleted || (m.signerID != "" && rec.Signer == m.signerID) {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	done, marked, err := m.handled(ctx, rec.Name)
	if err != nil || done >= rec.Revision {
		return err
	}
	e, err := m.load(ctx, rec)
	if err != nil {
		return fmt.Errorf("reading revision %d of %q: %w", rec.Revision, rec.Name, err)
	}
	if claimed, err := m.markHandled(ctx, rec.Name, rec.Revision); err != nil || !claimed || (!marked && len(e.events) > 0) {
		return err
	}
	to := e.spec.GetState()
	if to == mcpreadyv1.LifecycleState_LIFECYCLE_STATE_UNSPECIFIED {
		to = mcpreadyv1.LifecycleState_LIFECYCLE_STATE_CANDIDATE
	}
	from := mcpreadyv1.LifecycleState_LIFECYCLE_STATE_UNSPECIFIED
	if len(e.events) > 0 {
		from = e.state
	}
	if from == to {
		return nil
	}
	return m.record(ctx, &mcpreadyv1.LifecycleEvent{EntryName: rec.Name, From: from, To: to, Drift: e.spec.GetDrift(),
		Reason: fmt.Sprintf("revision %d applied by key %s", rec.Revision, rec.Signer), RelatedEntry: e.spec.GetSupersedes()})
}

// markHandled claims revision rev of name; claimed is false if it was
// claimed before.
func (m *Manager) markHandled(ctx context.Context, name string, rev int64) (claimed bool, err error) {
	return m.st.CreateEvent(ctx, handledStream, name, rev, []byte(strconv.FormatInt(rev, 10)))
}

// handled returns the highest organisation revision of name handled, and
// whether anything was ever marked for name.
func (m *Manager) handled(ctx context.Context, name string) (done int64, marked bool, err error) {
	raw, err := m.st.Events(ctx, handledStream, name)
	if err != nil {
		return 0, false, err
	}
	for _, b := range raw {
		if n, err := strconv.ParseInt(string(b), 10, 64); err == nil {
			done = max(done, n)
		}
	}
	return done, len(raw) > 0, nil
}

// Watch handles every organisation revision of a registry entry, those
// stored before it started first, then each as the store watch reports it,
// until ctx ends. Run calls it; call it directly only where Run is not used.
func (m *Manager) Watch(ctx context.Context) {
	handle := func(r store.Record) {
		if err := m.handle(ctx, r); err != nil && ctx.Err() == nil {
			m.o.Logger.Warn("lifecycle: cannot record an applied revision", "entry", r.Name, "revision", r.Revision, "err", err)
		}
	}
	for ctx.Err() == nil {
		recs, rev, err := m.st.List(ctx, artifact.KindRegistryEntry)
		if err != nil {
			m.o.Logger.Warn("lifecycle: listing registry entries", "err", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
				continue
			}
		}
		for _, r := range recs {
			handle(r)
		}
		m.st.WatchRecords(ctx, artifact.KindRegistryEntry, rev, handle)
	}
}
