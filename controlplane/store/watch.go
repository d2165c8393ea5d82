package store

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/mcpready/mcpready/artifact"
)

// Watch calls changed with the kinds whose latest revision changed after
// etcd revision fromRev, until ctx ends. It uses progress notifications and
// requires a leader; if the watch is compacted or breaks, it re-watches from
// the current revision and reports every kind (the caller relists).
// changed is called from one goroutine at a time.
func (s *Store) Watch(ctx context.Context, fromRev int64, changed func(kinds []artifact.Kind)) {
	prefix := s.o.Prefix + "/latest/"
	s.watch(ctx, prefix, fromRev, func(evs []*clientv3.Event) error {
		seen := map[artifact.Kind]bool{}
		var kinds []artifact.Kind
		for _, ev := range evs {
			rest := strings.TrimPrefix(string(ev.Kv.Key), prefix)
			k, _, _ := strings.Cut(rest, "/")
			if kind := artifact.Kind(k); !seen[kind] {
				seen[kind] = true
				kinds = append(kinds, kind)
			}
		}
		changed(kinds)
		return nil
	}, func(ctx context.Context) (int64, error) {
		rev, err := s.CurrentRevision(ctx)
		if err == nil {
			changed(artifact.Kinds())
		}
		return rev, err
	})
}

// WatchRecords calls fn with each latest record of kind k (bundle
// included) written after etcd revision fromRev, in write order, until ctx
// ends. Deletions are delivered too (Deleted set). Delivery is at least
// once: if the watch breaks or is compacted, fn is called again with every
// latest record of kind k, relisted, and watching resumes after that
// listing. fn is called from one goroutine at a time.
func (s *Store) WatchRecords(ctx context.Context, k artifact.Kind, fromRev int64, fn func(Record)) {
	s.watch(ctx, s.latestPrefix(k), fromRev, func(evs []*clientv3.Event) error {
		recs, err := s.eventRecords(ctx, evs)
		if err != nil {
			return err
		}
		for _, r := range recs {
			fn(r)
		}
		return nil
	}, func(ctx context.Context) (int64, error) {
		recs, rev, err := s.List(ctx, k)
		if err == nil {
			for _, r := range recs {
				fn(r)
			}
		}
		return rev, err
	})
}

// watch watches prefix from fromRev+1 with progress notifications,
// requiring a leader, and hands each batch of events to onEvents. When the
// watch is compacted or breaks, or onEvents fails, it waits with backoff,
// calls resync (which reports what may have been missed and returns the
// revision to resume after) and watches again.
func (s *Store) watch(ctx context.Context, prefix string, fromRev int64, onEvents func([]*clientv3.Event) error, resync func(context.Context) (int64, error)) {
	next := fromRev + 1
	delay := s.o.Backoff
	for ctx.Err() == nil {
		wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		wch := s.cli.Watch(wctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(next), clientv3.WithProgressNotify())
		for resp := range wch {
			if resp.CompactRevision != 0 || resp.Canceled || resp.Err() != nil {
				if s.o.OnError != nil && resp.Err() != nil {
					s.o.OnError(resp.Err())
				}
				break
			}
			delay = s.o.Backoff
			if len(resp.Events) > 0 {
				if err := onEvents(resp.Events); err != nil {
					break
				}
			}
			next = resp.Header.Revision + 1
		}
		cancel()
		if ctx.Err() != nil {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
		delay = min(delay*2, 2*time.Second)
		if rev, err := resync(ctx); err == nil {
			next = rev + 1
		}
	}
}

// CurrentRevision returns etcd's current revision.
func (s *Store) CurrentRevision(ctx context.Context) (int64, error) {
	var rev int64
	err := s.do(ctx, func(ctx context.Context) error {
		resp, err := s.cli.Get(ctx, s.o.Prefix+"/latest/", clientv3.WithCountOnly())
		if err != nil {
			return err
		}
		rev = resp.Header.Revision
		return nil
	})
	return rev, err
}

// eventRecords decodes the latest-pointer puts of a watch response and
// reads their bundles (revision keys are immutable, so any read revision
// holds them).
func (s *Store) eventRecords(ctx context.Context, evs []*clientv3.Event) ([]Record, error) {
	recs := make([]Record, 0, len(evs))
	keys := make([]string, 0, len(evs))
	for _, ev := range evs {
		if ev.Type != clientv3.EventTypePut {
			continue
		}
		var r Record
		if err := json.Unmarshal(ev.Kv.Value, &r); err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrInvalid, ev.Kv.Key, err)
		}
		r.ModRevision = ev.Kv.ModRevision
		recs = append(recs, r)
		keys = append(keys, s.artifactKey(r.Kind, r.Name, r.Revision))
	}
	bundles, err := s.getMany(ctx, keys, 0)
	if err != nil {
		return nil, err
	}
	for i := range recs {
		recs[i].Bundle = bundles[i]
	}
	return recs, nil
}
