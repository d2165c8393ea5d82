package controlplane

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"

	"github.com/mcpready/mcpready/controlplane/aggregate"
	"github.com/mcpready/mcpready/controlplane/chainhead"
	"github.com/mcpready/mcpready/controlplane/ingest"
	"github.com/mcpready/mcpready/controlplane/receiptstore"
	"github.com/mcpready/mcpready/controlplane/writer"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
)

// ReceiptOptions configures a Server's receipt pipeline: the Receipts
// gRPC service, the on-disk receipt store and, when the Server has an
// ObserverKey, the aggregator that folds receipts into passive Evidence.
// Receipts live on this replica's disk, not in etcd; each agent's chain
// head lives in etcd (package chainhead), so an agent may move between
// replicas and its chain continues.
type ReceiptOptions struct {
	// Dir holds the receipt segments; "" means <DataDir>/receipts.
	Dir string
	// Retention drops whole segments older than this; 0 keeps everything.
	Retention time.Duration
	// EvidenceWindow is the aggregation window; 0 means the aggregate
	// package's default.
	EvidenceWindow time.Duration
}

// retentionEvery is how often old receipt segments are dropped.
const retentionEvery = time.Hour

// receiptPipeline is the running receipt pipeline of one Server.
type receiptPipeline struct {
	store *receiptstore.Store
	svc   *ingest.Service
	agg   *aggregate.Aggregator // nil without an observer key
}

// openReceipts opens the receipt store and builds ingest and aggregation.
// Passive Evidence is applied through adm, so it is verified and stored
// like any other artifact. Chain heads are shared through cli.
func (s *Server) openReceipts(w *writer.Writer, cli *clientv3.Client) (*receiptPipeline, error) {
	o := s.o.Receipts
	dir := o.Dir
	if dir == "" {
		if s.o.DataDir == "" {
			return nil, fmt.Errorf("%w: receipts need a directory (ReceiptOptions.Dir or DataDir)", ErrConfig)
		}
		dir = filepath.Join(s.o.DataDir, "receipts")
	}
	rs, err := receiptstore.Open(dir, receiptstore.Options{Retention: o.Retention, Logger: s.o.Logger})
	if err != nil {
		return nil, fmt.Errorf("receipt store: %w", err)
	}
	p := &receiptPipeline{store: rs}
	var observer ingest.Observer
	if s.o.ObserverKey != nil {
		ao := aggregate.Options{
			Signer:   s.o.ObserverKey,
			Sink:     w, // Evidence only, through the one write path
			Registry: s.reg,
			Logger:   s.o.Logger,
		}
		if w := o.EvidenceWindow; w > 0 {
			ao.Window, ao.Grace, ao.FlushEvery = w, w/2, w/4
		}
		if p.agg, err = aggregate.New(ao); err != nil {
			rs.Close()
			return nil, fmt.Errorf("%w: aggregator: %w", ErrConfig, err)
		}
		observer = p.agg
	}
	heads := chainhead.New(cli, chainhead.Options{OnError: func(error) { s.etcdErr.Inc() }})
	p.svc, err = ingest.New(ingest.Options{Store: rs, Trust: w.Current, Heads: heads, Observer: observer, Registry: s.reg, Logger: s.o.Logger})
	if err != nil {
		rs.Close()
		return nil, fmt.Errorf("%w: receipts: %w", ErrConfig, err)
	}
	return p, nil
}

// register adds the Receipts service to gs.
func (p *receiptPipeline) register(gs *grpc.Server) {
	mcpreadyv1.RegisterReceiptsServiceServer(gs, p.svc)
}

// run aggregates and applies retention until ctx ends.
func (p *receiptPipeline) run(ctx context.Context, s *Server, wg *sync.WaitGroup) {
	if p.agg != nil {
		wg.Go(func() {
			if err := p.agg.Run(ctx); err != nil && ctx.Err() == nil {
				s.o.Logger.Error("evidence aggregator stopped", "err", err)
			}
		})
	}
	if s.o.Receipts.Retention > 0 {
		wg.Go(func() {
			t := time.NewTicker(retentionEvery)
			defer t.Stop()
			for {
				if n, err := p.store.ApplyRetention(); err != nil {
					s.o.Logger.Error("receipt retention", "err", err)
				} else if n > 0 {
					s.o.Logger.Info("receipt retention dropped segments", "segments", n)
				}
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				}
			}
		})
	}
}
