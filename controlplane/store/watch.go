package store

import (
	"context"
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
			if len(resp.Events) == 0 { // progress notification
				next = resp.Header.Revision + 1
				continue
			}
			seen := map[artifact.Kind]bool{}
			var kinds []artifact.Kind
			for _, ev := range resp.Events {
				rest := strings.TrimPrefix(string(ev.Kv.Key), prefix)
				k, _, _ := strings.Cut(rest, "/")
				if kind := artifact.Kind(k); !seen[kind] {
					seen[kind] = true
					kinds = append(kinds, kind)
				}
			}
			next = resp.Header.Revision + 1
			changed(kinds)
		}
		cancel()
		if ctx.Err() != nil {
			return
		}
		// The watch broke, was compacted or lost its leader: relist and re-watch from now.
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
		delay = min(delay*2, 2*time.Second)
		rev, err := s.CurrentRevision(ctx)
		if err != nil {
			continue
		}
		next = rev + 1
		changed(artifact.Kinds())
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
