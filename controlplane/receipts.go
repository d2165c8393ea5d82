package controlplane

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"

	"github.com/mcpready/mcpready/controlplane/aggregate"
	"github.com/mcpready/mcpready/controlplane/chainhead"
	"github.com/mcpready/mcpready/controlplane/ingest"
	"github.com/mcpready/mcpready/controlplane/leader"
	"github.com/mcpready/mcpready/controlplane/receiptdb"
	"github.com/mcpready/mcpready/controlplane/receiptstore"
	"github.com/mcpready/mcpready/controlplane/store"
	"github.com/mcpready/mcpready/controlplane/writer"
	mcpreadyv1 "github.com/mcpready/mcpready/gen/mcpready/v1"
)

// ReceiptOptions configures a Server's receipt pipeline: the Receipts
// gRPC service, the on-disk receipt store and, when the Server has an
// ObserverKey, the aggregator that folds receipts into passive Evidence.
// Receipts live on this replica's disk, not in etcd; each agent's chain
// head lives in etcd (package chainhead), so an agent may move between
// replicas and its chain continues.
//
// With Store set to a PostgreSQL connection URL the receipts and the
// chain heads live in that database instead (package receiptdb), shared
// by every replica: each batch and its head advance commit in one
// transaction, and every replica answers every query.
type ReceiptOptions struct {
	// Dir holds the receipt segments; "" means <DataDir>/receipts. Unused
	// with a database Store.
	Dir string
	// Store is "" (segments in Dir) or a postgres:// connection URL; off
	// loopback it must require TLS (sslmode=verify-full or require).
	Store string
	// Retention drops whole segments (database: whole days) older than
	// this; 0 keeps everything.
	Retention time.Duration
	// EvidenceWindow is the aggregation window; 0 means the aggregate
	// package's default.
	EvidenceWindow time.Duration
	// AgentReceiptsPerSecond and AgentReceiptsBurst bound how fast one
	// agent may upload receipts to this replica (a token bucket per agent,
	// checked before a batch is verified; a batch over it is refused as
	// agent-rate-limited and resent by the agent later). 0 means
	// ingest.DefaultAgentReceiptsPerSecond (5,000) and
	// ingest.DefaultAgentReceiptsBurst (300,000, about a full agent
	// spool); a negative rate disables the bound.
	AgentReceiptsPerSecond, AgentReceiptsBurst int
}

// retentionEvery is how often old receipt segments are dropped.
const retentionEvery = time.Hour

// receiptPipeline is the running receipt pipeline of one Server.
type receiptPipeline struct {
	cli    *clientv3.Client
	db     *receiptdb.DB  // nil with segments
	q      ingest.Queries // the store's queries, whichever store it is
	close  func() error
	retain func(context.Context) (int, error) // nil without retention
	svc    *ingest.Service
	agg    *aggregate.Aggregator // nil without an observer key
	subj   *registrySubjects     // the registry the aggregator folds for (with agg)
}

// openReceipts opens the receipt store and builds ingest and aggregation.
// Passive Evidence is applied through adm, so it is verified and stored
// like any other artifact. Chain heads are shared through cli, or live in
// the receipt database.
func (s *Server) openReceipts(ctx context.Context, w *writer.Writer, st *store.Store, cli *clientv3.Client) (*receiptPipeline, error) {
	o := s.o.Receipts
	p := &receiptPipeline{cli: cli}
	io := ingest.Options{Trust: w.Current, Registry: s.reg, Logger: s.o.Logger,
		AgentReceiptsPerSecond: o.AgentReceiptsPerSecond, AgentReceiptsBurst: o.AgentReceiptsBurst}
	switch {
	case o.Store == "":
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
		p.close = rs.Close
		p.retain = func(context.Context) (int, error) { return rs.ApplyRetention() }
		io.Store, p.q = rs, rs
		io.Heads = chainhead.New(cli, chainhead.Options{OnError: func(error) { s.etcdErr.Inc() }})
	case receiptdb.IsDSN(o.Store):
		db, err := receiptdb.Open(ctx, o.Store, receiptdb.Options{Retention: o.Retention, Logger: s.o.Logger})
		if err != nil {
			return nil, fmt.Errorf("receipt database: %w", err)
		}
		p.db, p.q, p.close, p.retain = db, db, db.Close, db.Maintain
		io.Database = db
	default: // refused by check in New
		return nil, fmt.Errorf("%w: receipt store %q", ErrConfig, redactDSN(o.Store))
	}
	if o.Retention <= 0 && io.Database == nil {
		p.retain = nil
	}
	if s.o.ObserverKey != nil {
		var err error
		if p.subj, err = loadSubjects(ctx, st, s.o.Logger); err != nil {
			p.close()
			return nil, fmt.Errorf("registry for aggregation: %w", err)
		}
		ao := aggregate.Options{
			Signer:   s.o.ObserverKey,
			Sink:     w, // Evidence only, through the one write path
			Subjects: p.subj.idx,
			Drift:    p.subj.idx, // the lifecycle's drift reports, as the registry records them
			Registry: s.reg,
			Logger:   s.o.Logger,
		}
		if w := o.EvidenceWindow; w > 0 {
			ao.Window, ao.Grace, ao.FlushEvery = w, w/2, w/4
		}
		if p.agg, err = aggregate.New(ao); err != nil {
			p.close()
			return nil, fmt.Errorf("%w: aggregator: %w", ErrConfig, err)
		}
		if p.db == nil {
			io.Observer = p.agg // each replica folds what it ingests
		}
	}
	var err error
	if p.svc, err = ingest.New(io); err != nil {
		p.close()
		return nil, fmt.Errorf("%w: receipts: %w", ErrConfig, err)
	}
	return p, nil
}

// CheckReceiptStore refuses a ReceiptOptions.Store that is neither empty
// nor an acceptable database URL (one that parses and uses TLS off
// loopback), so callers can refuse it before anything starts; New does.
func CheckReceiptStore(store string) error {
	if store == "" {
		return nil
	}
	if !receiptdb.IsDSN(store) {
		return fmt.Errorf("%w: receipt store %q: want empty (segments) or a postgres:// URL", ErrConfig, redactDSN(store))
	}
	if _, err := receiptdb.ParseConfig(store); err != nil {
		return fmt.Errorf("%w: receipt store: %w", ErrConfig, err)
	}
	return nil
}

// redactDSN keeps the scheme of a store string, never its credentials.
func redactDSN(s string) string {
	if i := strings.Index(s, "://"); i >= 0 {
		return s[:i+3] + "…"
	}
	if len(s) > 16 {
		return s[:16] + "…"
	}
	return s
}

// aggregationElection elects the one replica that folds the shared
// receipt database into passive Evidence.
const aggregationElection = "/mcpready/v1/elections/receipt-aggregation"

// aggregateShared is one term of the elected aggregator: it re-reads the
// receipts every still-open window needs, then follows the database, so
// windows hold every replica's receipts. A database failure ends the term
// (after a pause); the election then runs again.
func (p *receiptPipeline) aggregateShared(ctx context.Context, s *Server) {
	resume, from := p.agg.TermStart(time.Now())
	p.agg.Resume(resume)
	var wg sync.WaitGroup
	tctx, cancel := context.WithCancel(ctx)
	wg.Go(func() { p.agg.RunTerm(tctx) })
	err := p.db.Follow(tctx, from, func(sr *mcpreadyv1.StoredReceipt) error {
		p.agg.Observe(sr.GetAgentId(), []*mcpreadyv1.Receipt{sr.GetReceipt()}, []string{sr.GetDigest()})
		return nil
	})
	cancel()
	wg.Wait()
	if ctx.Err() == nil {
		s.o.Logger.Error("shared evidence aggregation stopped; campaigning again", "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(2 * time.Second):
		}
	}
}

// register adds the Receipts service to gs.
func (p *receiptPipeline) register(gs *grpc.Server) {
	mcpreadyv1.RegisterReceiptsServiceServer(gs, p.svc)
}

// run aggregates and applies retention until ctx ends.
func (p *receiptPipeline) run(ctx context.Context, s *Server, wg *sync.WaitGroup) {
	if p.subj != nil {
		wg.Go(func() { p.subj.watch(ctx) })
	}
	switch {
	case p.agg != nil && p.db != nil:
		wg.Go(func() {
			leader.Run(ctx, p.cli, aggregationElection, s.Addr(), leader.Options{OnError: func(error) { s.etcdErr.Inc() }, Logger: s.o.Logger},
				func(ctx context.Context) { p.aggregateShared(ctx, s) })
		})
	case p.agg != nil:
		wg.Go(func() {
			if err := p.agg.Run(ctx); err != nil && ctx.Err() == nil {
				s.o.Logger.Error("evidence aggregator stopped", "err", err)
			}
		})
	}
	if p.retain != nil {
		wg.Go(func() {
			t := time.NewTicker(retentionEvery)
			defer t.Stop()
			for {
				if n, err := p.retain(ctx); err != nil {
					s.o.Logger.Error("receipt retention", "err", err)
				} else if n > 0 {
					s.o.Logger.Info("receipt retention dropped old receipts", "segments_or_days", n)
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
